"""DAG-optimal extraction by integer programming, solved by HiGHS.

The program is written for the e-graph's decision core (``reduce``: nodes that can only close
a cycle, dominated nodes, free single-node classes and single-node classes with one user class
are gone; on TENSAT's ResNet-50 4,350 nodes become 2,086 and 2,656 classes 762), whose answers
expand to answers of the original at the same cost. After pruning (see ``prune``), one binary
``x[n]`` per node says the node is chosen, one binary ``y[k]`` per class that the class is
used, and ``z`` is the objective's value::

    minimise   z = sum cost[n] * x[n]
    subject to y[k] = sum(x[n] for n in class k) <= 1     for each class k (y[r] = 1 for a root r)
               sum(x[n] for n in U) <= y[d]                for each class c and child class d,
                                                           U the nodes of c with child d
               z >= P, z >= p[n] * x[n]                    path lower bounds (see below)
    and no cycle among the chosen nodes, by one of:
      "order": t[d] - t[c] + M * sum(x[n] for n in U) <= M - 1
                                                           for c, d and U as above, c and d on
                                                           one cycle (M = its size)
      "lazy":  sum(x[n] for n in a class of S with a child in S) <= |S| - 1
                                                           for each set S of classes found on a
                                                           cycle of a relaxed answer

Position variables ``t`` must grow from child to parent along chosen nodes; they are written
only inside strongly connected components of the class graph (an e-graph without cycles gets
none). The lazy variant solves without them, cuts every cycle of the answer (a lowest class of
S cannot use a child in S) and solves again; an acyclic answer of the relaxed program is
optimal. The path bounds (``prune.path_bounds``: a term costs at least its most expensive chain
of nodes) see acyclicity directly: when the start meets the root's bound, it is optimal without
reducing or solving.

The class variables add nothing to the relaxation, but the solver can branch on them (is this
class used at all?), which is what closes Rover's programs, where answers differ mostly in
which shared classes they use: box_filter_3 is proved in about 20 s with them and not in 90 s
without (one idle core).

Before the whole program, ``ilp`` looks for a better answer (see ``_solve_core``): a small
program is first tried whole; then the relaxation-guided search (``_guided_search``) re-solves
parts of the program where the linear relaxation disagrees with the answer, and the
neighbourhood search (``lns.neighbourhood_search``) parts around the answer; both pin the rest
(``lns.restricted``). The relaxation-guided search is what finds TENSAT BERT's best known
answer (0.70472, which CPLEX proved optimal in 70 minutes in the SmoothE artifact): there the
optimum merges the four matrix products of each layer into one, a change no small
neighbourhood around one class holds and no single swap pays for.

First of all, reduced-cost fixing (``fixing``) drops the nodes that no answer as cheap as the
start can use: the linear relaxation's duals give a lower bound and, per node, how much choosing
it would add to that bound. What is dropped makes more options cycle-only or dominated, so the
e-graph is reduced again and the fixing repeated while it drops something; requirement rows
(classes every acyclic term of a class contains) tighten the relaxation inside cycles. On
TENSAT's BERT this turns 18,285 core nodes into 3,766 and the relaxation from 0.586 into 0.600
(from the greedy start); the searches then find 0.70472 and prove it. The answer on the smaller
e-graph is an answer of the original, and the optimum is the same (see ``fixing``).

Before any of that, an e-graph that separates (``decompose``: a class through which alone
everything below it is reached) is cut into parts, solved one by one from the bottom up, each
lower part standing in the one above it as a leaf of its answer's cost: with costs of at least
zero the answers together are optimal when each part's is. BERT-base's 12 layers after the cpu
rules (10,474 nodes) fall into 25 parts, all proved in about 7 s, where the whole program stopped
at 30 s with a 13% gap and a 0.4% dearer answer; TENSAT's ResNet-50 is proved in 1.1 s instead of 4.8.

Costs may be any finite numbers. With a negative cost somewhere, an unneeded class could pay
for itself, so each chosen non-root class must also have a chosen parent node::

               sum(x[n] for n in class k) <= sum(x[m] for m a node with child class k)

which with acyclicity means every chosen class is reachable from a root; the path bounds and
dominance (which assume non-negative costs) are then left out.

Anytime: the result's ``notes["trace"]`` lists ``(seconds, best cost, lower bound)`` as the
solver improves either, and on a time-out the best answer found is returned with its gap
(``notes["lower_bound"]``). A program with more than ``max_nonzeros`` matrix entries, or one
the solver runs out of memory on, is not solved: the warm start (the best heuristic answer) is
returned with a ``RuntimeWarning`` and ``status == "memory-limit"``.

Backends: ``"highs"`` drives the HiGHS build that SciPy ships (``scipy.optimize._highspy``)
and gives it the best acyclic answer so far (first the greedy DAG one) as a true warm start
(``setSolution``). ``"milp"`` uses the public ``scipy.optimize.milp``, which takes no starting
point: there the incumbent's cost becomes a cutoff row (objective <= its cost). Either way, on a
time-out the best answer found is returned, the greedy answer when the solver found none better,
with the gap to the best lower bound.
"""

from __future__ import annotations

import math
import time
import warnings
from collections import Counter
from dataclasses import dataclass

import numpy as np

from ...validate import positive
from .check import ExtractionResult, InvalidChoice, check, make_result, needed_classes
from .decompose import MIN_PART, Split, split
from .fixing import lagrangian_bound, required_classes, requirement_rows, without_nodes
from .greedy import greedy_choice, greedy_dag, realize_acyclic
from .gym import ExtractionError, ExtractionGraph
from .lns import combined, local_search, neighbourhood_search, restricted
from .prune import Pruned, components, path_bounds, prune
from .reduce import Reduction, reduce_graph

__all__ = ["ilp", "highs_available"]

