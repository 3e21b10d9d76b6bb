"""Shared ground of the kernels: fastmath flags, the compensation block, views of the input's
memory without reference counting, scratch arrays, bit casts, the walk over a "kept x reduced"
geometry (tasks, runs, offsets), and the operator terms (terms) passed as compile-time constants.

Kernels validate nothing: the front end (``numred._frontend``) and the plan (``numred._plan``) hand
them a consistent description of the input, and they compute. The input arrives as ``src``: a 1-D
contiguous view of the memory the input spans, in a *carrier* dtype Numba can load (float16 as
uint16 bits, bfloat16 as int16 bits, see ``decode.as_float64``), plus element offsets and strides;
``base`` is the offset of its first element. Every kernel has ``nk`` outputs, each reduced over
``nr`` elements; the reduced range of one output may be cut into ``nchunks`` pieces (tasks) whose
partial states the ``finish`` kernels combine in chunk order (``states``).
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from llvmlite import ir
from numba.core import cgutils
from numba.core.imputils import impl_ret_new_ref
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

from .jit import renamed_copy, subroutine

# reassociation lets LLVM vectorise the sums; fastmath=True would also assume no NaN/inf and
# delete exactly the checks the contract depends on.
FASTMATH = {"reassoc", "contract"}
# Every other function, subroutine and overload here states its fastmath flags itself: Numba
# compiles an njit function or overload that leaves them unset with the flags of the caller that
# first compiles it (inherit_if_not_set), so error-free transformations such as _split and Neumaier's
# addition, called from FASTMATH loops, could get reassoc and contract, depending on the order in
# which things were compiled. (Subroutines take them as a required argument: kernels.jit.)

# Length of the pieces summed with a plain (vectorised) float64 loop; the pieces are then added with
# compensated (Neumaier) summation, which keeps float64 inputs at least as exact as NumPy's pairwise sum.
BLOCK = 256
NEVER = 1 << 62  # the compensation block of narrower floats

_U64 = np.uint64


def njit_for(*constants, fastmath):
    """A ``subroutine`` (kernels.jit) for a function made by a factory, under a name of its own per factory
    arguments (``constants``): Numba names compiled code after the qualified name, the signature and
    a per-process counter, so two closures of one factory with the same signature, compiled in
    different processes and linked into cached kernels that one process loads, could share a symbol
    and run one body for both (numba#10486)."""

    def decorate(fn):
        suffix = "_".join(str(int(c)) if isinstance(c, bool) else str(c) for c in constants)
        fn.__name__ = f"{fn.__name__}_{suffix}"
        fn.__qualname__ = f"{fn.__qualname__}_{suffix}"
        return subroutine(fastmath)(fn)

    return decorate


def inlined(fn):
    """A copy of the njit function ``fn`` that Numba inlines into its callers' IR (inline="always")
    instead of compiling it as a function of its own, under a name of its own (see njit_for)."""
    copy = renamed_copy(fn.py_func, "_inlined")
    return njit(fastmath=fn.targetoptions.get("fastmath", False), inline="always")(copy)


@intrinsic
def _view(typingctx, src, start, stop):
    """src[start:stop] for 0 <= start <= stop <= len(src), without a slice's bounds arithmetic
    (clamping, negative starts) and without a reference to src's memory (as _borrowed). Short float64
    rows handed to their split sums as slices are markedly slower than with these views: LLVM does
    not inline the call for the slice."""

    def codegen(context, builder, signature, args):
        whole = context.make_array(signature.args[0])(context, builder, args[0])
        view = context.make_array(signature.return_type)(context, builder)
        populate_array(view, data=builder.gep(whole.data, [args[1]]), shape=[builder.sub(args[2], args[1])],
                       strides=[whole.itemsize], itemsize=whole.itemsize, meminfo=None)
        return view._getvalue()

    if not (isinstance(src, types.Array) and src.ndim == 1 and src.layout == "C"):
        return None
    return src(src, types.intp, types.intp), codegen


def _element_type(dtype):
    """The element type of a dtype argument: a NumPy scalar type (np.float64) or an array's dtype."""
    if isinstance(dtype, types.NumberClass):
        return dtype.instance_type
    if isinstance(dtype, types.DType):
        return dtype.dtype
    if isinstance(dtype, (types.Integer, types.Float)):  # a value, for its type (filled_array)
        return dtype
    return None


def _new_vector(context, builder, array_type, size):
    """A new 1-D C array of ``size`` (>= 0, an intp) elements in Numba's runtime memory, as np.empty
    lowers it (numba.np.arrayobj._empty_nd_impl), without the overload that Numba's lowering calls
    for the allocation itself (compiled in every process: 30-40 ms of a first call). Scratch sizes
    come from arrays that exist, so size * itemsize does not overflow."""
    array = make_array(array_type)(context, builder)
    itemsize = context.get_constant(types.intp, context.get_abi_sizeof(context.get_data_type(array_type.dtype)))
    align = context.get_constant(types.uint32, context.get_preferred_array_alignment(array_type.dtype))
    meminfo = context.nrt.meminfo_alloc_aligned(builder, builder.mul(size, itemsize), align)
    data = context.nrt.meminfo_data(builder, meminfo)
    intp = context.get_value_type(types.intp)
    populate_array(array, data=builder.bitcast(data, context.get_data_type(array_type.dtype).as_pointer()),
                   shape=cgutils.pack_array(builder, [size], ty=intp),
                   strides=cgutils.pack_array(builder, [itemsize], ty=intp), itemsize=itemsize, meminfo=meminfo)
    return array


def _allocator(zeroed, doc):
    # The kernels' scratch arrays. np.empty, np.zeros and np.full are overloads that Numba compiles
    # in each process, per dtype, on a first call that uses them: 0.1-0.4 s of a cold first call.
    # These intrinsics are lowered in place.
    @intrinsic
    def allocate(typingctx, n, dtype):
        element = _element_type(dtype)
        if element is None or not isinstance(n, types.Integer):
            return None
        array_type = types.Array(element, 1, "C")

        def codegen(context, builder, signature, args):
            size = context.cast(builder, args[0], signature.args[0], types.intp)
            array = _new_vector(context, builder, array_type, size)
            if zeroed:
                cgutils.memset(builder, array.data, builder.mul(array.itemsize, array.nitems), 0)
            return impl_ret_new_ref(context, builder, array_type, array._getvalue())

        return array_type(n, dtype), codegen

    allocate.__doc__ = doc
    return allocate


new_array = _allocator(False, "new_array(n, dtype): np.empty(n, dtype) (dtype: np.float64, a.dtype), for n >= 0.")
zeroed_array = _allocator(True, "zeroed_array(n, dtype): np.zeros(n, dtype), for n >= 0.")


@njit(fastmath=False, inline="always")
def filled_array(n, value):
    """np.full(n, value), in value's type."""
    array = new_array(n, value)
    for i in range(n):
        array[i] = value
    return array


@intrinsic
def _borrowed(typingctx, array):
    """``array`` as a borrowed reference: the same array without its memory's reference count, so
    that what Numba increments and decrements around every call it is handed to, and for every
    slice of it, is nothing. Those counts are atomic: with two threads handing the same input to a
    call per row, the two cores fight over the count's cache line, which slows calls per row
    noticeably. Each kernel
    borrows the arrays it reads while the caller holds them, never one it writes: Numba takes the
    borrowed array for a new one of the kernel's own, and drops a parallel loop whose only effect
    is to store into it (int_rows then wrote nothing)."""

    def codegen(context, builder, signature, args):
        return borrowed_array(context, builder, signature.args[0], args[0])

    if not isinstance(array, types.Array):
        return None
    return array(array), codegen


def borrowed_array(context, builder, array_type, value):
    """The LLVM value of the array ``value`` (of Numba type ``array_type``) without its memory's
    reference count (_borrowed's code; numred._runtime's launchers hand arrays on so)."""
    borrowed = context.make_array(array_type)(context, builder, value)
    borrowed.meminfo = ir.Constant(borrowed.meminfo.type, None)
    return borrowed._getvalue()


def _bitcast(source, target):
    """An intrinsic reading the bits of a ``source`` value as a ``target`` value (same width)."""

    @intrinsic
    def bitcast(typingctx, value):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(target))

        return target(source), codegen

    return bitcast


