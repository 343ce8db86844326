"""Suite-wide guards: a test that would pass without checking anything fails instead."""

import pytest


def pytest_collection_modifyitems(items):
    """An empty parametrization (a glob that found no files, a table with no entries) is an error:
    pytest would skip it silently."""
    for item in items:
        for mark in item.iter_markers("skip"):
            if str(mark.kwargs.get("reason", "")).startswith("got empty parameter set"):
                raise pytest.UsageError(f"{item.nodeid}: the parametrization is empty")