_ORDER_LIMIT = 2000  # classes on cycles up to which position variables are used (auto mode)
_WALKS_PER_COMPONENT = 8  # cycles cut per cyclic component of a relaxed answer, at most
_SMALL = 3000  # kept nodes up to which the whole program is tried before the searches
_FIRST = 0.8  # share of the time left for that first try
_GUIDED = 0.5  # share of the time left after the reductions for the relaxation-guided search
_GUIDED_SIZE = 40  # classes in the first relaxation-guided neighbourhood
_GUIDED_LIMIT = 4.0  # seconds for each relaxation-guided neighbourhood
_HUB = 60  # neighbours above which a class is not expanded through in a guided neighbourhood
_SEARCH = 0.45  # share of the time left after the reductions for the neighbourhood search
_PATIENCE = 0.1  # share of the time limit the neighbourhood search may go without a gain
_MAX_NONZEROS = 20_000_000  # matrix entries above which the program is not built (memory)
_FIXING = 0.4  # share of the time left after local search for reduced-cost fixing
_FIXING_MIN = 0.01  # share of the kept nodes a round of fixing must drop for another round
_FIXING_ROUNDS = 8  # rounds of fixing at most


class _Trace:
    """Best cost and lower bound over time, from ``start`` (``time.perf_counter()``)."""

    def __init__(self, start: float, points: list | None = None) -> None:
        self.start = start
        self.points: list[tuple[float, float, float]] = points if points is not None else []
        self.best = min((p[1] for p in self.points), default=math.inf)
        self.bound = max((p[2] for p in self.points), default=-math.inf)

    def add(self, cost: float = math.inf, bound: float = -math.inf) -> None:
        cost, bound = min(cost, self.best), max(bound, self.bound)
        bound = min(bound, cost)  # a bound above an answer's cost is rounding noise
        if cost < self.best or bound > self.bound or not self.points:
            self.best, self.bound = cost, bound
            self.points.append((time.perf_counter() - self.start, cost, bound))


def highs_available() -> bool:
    """Whether SciPy's bundled HiGHS bindings (needed for a true warm start) can be used."""
    try:
        from scipy.optimize._highspy import _core
    except ImportError:
        return False
    return hasattr(_core, "_Highs") and hasattr(_core._Highs, "setSolution")


@dataclass
class _Model:
    """The integer program in CSR-like rows: ``lower <= A @ v <= upper``."""

    cost: np.ndarray
    lower_var: np.ndarray
    upper_var: np.ndarray
    integral: np.ndarray
    rows: list[tuple[list[int], list[float], float, float]]
    node_var: dict[int, int]
    order_var: dict[int, int]
    class_var: dict[int, int]


def _build(graph: ExtractionGraph, p: Pruned, scale: float, with_order: bool,
           node_bound: list[float], root_bound: float, need_parent: bool) -> _Model:
    node_var = {n: i for i, n in enumerate(p.nodes)}
    order_var = {k: len(node_var) + i for i, k in enumerate(sorted(p.scc))} if with_order else {}
    # y[k]: class k is used (the sum of its nodes' x). Branching on whether a class is used at
    # all, not only on single nodes, is what closes Rover's sharing-heavy programs (box_filter_3
    # is proved in seconds with it, not in minutes without).
    class_var = {k: len(node_var) + len(order_var) + i for i, k in enumerate(p.classes)}
    total_var = len(node_var) + len(order_var) + len(class_var)  # z: the objective's value
    n_vars = total_var + 1
    cost = np.zeros(n_vars)
    lower = np.zeros(n_vars)
    upper = np.ones(n_vars)
    integral = np.zeros(n_vars, dtype=np.uint8)
    for n, i in node_var.items():
        cost[i] = graph.costs[n] / scale
        integral[i] = 1
        if n in p.forced:
            lower[i] = 1.0
    for k, i in order_var.items():
        upper[i] = p.scc_size[p.scc[k]] - 1
    roots = set(graph.roots if p.roots is None else p.roots)
    for k, i in class_var.items():
        integral[i] = 1
        if k in roots:
            lower[i] = 1.0
    lower[total_var], upper[total_var] = root_bound / scale, math.inf  # (-inf without path bounds)
    rows: list[tuple[list[int], list[float], float, float]] = []
    rows.append(([total_var] + list(node_var.values()), [1.0] + [-cost[i] for i in node_var.values()],
                 0.0, 0.0))
    for n, i in node_var.items():
        if node_bound[n] > root_bound:  # choosing n costs at least its path bound
            rows.append(([total_var, i], [1.0, -node_bound[n] / scale], 0.0, math.inf))
    for k in p.classes:
        cols = [node_var[n] for n in p.class_nodes[k]]
        rows.append((cols + [class_var[k]], [1.0] * len(cols) + [-1.0], 0.0, 0.0))
    for c in p.classes:
        # One row per class and child class: at most one node of c is chosen, so the sum of those
        # using d is what needs d (tighter in the relaxation than a row per node).
        users: dict[int, list[int]] = {}
        for n in p.class_nodes[c]:
            for d in p.kids[n]:
                users.setdefault(d, []).append(node_var[n])
        comp = p.scc.get(c) if with_order else None
        for d, using in users.items():
            rows.append((using + [class_var[d]], [1.0] * len(using) + [-1.0], -math.inf, 0.0))
            if comp is not None and p.scc.get(d) == comp:
                big = float(p.scc_size[comp])
                rows.append(([order_var[d], order_var[c], *using], [1.0, -1.0] + [big] * len(using),
                             -math.inf, big - 1.0))
    if need_parent:  # negative costs: a chosen class needs a chosen user (see the docstring)
        users_of: dict[int, list[int]] = {k: [] for k in p.classes}
        for n in p.nodes:
            for d in p.kids[n]:
                users_of[d].append(node_var[n])
        for k in p.classes:
            if k not in roots:
                rows.append(([class_var[k]] + users_of[k], [1.0] + [-1.0] * len(users_of[k]), -math.inf, 0.0))
    return _Model(cost, lower, upper, integral, rows, node_var, order_var, class_var)


