"""A study's spec: a TOML file of task tables, each a grid, checked whole before anything runs.

    [study]                       # optional
    name = "corpus"
    database = "corpus.sqlite"    # relative to the spec file
    time_limit = 120              # seconds per cell, enforced in the worker
    memory_limit = 4096           # MB of address space per cell

    [[extract]]                   # e-graph files x extractors x time limits x cost models
    inputs = ["data/tensat", "one.json"]
    extractors = ["tree", "greedy-dag", "ilp"]
    time_limit = 10               # the extractor's own limit (ILP, egglog); a list is a grid axis
    cost = "given"

    [[optimize]]                  # models x rule sets x cost models x extractors x node limits
    models = ["bert"]             # zoo models; inputs = [...] takes .relay and .onnx files
    rules = ["default", "algebraic+fusion"]
    cost = ["latency"]
    node_limit = [400, 1000]
    [optimize.model_options.bert]
    num_layers = 2

    [[call]]                      # any function "file.py:name" or "module:name", over a grid of args
    function = "probe.py:run"
    args = {n = [1, 2, 3]}

Every key of a task table whose value is a list is an axis of that table's grid; several tables
(or several ``[[extract]]``) are a list of grids. Each cell is one task.
"""

from __future__ import annotations

import glob
import hashlib
import itertools
import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import OptionError, RelayError, UnknownNameError

__all__ = ["StudyError", "Spec", "Cell", "load_spec", "parse_spec", "TASKS", "STUDY_KEYS",
           "extractor_names", "extract_costs"]


class StudyError(RelayError):
    """A study that cannot run as given: its spec, its database, or its cluster."""


STUDY_KEYS = ("name", "database", "time_limit", "memory_limit")
TASKS = {
    "extract": ("inputs", "extractors", "time_limit", "cost", "missing_roots"),
    "optimize": ("models", "inputs", "rules", "cost", "extractor", "node_limit", "iter_limit",
                 "time_limit", "ilp_time_limit", "measure", "model_options"),
    "call": ("function", "args"),
}
_REQUIRED = {"extract": ("inputs",), "optimize": (), "call": ("function",)}
_MODEL_SUFFIXES = (".relay", ".onnx")


def extractor_names() -> tuple[str, ...]:
    """The extractors a study runs on e-graph files (extract-bench's table)."""
    from ..egraph.extract.bench import EXTRACTORS

    return tuple(EXTRACTORS)


def extract_costs() -> tuple[str, ...]:
    """The node costs an extract cell takes: as given in the file, or a cost model."""
    from ..validate import cost_model_names

    return ("given", *cost_model_names())


@dataclass(frozen=True)
class Cell:
    """One task of a study: its kind, its parameters, and its key in the database."""

    kind: str
    params: dict
    key: str


@dataclass
class Spec:
    """A checked study spec: where it came from, its settings, its cells and its hash."""

    path: Path | None
    name: str
    database: Path | None
    time_limit: float | None
    memory_limit: float | None
    tasks: list[tuple[str, dict]]
    hash: str = ""
    cells: list[Cell] = field(default_factory=list)

    def limits(self) -> dict:
        """The per-cell limits the workers enforce."""
        return {"time_limit": self.time_limit, "memory_limit": self.memory_limit}


def load_spec(path: str | os.PathLike) -> Spec:
    """Read and check a spec file (TOML); relative paths in it are relative to its folder."""
    from ..validate import read_text

    path = Path(path)
    text = read_text(path, StudyError, "study spec")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise StudyError(f"{path}: not valid TOML: {exc}") from None
    return parse_spec(doc, base=path.parent, path=path)


