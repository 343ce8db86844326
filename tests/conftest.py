"""Suite-wide guards: a test that would pass without checking anything fails instead."""

import os
import shutil
import tempfile

import pytest
from hypothesis import settings

# CI runs the property tests on a fixed seed, so a run is reproducible from its log; locally they
# explore new examples each time (and keep failures in .hypothesis/ to replay them).
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_configure(config):
    """The cpu cost model (optimize's default) reads a calibrated profile: the suite uses its own,
    made once per session by the quick calibration (seconds, not the full minute), so no test
    reads or writes the user's profile and none spends minutes calibrating."""
    directory = tempfile.mkdtemp(prefix="relaygraph-profile-")
    config._relaygraph_profile_dir = directory
    os.environ["RELAYGRAPH_PROFILE_DIR"] = directory  # subprocesses (CLI tests) share it
    os.environ["RELAYGRAPH_CALIBRATE"] = "quick"
    # The profile is keyed by thread counts; a module that sets them when imported (a benchmark's
    # one-thread setting) must not change them for the CLI subprocesses of later tests. These are
    # the counts BLAS and numexpr start with anyway: one thread per core.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(os.cpu_count() or 1))


@pytest.fixture(scope="session", autouse=True)
def cpu_profile():
    """The session's quick profile, made before the first test: no test's output (progress lines,
    timings) then depends on whether an earlier test already made it."""
    from relaygraph.egraph.cpu_cost import default_profile

    return default_profile(progress=False)


def pytest_unconfigure(config):
    directory = getattr(config, "_relaygraph_profile_dir", None)
    if directory:
        shutil.rmtree(directory, ignore_errors=True)


def pytest_collection_modifyitems(items):
    """An empty parametrization (a glob that found no files, a table with no entries) is an error:
    pytest would skip it silently."""
    for item in items:
        for mark in item.iter_markers("skip"):
            if str(mark.kwargs.get("reason", "")).startswith("got empty parameter set"):
                raise pytest.UsageError(f"{item.nodeid}: the parametrization is empty")