def _start_vector(graph: ExtractionGraph, p: Pruned, model: _Model, choice: dict[int, int]) -> np.ndarray:
    """The greedy choice as a feasible point: dominated nodes swapped for their dominators and
    positions taken from a children-first order of the chosen classes (those in the program)."""
    x = np.zeros(len(model.cost))
    mapped = {k: p.replaced_by.get(n, n) for k, n in choice.items()}
    order = [k for k in needed_classes(graph, mapped) if k in model.class_var]
    for k in order:
        x[model.node_var[mapped[k]]] = 1.0
        x[model.class_var[k]] = 1.0
    position: dict[int, int] = {}
    for k in _children_first(graph, mapped, order):
        if k in model.order_var:
            position[k] = len(position)
    by_comp: dict[int, list[int]] = {}
    for k in sorted(position, key=position.get):
        by_comp.setdefault(p.scc[k], []).append(k)
    for members in by_comp.values():
        for rank, k in enumerate(members):
            x[model.order_var[k]] = float(rank)
    x[-1] = float(model.cost @ x)
    return x


def _children_first(graph: ExtractionGraph, choice: dict[int, int], classes: list[int]) -> list[int]:
    done: set[int] = set()
    out: list[int] = []
    for start in classes:
        stack = [(start, False)]
        while stack:
            k, expanded = stack.pop()
            if expanded:
                out.append(k)
                continue
            if k in done:
                continue
            done.add(k)
            stack.append((k, True))
            stack.extend((c, False) for c in graph.child_classes[choice[k]] if c not in done)
    return out


def _solve_highs(model: _Model, start: np.ndarray, time_limit: float, rel_gap: float, on_progress=None):
    from scipy.optimize._highspy import _core as h

    n = len(model.cost)
    starts, index, value = _columns(model, n)
    lp = h.HighsLp()
    lp.num_col_, lp.num_row_ = n, len(model.rows)
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = model.cost, model.lower_var, model.upper_var
    lp.row_lower_ = np.array([r[2] for r in model.rows], dtype=float)
    lp.row_upper_ = np.array([r[3] for r in model.rows], dtype=float)
    lp.a_matrix_.format_ = h.MatrixFormat.kColwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n, len(model.rows)
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = starts, index, value
    lp.integrality_ = [h.HighsVarType.kInteger if i else h.HighsVarType.kContinuous
                       for i in model.integral]
    solver = h._Highs()
    solver.setOptionValue("output_flag", False)
    solver.setOptionValue("time_limit", float(time_limit))
    solver.setOptionValue("mip_rel_gap", float(rel_gap))
    solver.setOptionValue("threads", 1)
    solver.passModel(lp)
    warm = h.HighsSolution()
    warm.col_value = start.tolist()
    warm.value_valid = True
    solver.setSolution(warm)
    if hasattr(h, "cb"):
        # HiGHS checks its own time limit rarely in places (root cuts on large programs): the
        # interrupt callback enforces it, and reports progress.
        deadline = time.perf_counter() + float(time_limit)
        types = h.cb.HighsCallbackType

        def report(kind, _message, out, inp, _data):
            if kind == types.kCallbackMipImprovingSolution:
                if on_progress is not None:
                    on_progress(np.array(out.mip_solution), float(out.mip_dual_bound))
                return
            if on_progress is not None:
                on_progress(None, float(out.mip_dual_bound))
            if time.perf_counter() > deadline:
                inp.user_interrupt = True

        solver.setCallback(report, None)
        solver.startCallback(types.kCallbackMipImprovingSolution)
        solver.startCallback(types.kCallbackMipInterrupt)
    solver.run()
    status = solver.getModelStatus()
    info = solver.getInfo()
    has_point = info.primal_solution_status == 2  # kSolutionStatusFeasible
    x = np.array(solver.getSolution().col_value) if has_point else None
    proven = status == h.HighsModelStatus.kOptimal
    bound = float(info.objective_function_value if proven else info.mip_dual_bound)
    return x, proven, bound if math.isfinite(bound) else -math.inf, solver.modelStatusToString(status)


def _columns(model: _Model, n: int):
    cols: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for r, (idx, vals, _, _) in enumerate(model.rows):
        for i, v in zip(idx, vals, strict=True):
            cols[i].append((r, v))
    starts = np.zeros(n + 1, dtype=np.int32)
    starts[1:] = np.cumsum([len(c) for c in cols])
    index = np.array([r for c in cols for r, _ in c], dtype=np.int32)
    value = np.array([v for c in cols for _, v in c], dtype=float)
    return starts, index, value


def _row_matrix(rows: list, n: int):
    """The coefficients of program rows ``(indices, values, lower, upper)`` as a sparse matrix of
    ``n`` columns."""
    from scipy.sparse import csr_array

    data, ri, ci = [], [], []
    for r, (idx, vals, _, _) in enumerate(rows):
        ri.extend([r] * len(idx))
        ci.extend(idx)
        data.extend(vals)
    return csr_array((data, (ri, ci)), shape=(len(rows), n))


def _solve_milp(model: _Model, start: np.ndarray, time_limit: float, rel_gap: float, on_progress=None):
    from scipy.optimize import Bounds, LinearConstraint, milp

    n = len(model.cost)
    rows = list(model.rows)
    # No warm start in scipy's milp: the greedy cost becomes a cutoff instead.
    cutoff = float(model.cost @ start)
    rows.append((list(range(n)), model.cost.tolist(), -math.inf, cutoff + 1e-9 * max(1.0, abs(cutoff))))
    constraint = LinearConstraint(_row_matrix(rows, n), [r[2] for r in rows], [r[3] for r in rows])
    res = milp(model.cost, integrality=model.integral, bounds=Bounds(model.lower_var, model.upper_var),
               constraints=constraint, options={"time_limit": float(time_limit), "mip_rel_gap": rel_gap})
    bound = getattr(res, "mip_dual_bound", None)
    if res.status == 0:
        bound = res.fun
    bound = float(bound) if bound is not None and math.isfinite(bound) else -math.inf
    return res.x, res.status == 0, bound, res.message


