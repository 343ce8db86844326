"""Suite-wide guards: a test that would pass without checking anything fails instead."""

import os

import pytest
from hypothesis import settings

# CI runs the property tests on a fixed seed, so a run is reproducible from its log; locally they
# explore new examples each time (and keep failures in .hypothesis/ to replay them).
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_collection_modifyitems(items):
    """An empty parametrization (a glob that found no files, a table with no entries) is an error:
    pytest would skip it silently."""
    for item in items:
        for mark in item.iter_markers("skip"):
            if str(mark.kwargs.get("reason", "")).startswith("got empty parameter set"):
                raise pytest.UsageError(f"{item.nodeid}: the parametrization is empty")
