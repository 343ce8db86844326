"""The import layering DESIGN.md describes, checked on the source: every import, at any depth.

Imports flow one way: ir -> ty (core) -> ops -> ty (inference) / {text, eval, rewrite} ->
{passes, egraph, frontend} -> study -> cli. Only egraph/ imports egglog, only frontend/ onnx,
only study/ dask; only ty/ and ops/ touch sympy. No private name is imported across modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "relaygraph"

# the type core (with the package, which loads InferType lazily): what the op table may use;
# the rest of ty/ (InferType) sits above the op table
TY_CORE = {"relaygraph.ty", "relaygraph.ty.dims", "relaygraph.ty.solver", "relaygraph.ty.exhaustive",
           "relaygraph.ty.checked"}
LEVELS = {"ir": 0, "errors": 0, "progress": 0, "ty-core": 1, "ops": 2, "ty": 3, "text": 3, "eval": 3,
          "rewrite": 3, "dataflow_pattern": 3, "passes": 4, "egraph": 4, "frontend": 4, "zoo": 4,
          "study": 5, "synth": 5, "cli": 6}
# an IR node prints itself as Relay text, and ``rg.ty.infer_type`` loads InferType: both resolved
# on first use (inside a function), never at import
ALLOWED_UP = {("relaygraph.ir.expr", "relaygraph.text"), ("relaygraph.ir.module", "relaygraph.text"),
              ("relaygraph.ty", "relaygraph.ty.infer")}
# Open: none. The list can only shrink: an entry that no longer occurs fails the test.
KNOWN_UP: set[tuple[str, str]] = set()
THIRD_PARTY = {"egglog": {"egraph"}, "onnx": {"frontend"}, "dask": {"study"},
               "sympy": {"ty", "ty-core", "ops"}}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, list[str], int]]:
    """(imported module, names imported from it, line) for every import in the file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            out.append((target, [a.name for a in node.names], node.lineno))
    return out


def _targets(target: str, names: list[str]) -> list[str]:
    """The relaygraph modules an import runs: the module, its packages, imported submodules."""
    parts = target.split(".")
    out = [".".join(parts[:i]) for i in range(2, len(parts) + 1)]
    out += [f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES]
    return [m for m in out if m in MODULES]


def _layer(module: str) -> str | None:
    if module in TY_CORE:
        return "ty-core"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LEVELS else None


def _upward(name: str, path: Path) -> list[str]:
    """The imports of one module that go up the layering."""
    layer, bad = _layer(name), []
    if layer is None:
        return bad
    for target, names, line in _imports(name, path):
        if not target.startswith("relaygraph"):
            continue
        for dep in _targets(target, names):
            dep_layer = _layer(dep)
            if dep_layer is None or LEVELS[dep_layer] <= LEVELS[layer]:
                continue
            if any(name == a and (dep == b or dep.startswith(b + ".")) for a, b in ALLOWED_UP):
                continue
            bad.append(f"{name}:{line} ({layer}) imports {dep} ({dep_layer})")
    return bad


def _private(name: str, path: Path) -> list[str]:
    """The private names one module imports from another (private submodules are fine)."""
    bad = []
    for target, names, line in _imports(name, path):
        if target.startswith("relaygraph"):
            bad += [f"{name}:{line} imports {n} from {target}" for n in names
                    if n.startswith("_") and not n.startswith("__") and f"{target}.{n}" not in MODULES]
    return bad


def test_imports_follow_the_design_layering():
    found = [v for name, path in MODULES.items() for v in _upward(name, path)]
    known = {f"{a}:{b}" for a, b in KNOWN_UP}
    unexpected = [v for v in found if not any(_is(v, a, b) for a, b in KNOWN_UP)]
    assert unexpected == []
    still = {f"{a}:{b}" for a, b in KNOWN_UP if any(_is(v, a, b) for v in found)}
    assert still == known, "fixed: remove from KNOWN_UP"


def _is(violation: str, module: str, dep: str) -> bool:
    """Whether a violation is ``module`` importing ``dep`` (or its package, on the way)."""
    return violation.startswith(module + ":") and (
        violation.split(" imports ")[1].split(" ")[0] in (dep, dep.rpartition(".")[0]))


def test_the_type_core_is_below_the_op_table_and_inference_above_it():
    core_deps = {dep for name in TY_CORE for target, names, _ in _imports(name, MODULES[name])
                 for dep in _targets(target, names)}
    assert not {d for d in core_deps if d.startswith("relaygraph.ops")}
    ops_deps = {dep for name, path in MODULES.items() if name.startswith("relaygraph.ops")
                for target, names, _ in _imports(name, path) for dep in _targets(target, names)}
    assert "relaygraph.ty.infer" not in ops_deps and "relaygraph.ty.dims" in ops_deps
    # the op table imports the type core through the package: the package must not run InferType
    init = ast.parse(MODULES["relaygraph.ty"].read_text())
    eager = {n.module for n in init.body if isinstance(n, ast.ImportFrom)}
    assert "infer" not in eager and "dims" in eager


@pytest.mark.parametrize("package,allowed", sorted(THIRD_PARTY.items()))
def test_third_party_packages_are_imported_only_where_the_design_says(package, allowed):
    users = sorted({name for name, path in MODULES.items()
                    for target, _, _ in _imports(name, path)
                    if target == package or target.startswith(package + ".")})
    assert [u for u in users if _layer(u) not in allowed] == []


def test_no_private_name_is_imported_across_modules():
    assert [v for name, path in MODULES.items() for v in _private(name, path)] == []


def test_the_checks_find_violations(tmp_path):
    fake = tmp_path / "fake.py"
    fake.write_text("from ..egraph.bridge import RelayEGraph\n"
                    "def f():\n    from ..ty.infer import _solve\n    from . import _base\n")
    up = _upward("relaygraph.ops.fake", fake)
    assert len(up) == 3 and "imports relaygraph.egraph.bridge (egraph)" in up[1]
    assert any("relaygraph.ty.infer (ty)" in v for v in up)
    assert _private("relaygraph.ops.fake", fake) == [
        "relaygraph.ops.fake:3 imports _solve from relaygraph.ty.infer"]