def ilp(graph: ExtractionGraph, *, time_limit: float = 60.0, warm_start: ExtractionResult | None = None,
        backend: str = "auto", acyclicity: str = "auto", rel_gap: float = 1e-6,
        max_nonzeros: int = _MAX_NONZEROS, local: bool = True, search: bool = True, fixing: bool = True,
        trace: list | None = None, trace_start: float | None = None, parts: bool = True,
        min_part: int = MIN_PART) -> ExtractionResult:
    """Extract a DAG-optimal choice by integer programming within ``time_limit`` seconds.

    ``warm_start`` defaults to ``greedy_dag(graph)`` (its time counts towards this result's).
    ``acyclicity`` is ``"order"`` (position variables), ``"lazy"`` (cycle cuts added as cycles
    appear) or ``"auto"`` (order variables for small cyclic parts, cuts for large ones).
    The result's ``optimal`` says whether optimality was proved (within ``rel_gap``), ``gap`` is
    the relative gap to the best lower bound; on a time-out ``status`` is ``"time-limit"``.
    ``local`` first improves the warm start by local search (``lns.local_search``); ``search``
    tries a small program (up to 3,000 kept nodes) whole first, then runs the relaxation-guided
    search (up to half the time left) and a large-neighbourhood search
    (``lns.neighbourhood_search``, up to 45% of what is left then), each stopping sooner when it
    stops finding better answers, before the whole program is solved, warm-started with the
    best answer. Before all that, ``fixing`` drops the nodes that no answer as cheap as the start
    can use, by reduced costs from the linear relaxation (see ``fixing``), and re-reduces, while
    that drops something (up to 40% of the time left).
    ``notes["trace"]`` holds ``(seconds, best cost, lower bound)`` points; pass ``trace`` (a
    list, with ``trace_start`` its time origin) to extend one begun by a caller.
    With ``parts`` (and costs of at least zero), an e-graph that separates into parts of at least
    ``min_part`` viable nodes is solved part by part from the bottom up (see
    ``decompose``), each part with all of the above and a share of the time left by its size;
    ``notes["parts"]`` counts them and ``notes["parts_optimal"]`` the ones proved.
    """
    positive("time_limit", time_limit)
    if backend == "auto":
        backend = "highs" if highs_available() else "milp"
    if backend not in ("highs", "milp"):
        raise ValueError(f"unknown ILP backend {backend!r}; use 'highs', 'milp' or 'auto'")
    if acyclicity not in ("auto", "order", "lazy"):
        raise ValueError(f"unknown acyclicity method {acyclicity!r}; use 'order', 'lazy' or 'auto'")
    start_time = time.perf_counter()
    progress = _Trace(start_time if trace_start is None else trace_start, trace)
    if parts and min(graph.costs, default=0.0) >= 0:
        pieces = split(graph, min_part)
        if pieces is not None:
            options = dict(backend=backend, acyclicity=acyclicity, rel_gap=rel_gap, max_nonzeros=max_nonzeros,
                           local=local, search=search, fixing=fixing)
            return _by_parts(graph, pieces, start_time, time_limit, warm_start, progress, options)
    if warm_start is None:
        warm_start = greedy_dag(graph)
    progress.add(warm_start.dag_cost)
    if local:  # a better incumbent first: single-class swaps (see ``lns``), a fifth of the time left
        now = time.perf_counter()
        until = now + (time_limit - (now - start_time)) / 5
        improved = local_search(graph, warm_start.choice, deadline=until,
                                on_improve=lambda cost: progress.add(cost))
        if check(graph, improved) < warm_start.dag_cost:
            warm_start = make_result("local-search", graph, improved, time.perf_counter() - start_time)
    signed = min(graph.costs, default=0.0) < 0  # negative costs: no path bounds, parent rows
    root_bound = -math.inf
    if not signed:
        class_bound, _ = path_bounds(graph)
        root_bound = max(class_bound[r] for r in graph.roots)
        progress.add(bound=root_bound)
    if warm_start.dag_cost <= root_bound + rel_gap * abs(root_bound):  # optimal before any reduction
        return make_result("ilp", graph, warm_start.choice, time.perf_counter() - start_time, optimal=True,
                           gap=0.0, notes={"backend": backend, "acyclicity": acyclicity, "rounds": 0,
                                           "solver": "start meets the path lower bound",
                                           "lower_bound": root_bound, "trace": progress.points})
    fix_bound, fix_notes = -math.inf, {}
    try:
        reduction = reduce_graph(graph)
        if fixing:
            now = time.perf_counter()
            until = now + _FIXING * (time_limit - (now - start_time))
            smaller, fixed, fix_bound, found, fix_proven, fix_notes = _fix_by_reduced_costs(
                graph, reduction, warm_start.dag_cost, signed, until, progress, rel_gap)
            if found is not None:  # a rounded relaxed point that beats the start
                warm_start = make_result("relaxation", graph, found, time.perf_counter() - start_time)
            if fix_proven:
                return make_result("ilp", graph, warm_start.choice, time.perf_counter() - start_time,
                                   optimal=True, gap=0.0,
                                   notes={"backend": backend, "acyclicity": acyclicity, "rounds": 0,
                                          "solver": "start meets the bound of reduced-cost fixing",
                                          "lower_bound": warm_start.dag_cost, "trace": progress.points,
                                          **fix_notes})
            try:  # the start survives fixing (see ``fixing``); this guards against rounding only
                check(smaller, {k: warm_start.choice[k] for k in needed_classes(graph, warm_start.choice)})
                reduction = fixed
            except ExtractionError:
                fix_bound, fix_notes = -math.inf, {"fixing": "dropped the start's nodes; not used"}
        core = reduction.graph
        best, best_cost, proven, lower, notes = _solve_core(
            core, _core_start(reduction, warm_start), start_time, time_limit, backend, acyclicity, rel_gap,
            signed, max_nonzeros, progress, search)
        if best is not None and not proven and fix_bound > lower:
            lower = fix_bound
            proven = best_cost <= lower + rel_gap * abs(lower)
            notes["lower_bound"] = best_cost if proven else lower
        notes.update(fix_notes)
    except MemoryError:
        best, notes = None, {"solver": "out of memory while solving"}
    if best is None:  # too large for the solver's memory: the heuristic answer stands
        warnings.warn(f"{graph.name}: the integer program is too large to solve ({notes['solver']}); "
                      f"returning the best heuristic answer", RuntimeWarning, stacklevel=2)
        notes.update(backend=backend, acyclicity=acyclicity, trace=progress.points,
                     lower_bound=progress.bound)
        result = make_result("ilp", graph, warm_start.choice, time.perf_counter() - start_time,
                             optimal=False, status="memory-limit", notes=notes)
        result.gap = _gap(result.dag_cost, progress.bound)
        return result
    choice = reduction.expand(best)
    if check(graph, {k: choice[k] for k in needed_classes(graph, choice)}) > warm_start.dag_cost:
        choice = warm_start.choice  # (the core's answers expand to answers of the same cost)
    notes["trace"] = progress.points
    result = make_result("ilp", graph, choice, time.perf_counter() - start_time, optimal=proven,
                         status="ok" if proven else "time-limit", notes=notes)
    result.gap = 0.0 if proven else _gap(result.dag_cost, lower)
    return result


