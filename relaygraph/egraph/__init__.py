"""E-graphs: the egglog bridge, saturation, extraction (``relaygraph.egraph.extract``) and cost models.

Nothing here imports egglog when the package is imported; the modules that need it import it
on first use.

    eg = RelayEGraph(mod)                                  # the bridge (relaygraph.egraph.bridge)
    report = saturate(eg, rules, node_limit=50_000)        # relaygraph.egraph.saturation
    print(report); best = eg.extract("greedy-dag", "latency")
"""

from __future__ import annotations

import importlib

__all__ = ["RelayEGraph", "saturate", "SaturationReport"]

_LAZY = {
    "RelayEGraph": "relaygraph.egraph.bridge",
    "saturate": "relaygraph.egraph.saturation",
    "SaturationReport": "relaygraph.egraph.saturation",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'relaygraph.egraph' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