def parse_spec(doc: dict, base: str | os.PathLike = ".", path: Path | None = None) -> Spec:
    """Check a spec given as a dict (what TOML gives) and expand its cells."""
    if not isinstance(doc, dict):
        raise StudyError(f"a study spec is a table of tables, got {type(doc).__name__}")
    base = Path(base)
    _unknown("top-level key", doc, ("study", *TASKS))
    study = doc.get("study", {})
    if not isinstance(study, dict):
        raise StudyError("[study] must be a table")
    _unknown("key in [study]", study, STUDY_KEYS)
    time_limit = _positive("study.time_limit", study.get("time_limit"))
    memory_limit = _positive("study.memory_limit", study.get("memory_limit"))
    database = study.get("database")
    if database is not None and not isinstance(database, str):
        raise StudyError(f"study.database must be a file name, got {database!r}")
    tasks: list[tuple[str, dict]] = []
    for kind in TASKS:
        tables = doc.get(kind, [])
        tables = [tables] if isinstance(tables, dict) else tables
        if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
            raise StudyError(f"[{kind}] must be a table or an array of tables ([[{kind}]])")
        for i, table in enumerate(tables):
            where = f"[[{kind}]] #{i + 1}"
            _unknown(f"key in {where}", table, TASKS[kind])
            for key in _REQUIRED[kind]:
                if key not in table:
                    raise StudyError(f"{where} needs the key {key!r}")
            tasks.append((kind, table))
    if not tasks:
        raise StudyError(f"the spec has no task table; give one of {', '.join(f'[[{k}]]' for k in TASKS)}")
    normal = {"study": {k: study[k] for k in ("time_limit", "memory_limit") if k in study},
              "tasks": [[k, t] for k, t in tasks]}
    digest = hashlib.sha256(json.dumps(normal, sort_keys=True, default=str).encode()).hexdigest()[:16]
    spec = Spec(path, str(study.get("name") or (path.stem if path else "study")),
                (base / database) if database else None, time_limit, memory_limit, tasks, digest)
    cells: dict[str, Cell] = {}
    for kind, table in tasks:
        for params in _EXPAND[kind](table, base):
            key = kind + ":" + json.dumps(params, sort_keys=True)
            cells.setdefault(key, Cell(kind, params, key))
    spec.cells = list(cells.values())
    return spec


def _unknown(what: str, table: dict, allowed) -> None:
    for key in table:
        if key not in allowed:
            raise UnknownNameError(f"unknown {what} {key!r}; allowed: {', '.join(allowed)}")