def _by_parts(graph: ExtractionGraph, pieces: Split, start_time: float, time_limit: float,
              warm_start: ExtractionResult | None, progress: _Trace, options: dict) -> ExtractionResult:
    """``ilp`` part by part (see ``decompose``): lower parts first, each given the time left times
    its share of the nodes left, the parts below it standing in it as leaves of their answers'
    costs. The answers together are checked against the whole e-graph's greedy answer."""
    costs: dict[int, float] = {}
    lost: dict[int, float] = {}  # part root -> what its answer may still lose, with the parts below it
    choice: dict[int, int] = dict(pieces.free)
    left = sum(len(p.classes) for p in pieces.parts)
    proven, solved, lower, notes = 0, 0, -math.inf, {}
    statuses: list[str] = []
    solvers: Counter[str] = Counter()
    whole = warm_start if warm_start is not None else greedy_dag(graph)
    progress.add(whole.dag_cost)  # the trace starts at the whole start, as without parts
    for part in pieces.parts:
        sub = pieces.build(graph, part, costs)
        now = time.perf_counter()
        share = max((time_limit - (now - start_time)) * len(part.classes) / max(left, 1), 1e-3)
        left -= len(part.classes)
        start = None
        if warm_start is not None:  # the caller's start, where it chooses the whole part
            try:
                picks = (_sub_node(sub, part, pieces.free, warm_start.choice, i)
                         for i in range(sub.num_classes))
                start = make_result("start", sub, {i: n for i, n in enumerate(picks) if n is not None}, 0.0)
            except (InvalidChoice, ExtractionError):
                start = None
        with warnings.catch_warnings(record=True) as caught:  # one warning for all parts, below
            warnings.simplefilter("always")
            result = ilp(sub, time_limit=share, warm_start=start, parts=False, **options)
        for w in caught:
            if not (issubclass(w.category, RuntimeWarning) and result.status == "memory-limit"):
                warnings.warn(w.message, w.category, stacklevel=3)
        statuses.append(result.status)
        solvers[result.notes.get("solver", "?")] += 1
        solved += 1
        proven += bool(result.optimal)
        for n in (result.choice or {}).values():
            original = part.node_of[n]
            if original >= 0:
                choice[graph.classes[original]] = original
        bound = result.notes.get("lower_bound", -math.inf)
        if result.optimal:
            bound = result.dag_cost
        slack = sum(lost[k] for k in part.below)
        if part.root is None:
            lower = bound - slack
            notes = {k: v for k, v in result.notes.items() if k not in ("trace", "lower_bound")}
        else:
            costs[part.root] = result.dag_cost
            lost[part.root] = result.dag_cost - bound + slack
    cost = check(graph, {k: choice[k] for k in needed_classes(graph, choice)})
    if cost > whole.dag_cost:  # (cannot happen when every part is proved; guards rounding)
        choice, cost = whole.choice, whole.dag_cost
    optimal = proven == solved and cost <= lower + 1e-9 * max(abs(lower), 1.0)
    progress.add(cost, lower)
    solver = ", ".join(f"{count} {text}" for text, count in solvers.items())
    notes.update(parts=solved, parts_optimal=proven, lower_bound=cost if optimal else lower,
                 trace=progress.points, solver=f"by parts ({solved}): {solver}")
    status = "ok" if optimal else "time-limit"
    if "memory-limit" in statuses:
        status = "memory-limit"
        warnings.warn(f"{graph.name}: the integer program is too large to solve in "
                      f"{statuses.count('memory-limit')} of its {solved} parts ({solver}); returning the "
                      f"best heuristic answer there", RuntimeWarning, stacklevel=3)
    result = make_result("ilp", graph, choice, time.perf_counter() - start_time, optimal=optimal,
                         status=status, notes=notes)
    result.gap = 0.0 if optimal else _gap(result.dag_cost, lower)
    return result


def _sub_node(sub: ExtractionGraph, part, free: dict[int, int], choice: dict[int, int], i: int) -> int | None:
    """The node of ``sub``'s class ``i`` that ``choice`` (of the whole e-graph) picks, if any: a
    lower part's leaf and a free class's fixed node whatever it picks."""
    k = part.class_of[i]
    nodes = sub.class_nodes[i]
    if k in free or part.node_of[nodes[0]] < 0:
        return nodes[0]
    return next((j for j in nodes if part.node_of[j] == choice.get(k)), None)


