"""What one cell does, in whatever process runs it: a dict of results, or one with an ``error``."""

from __future__ import annotations

import importlib
import importlib.util
import math
import time
from pathlib import Path

__all__ = ["run_cell", "warm"]

_WARM = {"extract": ("relaygraph.egraph.extract.bench", "relaygraph.egraph.cost", "scipy.optimize",
                     "scipy.sparse", "scipy.optimize._highspy._core"),
         "optimize": ("relaygraph.egraph.optimize", "relaygraph.zoo", "relaygraph.text",
                      "relaygraph.egraph.extract", "scipy.optimize", "scipy.sparse")}
_warmed: set[str] = set()


def warm(kind: str) -> None:
    """Import what a kind of cell needs, once, in the process that forks the cells (each child
    then starts with it loaded instead of importing it again)."""
    if kind in _warmed:
        return
    _warmed.add(kind)
    for name in _WARM.get(kind, ()):
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # the cell itself reports what is missing


def run_cell(kind: str, params: dict, base: str) -> dict:
    """Run one cell; failures of the task itself come back as ``{"error": ...}``, not raised."""
    try:
        return _RUN[kind](params, Path(base))
    except MemoryError:
        raise  # the worker reports it as the memory limit
    except Exception as exc:  # noqa: BLE001 - one cell's failure is a row, the study goes on
        return {"error": f"{type(exc).__name__}: {exc}" if not _relay_error(exc) else str(exc)}


def _relay_error(exc: Exception) -> bool:
    from ..errors import RelayError

    return isinstance(exc, RelayError)


def _extract(p: dict, base: Path) -> dict:
    from ..egraph.extract import bench

    rows = bench.run_file(str(base / p["input"]), [p["extractor"]], p["time_limit"], p["cost"],
                          label=p["input"], missing_roots=p.get("missing_roots", "error"))
    row = dict(rows[0])
    for key in ("tree_cost", "dag_cost", "gap", "seconds"):
        if isinstance(row.get(key), float) and math.isnan(row[key]):
            row[key] = None
    if row.get("optimal") == "":
        row["optimal"] = None
    if row.get("gap") == "":
        row["gap"] = None
    if row["status"].startswith("error"):
        status = row["status"]
        row["error"] = status[len("error: "):] if status.startswith("error: ") else status
    return row


def _rules(name: str) -> list[Path]:
    from ..egraph.optimize import RULES_DIR, default_rule_files

    out: list[Path] = []
    for part in name.split("+"):
        if part == "default":
            out += default_rule_files()
        elif (RULES_DIR / f"{part}.rules").exists():
            out.append(RULES_DIR / f"{part}.rules")
        else:
            out.append(Path(part))
    return list(dict.fromkeys(out))


def load_program(p: dict, base: Path):
    """The module and params of an optimize cell: a zoo model, a .relay file or an .onnx file."""
    from ..errors import RelayError

    if "model" in p:
        from .. import zoo

        return zoo.get(p["model"], **p.get("model_options", {}))
    path = base / p["input"]
    if path.suffix == ".onnx":
        try:
            frontend = importlib.import_module("relaygraph.frontend")
            from_onnx = frontend.from_onnx
        except (ImportError, AttributeError):
            raise RelayError(f"{p['input']}: importing ONNX needs rg.frontend.from_onnx, which this "
                             "relaygraph does not have") from None
        return from_onnx(str(path))
    from ..text import parse_file

    return parse_file(str(path)), None


def _optimize(p: dict, base: Path) -> dict:
    from ..egraph.optimize import optimize

    mod, params = load_program(p, base)
    start = time.perf_counter()
    res = optimize(mod, rules=_rules(p["rules"]), cost=p["cost"], extractor=p["extractor"],
                   node_limit=p["node_limit"], iter_limit=p["iter_limit"], time_limit=p["time_limit"],
                   ilp_time_limit=p["ilp_time_limit"], params=params, check=p["measure"],
                   repeats=3, timing_budget=0.5 if p["measure"] else 0)
    sat = res.saturation
    return {"cost_before": res.cost_before, "cost_after": res.cost_after,
            "reduction": 1 - res.cost_after / res.cost_before if res.cost_before else None,
            "optimal": res.optimal, "enodes": getattr(sat, "nodes", None),
            "saturation": getattr(sat, "stop_reason", None),
            "nodes_before": res.nodes_before, "nodes_after": res.nodes_after,
            "extraction_seconds": res.extraction_seconds, "seconds": time.perf_counter() - start,
            "numpy_seconds_before": res.seconds_before, "numpy_seconds_after": res.seconds_after,
            "speedup": res.speedup, "check": res.check_passed, "max_abs_error": res.max_abs_error}


def _call(p: dict, base: Path) -> dict:
    where, _, name = p["function"].rpartition(":")
    if where.endswith(".py"):
        spec = importlib.util.spec_from_file_location(Path(where).stem, where)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    value = getattr(module, name)(**p["args"])
    return dict(value) if isinstance(value, dict) else {"value": value}


_RUN = {"extract": _extract, "optimize": _optimize, "call": _call}
