"""egglog's own extractor, for comparison with the others.

For an e-graph read from a file, an egglog program is built from it: one placeholder per
e-class (``(C k)``, never extracted), one constructor per arity whose first argument is the
node's index (``(N2 17 (C 3) (C 4))``), each node unioned with its class, and its cost put in
egglog's cost table for that constructor. egglog then extracts each root, and the extracted
term's node indices give the choice back.

egglog's costs are unsigned integers: a node's cost is scaled so that the largest becomes
10**9 and rounded (a nonzero cost stays at least 1). egglog also charges 1 for the index
literal every node carries, a tie-break of 10**-9 of the largest cost. Its extraction is
tree-cost (and saturates at 2**64 - 1 on deep shared DAGs); the checker reports the DAG cost
of what it picked.

egglog cannot be interrupted once it runs, so extraction from a file runs in a child
process that is killed at the time limit; the result then has status ``"timeout"``. An
e-graph that came from a live egglog e-graph (``from_egglog``) is extracted by that e-graph's
own extractor in this process, where no time limit can apply.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from .check import ExtractionResult, make_result
from .gym import ExtractionError, ExtractionGraph, from_json

__all__ = ["egglog_extract", "serialize_egglog", "gym_program"]

_TOP_COST = 10**9
_SPAN_FILE = "<relaygraph extraction>"


def gym_program(graph: ExtractionGraph) -> list[str]:
    """The egglog commands that rebuild ``graph`` with its costs (one command per string)."""
    top = max(graph.costs, default=0.0) or 1.0
    scale = _TOP_COST / top
    arities = sorted({len(ch) for ch in graph.child_classes})
    out = ["(sort T)", "(constructor C (i64) T :unextractable)"]
    for a in arities:
        sig = " ".join(["i64"] + ["T"] * a)
        out.append(f"(constructor N{a} ({sig}) T)")
        out.append(f"(function cost_table_N{a} ({sig}) i64 :merge new)")
    for i, kids in enumerate(graph.child_classes):
        if i in graph.subsumed:
            continue
        cost = round(graph.costs[i] * scale)
        if cost == 0 and graph.costs[i] > 0:
            cost = 1
        args = "".join(f" (C {k})" for k in kids)
        out.append(f"(union (C {graph.classes[i]}) (N{len(kids)} {i}{args}))")
        out.append(f"(set (cost_table_N{len(kids)} {i}{args}) {cost})")
    return out


def _extract_program(graph: ExtractionGraph) -> tuple[list[int], int]:
    """Build the program in this process and extract every root: (chosen nodes, egglog cost)."""
    from egglog import bindings as b

    egraph = b.EGraph()
    commands = gym_program(graph)
    for i in range(0, len(commands), 200):  # one big string parses quadratically: send batches
        egraph.run_program(*egraph.parse_program("\n".join(commands[i:i + 200])))
    span = b.RustSpan(_SPAN_FILE, 0, 0)
    chosen: list[int] = []
    total = 0
    for root in graph.roots:
        expr = b.Call(span, "C", [b.Lit(span, b.Int(root))])
        (report,) = egraph.run_program(b.UserDefined(span, "extract", [expr, b.Lit(span, b.Int(0))]))
        total += int(report.cost)
        termdag = report.termdag
        seen: set[int] = set()
        stack = [report.term]
        while stack:
            term_id = stack.pop()
            if term_id in seen:
                continue
            seen.add(term_id)
            term = termdag.get(term_id)
            node = termdag.get(term.args[0]).value.value
            chosen.append(node)
            stack.extend(term.args[1:])
    return chosen, total


def _main() -> None:
    """Child-process entry: an extraction-gym document on stdin, the choice as JSON on stdout."""
    import egglog.bindings  # noqa: F401 - loaded before the clock starts

    doc = json.load(sys.stdin)
    graph = from_json(doc, name="<stdin>")
    start = time.perf_counter()
    chosen, cost = _extract_program(graph)
    json.dump({"nodes": chosen, "cost": cost, "seconds": time.perf_counter() - start}, sys.stdout)


def _choice_of(graph: ExtractionGraph, nodes: Sequence[int]) -> dict[int, int]:
    choice: dict[int, int] = {}
    for n in nodes:
        choice.setdefault(graph.classes[n], n)  # egglog picks one best node per class
    return choice


def egglog_extract(graph: ExtractionGraph, *, time_limit: float = 60.0) -> ExtractionResult:
    """Extract with egglog's extractor; ``status == "timeout"`` if it did not finish in time."""
    if graph.source_egraph is not None:
        return _extract_live(graph)
    start = time.perf_counter()
    payload = json.dumps(graph.to_json()).encode()
    command = [sys.executable, "-c", "from relaygraph.egraph.extract.egglog_extract import _main; _main()"]
    try:
        proc = subprocess.run(command, input=payload, capture_output=True, timeout=time_limit)
    except subprocess.TimeoutExpired:
        return ExtractionResult("egglog", graph, None, seconds=time.perf_counter() - start,
                                status="timeout", notes={"time_limit": time_limit})
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        raise ExtractionError(f"{graph.name}: egglog extraction failed: {tail[0]}")
    answer = json.loads(proc.stdout)
    wall = time.perf_counter() - start
    return make_result("egglog", graph, _choice_of(graph, answer["nodes"]), answer["seconds"],
                       notes={"egglog_cost": answer["cost"], "wall_seconds": wall})