def _fix_by_reduced_costs(graph: ExtractionGraph, reduction: Reduction, incumbent: float, signed: bool,
                          deadline: float, progress: _Trace, rel_gap: float, stop_at_proof: bool = True):
    """Reduced-cost fixing (see ``fixing``) against an answer costing ``incumbent``, repeated
    while it drops at least 1% of the kept nodes: the smaller e-graph (same indices, more nodes
    subsumed) and its reduction, which keep the optimum, a lower bound on it, a better answer
    (None if none was found; each relaxed point is rounded, a class taking its largest node),
    whether the bound proves the best answer optimal, and notes.

    The first relaxation is solved without requirement rows (cheaper on a large core), every
    later one with them. With ``stop_at_proof`` it returns as soon as the bound meets the
    incumbent; otherwise it goes on dropping (tests use that).
    """
    from scipy.optimize import linprog

    rounds = dropped = 0
    with_req = False
    bound = -math.inf
    best = None
    tolerance = 1e-7 * max(1.0, abs(incumbent))
    while True:
        left = deadline - time.perf_counter()
        if left <= 0:
            break
        core = reduction.graph
        p = prune(core)
        if _nonzeros(p) > _MAX_NONZEROS:
            break
        scale = max((abs(core.costs[n]) for n in p.nodes), default=1.0) or 1.0
        model = _build(core, p, scale, False, [-math.inf] * core.num_nodes, -math.inf, signed)
        rows = model.rows[1:]  # the objective's row and its column z are not needed here
        if with_req:
            req = required_classes(p, deadline)
            extra = None if req is None else requirement_rows(p, req, model.node_var, model.class_var)
            rows += extra or []
        n = len(model.cost) - 1
        eq = [r for r in rows if r[2] == r[3]]
        part = eq + [r for r in rows if r[2] == -math.inf]  # (no other kind of row is written here)
        full = _row_matrix(part, n)
        row_lower = np.array([r[2] for r in part])
        row_upper = np.array([r[3] for r in part])
        split = len(eq)
        res = linprog(model.cost[:n], A_ub=full[split:] if split < len(part) else None,
                      b_ub=row_upper[split:] if split < len(part) else None,
                      A_eq=full[:split] if split else None, b_eq=row_upper[:split] if split else None,
                      bounds=np.column_stack([model.lower_var[:n], model.upper_var[:n]]), method="highs",
                      options={"time_limit": max(0.1, left)})
        if res.status == 2 or getattr(res, "eqlin", None) is None or res.eqlin.marginals is None:
            break  # (infeasible, or stopped without duals)
        duals = np.concatenate([np.asarray(res.eqlin.marginals if split else [], dtype=float),
                                np.asarray(res.ineqlin.marginals if split < len(part) else [], dtype=float)])
        lower, reduced = lagrangian_bound(model.cost[:n], model.lower_var[:n], model.upper_var[:n], full,
                                          row_lower, row_upper, duals)
        lower, reduced = lower * scale, reduced * scale
        found = _rounded(core, p, model, res.x) if res.x is not None else None
        if found is not None and found[1] < incumbent - tolerance:  # a better answer: fix against it
            best, incumbent = reduction.expand(found[0]), found[1]
            progress.add(incumbent)
        if lower > bound:
            bound = lower
            progress.add(bound=min(lower, incumbent))
        if stop_at_proof and incumbent <= lower + rel_gap * abs(lower):
            return graph, reduction, bound, best, True, {"fixed_nodes": dropped, "fixing_rounds": rounds}
        dead: set[int] = set()
        for k in p.classes:
            i = model.class_var[k]
            if model.lower_var[i] == 0 and lower + reduced[i] > incumbent + tolerance:
                dead.update(reduction.node_of[m] for m in p.class_nodes[k])  # k is never used
                continue
            for m in p.class_nodes[k]:
                j = model.node_var[m]
                if model.lower_var[j] == 0 and lower + reduced[j] > incumbent + tolerance:
                    dead.add(reduction.node_of[m])  # m is never chosen
                elif model.lower_var[j] == 0 and lower - reduced[j] > incumbent + tolerance:
                    keep = reduction.node_of[m]  # m is always chosen: its class's other nodes go
                    dead.update(o for o in graph.class_nodes[graph.classes[keep]] if o != keep)
        dead -= graph.subsumed
        if dead:
            dropped += len(dead)
            rounds += 1
            graph = without_nodes(graph, dead)
            reduction = reduce_graph(graph)
        if (len(dead) < _FIXING_MIN * len(p.nodes) and with_req) or rounds >= _FIXING_ROUNDS:
            break  # (a round without requirement rows that drops little is followed by one with)
        with_req = True
    return graph, reduction, bound, best, False, {"fixed_nodes": dropped, "fixing_rounds": rounds}


def _rounded(graph: ExtractionGraph, p: Pruned, model: _Model, x: np.ndarray):
    """The answer that takes each class's largest node in a relaxed point, and its cost, if
    that is a complete acyclic answer (else None)."""
    picked = {k: max(p.class_nodes[k], key=lambda n: x[model.node_var[n]]) for k in p.classes}
    try:
        choice = {k: picked[k] for k in needed_classes(graph, picked)}
        return choice, check(graph, choice)
    except ExtractionError:
        return None


def _gap(cost: float, lower: float) -> float:
    """The relative gap between an answer's cost and a lower bound (1.0 without a bound)."""
    if not math.isfinite(lower):
        return 1.0
    if cost == lower:
        return 0.0
    return max(0.0, (cost - lower) / max(abs(cost), abs(lower)))


def _core_start(reduction: Reduction, warm_start: ExtractionResult) -> dict[int, int]:
    """The warm start as a choice on the reduced e-graph, or the core's greedy answer if cheaper."""
    core = reduction.graph
    fallback = greedy_dag(core)
    try:
        mapped = reduction.restrict(warm_start.choice)
        if check(core, {k: mapped[k] for k in needed_classes(core, mapped)}) < fallback.dag_cost:
            return mapped
    except ExtractionError:
        pass
    return fallback.choice


def _nonzeros(p: Pruned) -> int:
    """About how many matrix entries the program for ``p`` has (before any cycle cut)."""
    return sum(2 * len(p.kids[n]) + 3 for n in p.nodes) + 2 * len(p.nodes) + 4 * len(p.scc)