_bits_to_float32 = _bitcast(types.uint32, types.float32)
_bits_to_float64 = _bitcast(types.int64, types.float64)
_float64_to_bits = _bitcast(types.float64, types.int64)
_float32_to_bits = _bitcast(types.float32, types.uint32)


def _integer_pick(larger_one, doc):
    # The kernels' integer min and max, lowered in place. Python's min and max are overloads that
    # Numba compiles in each process, per pair of argument types, on a first call that uses them:
    # 20-30 ms each, and a kernel used them with several pairs.
    @intrinsic
    def pick(typingctx, a, b):
        if not (isinstance(a, types.Integer) and isinstance(b, types.Integer)):
            return None
        common = types.unliteral(typingctx.unify_pairs(a, b))
        if not isinstance(common, types.Integer):  # (int64 and uint64 unify to float64)
            return None

        def codegen(context, builder, signature, args):
            x = context.cast(builder, args[0], signature.args[0], common)
            y = context.cast(builder, args[1], signature.args[1], common)
            compare = builder.icmp_signed if common.signed else builder.icmp_unsigned
            return builder.select(compare(">" if larger_one else "<", x, y), x, y)

        return common(a, b), codegen

    pick.__doc__ = doc
    return pick


larger = _integer_pick(True, "larger(a, b): max(a, b) of two integers, in the type they unify to.")
smaller = _integer_pick(False, "smaller(a, b): min(a, b) of two integers, in the type they unify to.")


