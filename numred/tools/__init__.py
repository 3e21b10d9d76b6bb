"""numred's command line and benchmark tooling (``numred COMMAND``, ``python -m numred COMMAND``):
``bench`` and its ``_bench_*`` parts, ``precompile`` and ``coldstart``. The engine never imports
it; it uses the engine's public functions and its registry of operators."""