def _solve_core(graph: ExtractionGraph, start_choice: dict[int, int], start_time: float, time_limit: float,
                backend: str, acyclicity: str, rel_gap: float, signed: bool, max_nonzeros: int,
                progress: _Trace, search: bool):
    """The integer program on the reduced e-graph: its best choice, cost, proof, bound and notes
    (the choice is None when the program is too large to build)."""
    pruned = prune(graph)
    size = _nonzeros(pruned)
    if size > max_nonzeros:
        return None, math.inf, False, progress.bound, {
            "solver": f"about {size:,} matrix entries, over the limit of {max_nonzeros:,}",
            "kept_nodes": len(pruned.nodes), "kept_classes": len(pruned.classes)}
    if acyclicity == "auto":
        acyclicity = "order" if len(pruned.scc) <= _ORDER_LIMIT else "lazy"
    scale = max((abs(graph.costs[n]) for n in pruned.nodes), default=1.0) or 1.0
    root_bound = -math.inf
    node_bound = [-math.inf] * graph.num_nodes
    if not signed:
        class_bound, node_bound = path_bounds(graph)
        root_bound = max(class_bound[r] for r in graph.roots)
    model = _build(graph, pruned, scale, acyclicity == "order", node_bound, root_bound, signed)
    solve = _solve_highs if backend == "highs" else _solve_milp
    best = {k: start_choice[k] for k in needed_classes(graph, start_choice)}
    best_cost = check(graph, best)
    progress.add(best_cost)
    proven, lower, message, rounds, cuts = False, root_bound, "not run", 0, 0
    if best_cost <= root_bound + rel_gap * abs(root_bound):
        proven, message = True, "start meets the path lower bound"
    found_during: list[dict[int, int]] = []
    improved_by_search = 0.0

    def on_progress(x, bound):
        # Improving points of the order program are acyclic answers; the lazy program's may not be.
        if x is not None and acyclicity == "order":
            found = _choice_from_point(graph, pruned, model, x)
            if found is not None:
                found_during.append(found)
                progress.add(check(graph, found))
        if math.isfinite(bound) and bound * scale > progress.bound + 1e-12 * max(1.0, abs(progress.bound)):
            progress.add(bound=bound * scale)

    if search and not proven and acyclicity == "order" and len(pruned.nodes) <= _SMALL:
        # A small program often proves faster whole than the searches take to give up (Rover's
        # box_filter_3, where greedy is optimal already): it gets the first turn.
        rounds += 1
        now = time.perf_counter()
        x, solved, bound, message = solve(model, _start_vector(graph, pruned, model, best),
                                          _FIRST * (time_limit - (now - start_time)), rel_gap, on_progress)
        if math.isfinite(bound):
            lower = max(lower, bound * scale)
        found_during.append(None if x is None else _choice_from_point(graph, pruned, model, x))
        for found in found_during:
            if found is not None and check(graph, found) < best_cost:
                best, best_cost = found, check(graph, found)
        found_during.clear()
        proven = solved or best_cost <= lower + rel_gap * abs(lower)
    if search and not proven:  # a better incumbent where the relaxation disagrees with the answer
        before = best_cost
        now = time.perf_counter()
        best, relaxed_bound = _guided_search(graph, pruned, best, scale, signed, solve,
                                             now + _GUIDED * (time_limit - (now - start_time)), progress,
                                             patience=max(2.0, _PATIENCE * time_limit))
        best_cost = check(graph, best)
        improved_by_search = before - best_cost
        if math.isfinite(relaxed_bound):
            lower = max(lower, relaxed_bound)
        if best_cost <= lower + rel_gap * abs(lower):
            proven, message = True, "incumbent meets the relaxation's bound"
    if search and not proven:  # then small programs around the best answer
        before = best_cost
        now = time.perf_counter()
        search_until = now + _SEARCH * (time_limit - (now - start_time))

        def solve_sub(sub: Pruned, choice: dict[int, int], limit: float):
            return _solve_restricted(graph, sub, choice, scale, signed, solve, limit)

        best, whole = neighbourhood_search(graph, pruned, best, deadline=search_until, solve_sub=solve_sub,
                                           patience=max(2.0, _PATIENCE * time_limit),
                                           on_improve=lambda cost: progress.add(cost))
        best_cost = check(graph, best)
        improved_by_search += before - best_cost
        if whole:  # the last neighbourhood was the whole program, solved to optimality
            proven, message, lower = True, "neighbourhood search solved the whole program", best_cost
    while not proven:
        remaining = time_limit - (time.perf_counter() - start_time)
        if remaining <= 0:
            message = "time limit reached"
            break
        rounds += 1
        start = _start_vector(graph, pruned, model, best)
        x, solved, bound, message = solve(model, start, remaining, rel_gap, on_progress)
        if math.isfinite(bound):
            lower = max(lower, bound * scale)  # each relaxed program bounds the acyclic optimum
        for found in found_during:
            cost = check(graph, found)
            if cost < best_cost:
                best, best_cost = found, cost
        found_during.clear()
        found = None if x is None else _choice_from_point(graph, pruned, model, x)
        cycles = [] if found is None else _cycles(graph, _picked(pruned, model, x) if signed else found)
        if found is not None and not cycles:
            cost = check(graph, found)
            if cost <= best_cost:
                best, best_cost = found, cost
            proven = solved
        if found is None or not cycles:
            break
        # A cyclic answer of the relaxed program: forbid its cycles, keep a repaired copy if cheaper.
        for cycle in cycles:
            model.rows.append(_cycle_cut(graph, pruned, model, cycle))
        cuts += len(cycles)
        repaired = realize_acyclic(graph, found, [0.0] * graph.num_classes)
        cost = check(graph, {k: repaired[k] for k in needed_classes(graph, repaired)})
        if cost < best_cost:
            best, best_cost = repaired, cost
        progress.add(best_cost, lower)
        if best_cost <= lower + rel_gap * abs(lower):
            proven, message = True, "incumbent meets the lower bound"
    progress.add(best_cost, best_cost if proven else lower)
    notes = {"backend": backend, "acyclicity": acyclicity, "solver": message, "rounds": rounds,
             "cycle_cuts": cuts, "variables": len(model.cost), "rows": len(model.rows),
             "kept_nodes": len(pruned.nodes), "kept_classes": len(pruned.classes),
             "order_classes": len(pruned.scc) if acyclicity == "order" else 0,
             "searched": improved_by_search,
             "lower_bound": best_cost if proven else lower}
    return best, best_cost, proven, lower, notes