def call_part(typingctx, part, arg_types, kept):
    """For an intrinsic that dispatches on constant arguments: its (signature, codegen), which call
    the subroutine ``part`` (chosen by the intrinsic from the constants) with the arguments at
    the positions ``kept``. An overload that only forwards to such a part is compiled as a function
    of its own in every first call (80-90 ms); this call is lowered in place, as the overload's
    inlined call was."""
    typingctx.refresh()  # (a part made by its factory while typing is registered since the last refresh)
    part_type = typingctx.resolve_value_type(part)
    part_signature = typingctx.resolve_function_type(part_type, tuple(arg_types[i] for i in kept), {})
    if part_signature is None:
        return None

    def codegen(context, builder, signature, args):
        values = [context.cast(builder, args[i], signature.args[i], to) for i, to in zip(kept, part_signature.args)]
        return context.get_function(part_type, part_signature)(builder, values)

    return part_signature.return_type(*arg_types), codegen


@njit(fastmath=False, inline="always")
def integer_total(lanes):
    """lanes.sum() of an integer array, in its own type (wrapping): the same loop, without compiling
    Numba's array sum (about 50 ms of a first call)."""
    total = lanes.dtype.type(0)
    for i in range(lanes.size):
        total += lanes[i]
    return total


# The walk's helpers below are inlined into their callers' IR (Numba's inline="always"), not compiled
# as functions of their own: each function compiled on its own costs a first call about 0.1 s,
# however small, and a kernel that walks a general geometry calls six or seven of these
# (docs/changes.md, "The geometry walk inlined everywhere"). They do integer arithmetic only, so
# the caller's fastmath flags, which they take inlined, change nothing.
@njit(fastmath=False, inline="always")
def _offset_of(index, shape, strides):
    """Element offset of the C-order flat ``index`` (< prod(shape)) into a block of dimensions
    (shape, strides). The outermost dimension needs no modulo: with one dimension, no division."""
    offset = 0
    for d in range(shape.size - 1, 0, -1):
        n = shape[d]
        outer = index // n
        offset += (index - outer * n) * strides[d]
        index = outer
    return offset + index * strides[0]


@njit(fastmath=False, inline="always")
def _next_run(pos, end, rshape, rstrides):
    """(offset, length) of the run of reduced positions [pos, end) that lies along the innermost
    reduced axis: the unit the kernels' inner loops take. Divisions only for 2+ reduced axes (they are
    per run, and a run may be short)."""
    if rshape.size == 1:
        return pos * rstrides[0], end - pos
    run_length = rshape[-1]
    return _offset_of(pos, rshape, rstrides), smaller(run_length - pos % run_length, end - pos)