def _positive(name: str, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise OptionError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def _axis(table: dict, key: str, default, check=None) -> list:
    """The values of one grid axis: a list as given, a single value as a list of one."""
    value = table.get(key, default)
    values = list(value) if isinstance(value, list) else [value]
    if not values:
        raise StudyError(f"{key} is an empty list; give at least one value")
    if check is not None:
        for v in values:
            check(v)
    return values


def _known(key: str, allowed):
    allowed = list(allowed)

    def check(value) -> None:
        if value not in allowed:
            raise UnknownNameError(f"unknown {key} {value!r}; allowed: {', '.join(map(str, allowed))}")
    return check


def _limit(key: str, integer: bool = False):
    def check(value) -> None:
        if value is None:
            return
        ok = isinstance(value, int) if integer else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok or not value > 0:
            kind = "a positive integer" if integer else "a positive number"
            raise OptionError(f"{key} must be {kind}, got {value!r}")
    return check


def _files(inputs, base: Path, suffixes: tuple[str, ...], key: str = "inputs") -> list[str]:
    """The files of ``inputs`` (files, or folders searched for ``suffixes``), relative to ``base``.

    A path may start with an environment variable (``$EXTRACTION_GYM/tensat``): the cell keeps the
    variable in its name, so a database is the same wherever the data lives."""
    if isinstance(inputs, str):
        inputs = [inputs]
    if not isinstance(inputs, list) or not all(isinstance(p, str) for p in inputs):
        raise StudyError(f"{key} must be a list of file or folder paths, got {inputs!r}")
    out: list[str] = []
    for given in inputs:
        expanded = os.path.expandvars(given)
        if "$" in expanded:
            missing = re.findall(r"\$\{?(\w+)", expanded)
            raise StudyError(f"{key}: {given}: the environment variable {', '.join(missing)} is not set")
        path = base / expanded
        if path.is_dir():
            found = sorted(f for s in suffixes
                           for f in glob.glob(os.path.join(path, "**", "*" + s), recursive=True))
            if not found:
                raise StudyError(f"{key}: {given}: no {' or '.join(suffixes)} files in this folder")
            if expanded != given:
                out += [given.rstrip("/") + "/" + os.path.relpath(f, path) for f in found]
            else:
                out += [os.path.relpath(f, base) for f in found]
        elif path.exists():
            if not given.endswith(suffixes):
                raise StudyError(f"{key}: {given}: not a {' or '.join(suffixes)} file")
            out.append(given if expanded != given else os.path.relpath(path, base))
        else:
            raise StudyError(f"{key}: {given}: no such file or folder (relative to {base})")
    return list(dict.fromkeys(out))


def _expand_extract(table: dict, base: Path) -> list[dict]:
    files = _files(table["inputs"], base, (".json",))
    extractors = _axis(table, "extractors", list(extractor_names()), _known("extractor", extractor_names()))
    limits = _axis(table, "time_limit", 60.0, _limit("time_limit"))
    costs = _axis(table, "cost", "given", _known("cost model", extract_costs()))
    missing = table.get("missing_roots", "error")
    if missing not in ("error", "drop"):
        raise UnknownNameError(f"unknown missing_roots {missing!r}; allowed: error, drop")
    extra = {} if missing == "error" else {"missing_roots": missing}  # the hash of older specs holds
    return [{"input": f, "extractor": e, "time_limit": t, "cost": c, **extra}
            for f, c, t, e in itertools.product(files, costs, limits, extractors)]


def _rule_set(value) -> None:
    if not isinstance(value, str) or not value:
        raise StudyError(f"a rule set is a name like 'default' or 'algebraic+fusion', got {value!r}")
    from ..egraph.optimize import RULES_DIR

    for part in value.split("+"):
        if part != "default" and not (RULES_DIR / f"{part}.rules").exists() and not Path(part).exists():
            known = sorted(p.stem for p in RULES_DIR.glob("*.rules"))
            raise UnknownNameError(f"unknown rule set {part!r}; allowed: default, "
                                   f"{', '.join(known)} (joined with '+') or a .rules file path")


def _expand_optimize(table: dict, base: Path) -> list[dict]:
    from .. import zoo
    from ..validate import EXTRACTORS, cost_model_names

    models = _axis(table, "models", [], _known("model", zoo.names())) if "models" in table else []
    options = table.get("model_options", {})
    if not isinstance(options, dict):
        raise StudyError("model_options must be a table of tables, one per model")
    for name, opts in options.items():
        if name not in models:
            raise UnknownNameError(f"model_options names {name!r}, which is not in models; allowed: "
                                   f"{', '.join(models) or '(no models)'}")
        zoo.check_options(name, **opts)
    files = _files(table["inputs"], base, _MODEL_SUFFIXES) if "inputs" in table else []
    if not models and not files:
        raise StudyError("an [[optimize]] table needs models = [...] or inputs = [...]")
    programs = [{"model": m, "model_options": options.get(m, {})} for m in models]
    programs += [{"input": f} for f in files]
    grid = itertools.product(
        programs,
        _axis(table, "rules", "default", _rule_set),
        _axis(table, "cost", "latency", _known("cost model", cost_model_names())),
        _axis(table, "extractor", "ilp", _known("extractor", EXTRACTORS)),
        _axis(table, "node_limit", 50_000, _limit("node_limit", True)),
        _axis(table, "iter_limit", 30, _limit("iter_limit", True)),
        _axis(table, "time_limit", 60.0, _limit("time_limit")),
        _axis(table, "ilp_time_limit", 30.0, _limit("ilp_time_limit")),
        _axis(table, "measure", True, _known("measure", (True, False))))
    keys = ("rules", "cost", "extractor", "node_limit", "iter_limit", "time_limit", "ilp_time_limit",
            "measure")
    return [{**program, **dict(zip(keys, rest, strict=True))} for program, *rest in grid]


def _expand_call(table: dict, base: Path) -> list[dict]:
    function = table["function"]
    if not isinstance(function, str) or ":" not in function:
        raise StudyError(f"function must be 'file.py:name' or 'module:name', got {function!r}")
    where, _, name = function.rpartition(":")
    if where.endswith(".py"):
        if not (base / where).exists():
            raise StudyError(f"function: {where}: no such file (relative to {base})")
        where = str((base / where).resolve())
    args = table.get("args", {})
    if not isinstance(args, dict):
        raise StudyError(f"args must be a table of argument names to values, got {args!r}")
    names = sorted(args)
    axes = [_axis(args, n, None) for n in names]
    return [{"function": f"{where}:{name}", "args": dict(zip(names, combo, strict=True))}
            for combo in itertools.product(*axes)]


_EXPAND = {"extract": _expand_extract, "optimize": _expand_optimize, "call": _expand_call}