def _guided_search(graph: ExtractionGraph, p: Pruned, best: dict[int, int], scale: float, signed: bool,
                   solve, deadline: float, progress: _Trace, patience: float = math.inf,
                   seed: int = 0) -> tuple[dict[int, int], float]:
    """Neighbourhoods the linear relaxation points at: the better answer and the relaxation's bound.

    The relaxation of the whole program is solved once. The classes where its point and the
    answer differ (the answer's node below 0.95, another node above 0.05) are where to look: a
    neighbourhood is a connected part of them (breadth-first from one, not through classes with
    over ``_HUB`` neighbours), freed with the rest pinned (``lns.restricted``) and solved within
    a few seconds. Parts that gain nothing are not tried again until the answer changes; the
    search stops after ``patience`` seconds without a gain. Where the optimum needs many classes
    to change at once (TENSAT's BERT merges four matrix products of a layer into one: no single
    change pays, and a neighbourhood grown around one class rarely holds the right ones), the
    relaxation already shows the new structure.
    """
    import random

    left = deadline - time.perf_counter()
    if left <= 0.5:
        return best, -math.inf
    # Neither order variables nor path-bound rows tighten this relaxation much, and they make
    # it slower to solve (on BERT, 10 s with the rows against 3 s without).
    model = _build(graph, p, scale, False, [-math.inf] * graph.num_nodes, -math.inf, signed)
    model.integral = np.zeros_like(model.integral)
    x, solved, bound, _ = solve(model, _start_vector(graph, p, model, best), left, 1e-9)
    if x is None or not solved:
        return best, -math.inf
    best_cost = check(graph, best)
    bound = min(bound * scale, best_cost)  # (above an answer's cost it is rounding noise)
    progress.add(bound=bound)
    neighbours: dict[int, set[int]] = {k: set() for k in p.classes}
    for k in p.classes:
        for n in p.class_nodes[k]:
            for c in p.kids[n]:
                neighbours[k].add(c)
                neighbours[c].add(k)
    full, _ = greedy_choice(graph)
    rng = random.Random(seed)
    tried: set[int] = set()
    size = _GUIDED_SIZE
    last_gain = time.perf_counter()
    while time.perf_counter() < min(deadline - 0.2, last_gain + patience):
        mapped = {k: p.replaced_by.get(n, n) for k, n in best.items()}
        free = {k for k in p.classes for n in p.class_nodes[k]
                if (x[model.node_var[n]] < 0.95 if mapped.get(k) == n else x[model.node_var[n]] > 0.05)}
        seeds = sorted(free - tried)
        if not seeds:
            break
        part = {rng.choice(seeds)}
        frontier = list(part)
        while frontier and len(part) < size:
            nxt = []
            for k in frontier:
                if len(neighbours[k]) > _HUB and len(part) > 1:
                    continue
                for c in neighbours[k]:
                    if c in free and c not in part and len(part) < size:
                        part.add(c)
                        nxt.append(c)
            rng.shuffle(nxt)
            frontier = nxt
        sub, pin = restricted(graph, p, best, part, full)
        limit = min(_GUIDED_LIMIT, deadline - time.perf_counter())
        picks, solved_sub = _solve_restricted(graph, sub, best, scale, signed, solve, limit)
        found = None if picks is None else combined(graph, pin, picks)
        cost = math.inf if found is None else check(graph, found)
        if cost < best_cost - 1e-9 * max(1.0, abs(best_cost)):
            best, best_cost = found, cost
            progress.add(cost)
            tried.clear()
            last_gain = time.perf_counter()
        else:
            tried |= part
        if not solved_sub:
            size = max(8, int(size / 1.5))
        elif len(part) >= size:
            size = int(size * 1.5) + 1
    return best, bound


def _solve_restricted(graph: ExtractionGraph, sub: Pruned, choice: dict[int, int], scale: float, signed: bool,
                      solve, limit: float):
    """Solve the program of a restricted ``sub`` (``lns.restricted``) started at ``choice``: the
    node picked per class of ``sub`` (None without an answer) and whether it is proved optimal.
    Path bounds do not hold there (the always-on classes it leaves out cost nothing in it)."""
    model = _build(graph, sub, scale, True, [-math.inf] * graph.num_nodes, -math.inf, signed)
    x, solved, _, _ = solve(model, _start_vector(graph, sub, model, choice), limit, 1e-9)
    return (None if x is None else _picked(sub, model, x)), solved


def _picked(p: Pruned, model: _Model, x: np.ndarray) -> dict[int, int]:
    """Every class with a chosen node in the point, needed or not."""
    return {k: n for k in p.classes for n in p.class_nodes[k] if x[model.node_var[n]] > 0.5}


def _choice_from_point(graph: ExtractionGraph, p: Pruned, model: _Model,
                       x: np.ndarray) -> dict[int, int] | None:
    """The chosen nodes of the classes the roots need (None if the point misses one)."""
    picked: dict[int, int] = {}
    for k in p.classes:
        for n in p.class_nodes[k]:
            if x[model.node_var[n]] > 0.5:
                picked[k] = n
                break
    try:
        return {k: picked[k] for k in needed_classes(graph, picked)}
    except ExtractionError:
        return None


def _cycles(graph: ExtractionGraph, choice: dict[int, int]) -> list[list[int]]:
    """Some cycles of a choice: one walk per start class inside each cyclic component."""
    kids = {k: set(graph.child_classes[n]) for k, n in choice.items()}
    comp = components(list(choice), kids)
    members: dict[int, list[int]] = {}
    for k, c in comp.items():
        members.setdefault(c, []).append(k)
    found: dict[frozenset, list[int]] = {}
    for group in members.values():
        inside = set(group)
        if len(group) == 1 and group[0] not in kids[group[0]]:
            continue
        for start in group[:_WALKS_PER_COMPONENT]:
            path, seen, k = [], {}, start
            while k not in seen:  # every class of the component has a child inside it
                seen[k] = len(path)
                path.append(k)
                k = min(c for c in kids[k] if c in inside)
            cycle = path[seen[k]:]
            found.setdefault(frozenset(cycle), cycle)
    return list(found.values())


def _cycle_cut(graph: ExtractionGraph, p: Pruned, model: _Model, cycle: list[int]):
    """For a set S of classes: at most ``|S| - 1`` of them may use a node with a child in S.

    Valid for every acyclic answer, whose chosen nodes restricted to S always leave a class
    (a lowest one) without a child in S. Cutting the classes of a cycle this way also forbids
    every other cycle through a subset of them.
    """
    inside = set(cycle)
    cols = [model.node_var[n] for k in inside for n in p.class_nodes[k] if inside.intersection(p.kids[n])]
    return (cols, [1.0] * len(cols), -math.inf, float(len(inside) - 1))