# -- live egglog e-graphs -------------------------------------------------------------------------

def _egg_exprs(egraph, roots: Sequence[Any]) -> list:
    """Bindings expressions for ``roots`` (Python-declared egglog values or bindings expressions)."""
    from egglog.egraph import to_runtime_expr

    out = []
    for r in roots:
        if hasattr(r, "__egg_typed_expr__"):
            out.append(egraph._state.typed_expr_to_egg(to_runtime_expr(r).__egg_typed_expr__))
        else:
            out.append(r)
    return out


def _bindings_egraph(egraph):
    return getattr(egraph, "_egraph", egraph)


def serialize_egglog(egraph, roots: Sequence[Any]) -> dict:
    """The extraction-gym document of a live egglog e-graph, rooted at ``roots``."""
    if not roots:
        raise ExtractionError("from_egglog needs the root expressions to extract")
    serialized = _bindings_egraph(egraph).serialize(_egg_exprs(egraph, roots))
    return json.loads(serialized.to_json())


def _literal_ops(value) -> tuple[str, ...]:
    # How egglog's serializer writes a primitive leaf's op.
    raw = getattr(value, "value", value)
    if isinstance(raw, bool):
        return ("true" if raw else "false",)
    if isinstance(raw, str):
        return (json.dumps(raw), f'"{raw}"')
    return (str(raw), repr(raw))


def _extract_live(graph: ExtractionGraph) -> ExtractionResult:
    from egglog import bindings as b

    egraph, roots = graph.source_egraph
    start = time.perf_counter()
    by_key: dict[tuple, int] = {}
    for i, (op, kids) in enumerate(zip(graph.ops, graph.child_classes, strict=True)):
        if i not in graph.subsumed:
            by_key.setdefault((op, kids), i)
    span = b.RustSpan(_SPAN_FILE, 0, 0)
    chosen: list[int] = []
    for expr in _egg_exprs(egraph, roots):
        (report,) = _bindings_egraph(egraph).run_program(b.Extract(span, expr, b.Lit(span, b.Int(0))))
        chosen.extend(_termdag_nodes(graph, report.termdag, report.term, by_key))
    return make_result("egglog", graph, _choice_of(graph, chosen), time.perf_counter() - start)


def _termdag_nodes(graph: ExtractionGraph, termdag, root: int, by_key: dict[tuple, int]) -> list[int]:
    """Map an extracted term DAG onto the serialized nodes, children first, without recursion."""
    node_of: dict[int, int] = {}
    stack = [(root, False)]
    while stack:
        term_id, expanded = stack.pop()
        if term_id in node_of:
            continue
        term = termdag.get(term_id)
        args = list(getattr(term, "args", ()))
        if not expanded and args:
            stack.append((term_id, True))
            stack.extend((a, False) for a in args if a not in node_of)
            continue
        if hasattr(term, "args"):
            key = (term.name, tuple(graph.classes[node_of[a]] for a in args))
            candidates = [key]
        else:
            candidates = [(op, ()) for op in _literal_ops(term.value)]
        node = next((by_key[k] for k in candidates if k in by_key), None)
        if node is None:
            raise ExtractionError(f"{graph.name}: egglog extracted {termdag.to_string(term_id)[:80]}, "
                                  f"which is not a node of the serialized e-graph")
        node_of[term_id] = node
    return list(node_of.values())