@njit(fastmath=False, inline="always")
def _product(values):
    """The product of an int64 array's entries: np.prod, whose generic overload costs a first call's
    compile more than this loop."""
    product = 1
    for value in values:
        product *= value
    return product


@njit(fastmath=False, inline="always")
def _walker(dims, kept_ndim):
    """What every kernel that walks a general geometry starts from, out of the plan's one dims array:
    (kept shape, kept strides, reduced shape, reduced strides, elements reduced per output, the
    innermost reduced stride)."""
    reduced_ndim = (dims.size - 2 * kept_ndim) // 2
    r0 = 2 * kept_ndim
    rshape, rstrides = dims[r0:r0 + reduced_ndim], dims[r0 + reduced_ndim:]
    return dims[:kept_ndim], dims[kept_ndim:r0], rshape, rstrides, _product(rshape), rstrides[-1]


@njit(fastmath=False, inline="always")
def share(n_tasks, part, parts):
    """The tasks [first, end) of part ``part`` of ``parts`` of a kernel's ``n_tasks`` tasks: every kernel
    Python calls takes (part, parts) first, computes those tasks, and is compiled once, for a serial
    call (0, 1) and for each part of a parallel launch (numred.kernels.jit.Kernel) alike."""
    return n_tasks * part // parts, n_tasks * (part + 1) // parts


@njit(fastmath=False, inline="always")
def _n_tasks(kshape, tile, nchunks):
    rows = _product(kshape) // kshape[-1]
    return rows * ((kshape[-1] + tile - 1) // tile) * nchunks


@njit(fastmath=False, inline="always")
def _task(task, kshape, tile, nchunks, nr):
    """One task: ``width`` consecutive outputs from flat output index ``k0`` along the innermost kept
    dimension (a tile), over reduced positions [first, end) (a chunk). The common cases (one chunk,
    no tile) skip the divisions: with short reduced ranges they cost as much as the reduction."""
    if nchunks == 1:
        t, c, first, end = np.int64(task), 0, 0, nr
    else:
        t = task // nchunks
        c = task - t * nchunks
        first, end = nr * c // nchunks, nr * (c + 1) // nchunks
    if tile == 1:
        return t, 1, c, first, end
    tiles_per_row = (kshape[-1] + tile - 1) // tile
    row = t // tiles_per_row
    column = (t - row * tiles_per_row) * tile
    return row * kshape[-1] + column, smaller(tile, kshape[-1] - column), c, first, end


# the terms: x, x * x, exp(x - max), |x|. Every float sum kernel takes x, x * x and |x| (ReduceL1);
# exp(x - max) has kernels of its own beside the general one
SUM, SUM_SQUARES, SUM_EXP, SUM_ABS = 0, 1, 2, 3
TERM_NAMES = {SUM: "sum", SUM_SQUARES: "sum_squares", SUM_EXP: "sum_exp", SUM_ABS: "sum_abs"}
# finish steps of unrounded float64 sums (an operator's Reduction.finish): the one rounding alone
# (ReduceL1: what every sum kernel stores), the square root (ReduceL2), the log (ReduceLogSum); the
# float sum kernels take SQRT and LOG as a runtime argument (store.finished), 0 meaning none beyond a
# mean's division
ROUND, SQRT, LOG = 1, 2, 3


def _constant(arg, name):
    """The value of argument ``name`` typed as a literal (a constant at the call), for the functions
    compiled once per constant (the term of _add_run, _float_run and _float_row; float_bits of
    max_run and max_columns): every caller passes a constant."""
    if not isinstance(arg, types.Literal):
        raise TypeError(f"{name} must be a constant at the call, got {arg}")
    return arg.literal_value


# The float64 split sums are reached only for float64 data, but a kernel's branch on
# compensation_block(src) is not folded by Numba: called directly, they were compiled into every
# float32, float16 and bfloat16 kernel too (a third of a float32 row kernel's compile time). Called
# through these gates, other data compiles a stub instead.
def _is_one(step):
    """Whether a ``step`` argument is the constant 1 at the call: a contiguous run."""
    return isinstance(step, types.IntegerLiteral) and step.literal_value == 1
