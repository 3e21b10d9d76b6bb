"""Shared test configuration: the hypothesis profiles and the import path of tests/oracle.py.

The default profile ("ci") is derandomized so that CI runs are reproducible. HYPOTHESIS_PROFILE=dev
draws random examples (pass --hypothesis-seed=N to vary them) for local bug hunting; the property
tests fix their own example counts with @settings.
"""
from __future__ import annotations

import os
import sys
import time
import warnings

import pytest
from hypothesis import HealthCheck, settings

# make `import oracle` work whatever the import mode
sys.path.insert(0, os.path.dirname(__file__))

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,  # Numba compiles kernels on first call
    max_examples=100,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
settings.register_profile(
    "dev",
    derandomize=False,
    deadline=None,
    max_examples=500,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# A session of at least this many tests calls nearly every kernel: they are compiled first, one process
# per core (numred.tools.precompile), instead of one by one in this process as the tests reach them, which
# was most of a cold run's time (CI: 18 of 21 minutes). A run of a few tests compiles only what it calls.
# NUMRED_PRECOMPILED=1 says the cache is filled already (.ci/run's `precompile` step): loading every
# kernel again here, only to find it there, took CI half a minute.
PRECOMPILE_MIN_TESTS = 200


def _precompile(config, tests: int) -> None:
    if tests < PRECOMPILE_MIN_TESTS or os.environ.get("NUMRED_PRECOMPILED") == "1":
        return
    from numred.tools.precompile import Progress, precompile

    reporter = config.pluginmanager.get_plugin("terminalreporter")
    start = time.perf_counter()
    precompile(progress=None if reporter is None else Progress(write=reporter.write_line))
    if reporter is not None:
        reporter.write_line(f"numred precompile: {time.perf_counter() - start:.1f} s")


def pytest_collection_finish(session):
    # the whole session in this process (`-n 0`, or pytest-xdist not installed); under pytest-xdist
    # the workers collect too, but the controller precompiles once for them (below)
    if not hasattr(session.config, "workerinput"):
        _precompile(session.config, len(session.items))


_precompiled_for_workers = []


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    # pytest-xdist's controller, when the first worker has collected: it hands out no test before
    # this returns, so no worker compiles a kernel that precompile is compiling
    if not _precompiled_for_workers:
        _precompiled_for_workers.append(node)
        _precompile(node.config, len(ids))


def pytest_configure(config):
    # onnx emits RuntimeWarnings when its backend test cases are generated; they are not ours
    warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"onnx\..*")


def pytest_collection_modifyitems(config, items):
    # Tests marked slow first (in their order): with one worker per core (pytest-xdist's worksteal),
    # a long test collected late starts near the end of the run, and one core then waits while the
    # other finishes it (CI: the last 100 s of the tests on one core).
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
