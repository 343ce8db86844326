"""``rg.profile``: where a program's time goes, per op and per op kind, measured beside the ``cpu``
model's prediction for each.

The entry function is first put in the form the executor runs (``dataflow_form``: lets inlined
into the graph, calls of non-Primitive function literals replaced by their bodies, as the
executor inlines them). It then runs through the executor's own plan with every instruction
timed in place (the op table's kernels, and one kernel per ``Primitive`` group: a fused op of the
table, a numexpr program, or its ops in turn), and the whole program is also timed through
``rg.evaluate``, both by the profile's clock. The difference between the program's time and the
sum of its instructions is the executor's own work (dispatch, freeing), which the model predicts
per instruction. ``time_programs`` times whole programs alternated, as the benchmarks do.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import RelayError
from ..ir.expr import Call, Constant, Function, Let, Op, Tuple, TupleGetItem, Var
from ..ir.module import IRModule
from ..ir.traversal import ExprMutator, iter_post_order, substitute
from ..ir.types import TensorType, format_type

__all__ = ["profile", "predict", "dataflow_form", "time_programs", "paired_ratio", "ProgramProfile",
           "NodeTime"]


@dataclass
class NodeTime:
    """One instruction of the program: what it is, its predicted and measured seconds."""

    label: str
    op: str
    kind: str
    signature: str
    predicted: float
    measured: float


@dataclass
class ProgramProfile:
    """Per-node, per-op and per-kind times of one program; totals measured and predicted."""

    nodes: list[NodeTime]
    measured_program: float  # rg.evaluate, median of the runs
    predicted_program: float  # the model: every node plus the per-program overhead
    runs: int
    profile_path: str | None = None
    quick_profile: bool = False
    clock: str = "wall"  # "cpu": the process's CPU time (one thread), as the profile was timed
    by_op: dict = field(default_factory=dict)
    by_kind: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_op = _group(self.nodes, lambda n: n.op)
        self.by_kind = _group(self.nodes, lambda n: n.kind)

    @property
    def measured_kernels(self) -> float:
        """The sum of the nodes' measured times."""
        return sum(n.measured for n in self.nodes)

    @property
    def error(self) -> float:
        """Predicted over measured program time, minus one."""
        return self.predicted_program / self.measured_program - 1.0

    def table(self, top: int = 15) -> str:
        """The report ``relaygraph profile`` prints: per kind, per op (the ``top`` costliest), totals."""
        total = self.measured_program
        clock = "CPU time" if self.clock == "cpu" else "wall time"
        lines = [f"program: measured {total * 1e3:.3f} ms ({clock}, median of {self.runs} runs), predicted "
                 f"{self.predicted_program * 1e3:.3f} ms ({self.error:+.0%})",
                 f"kernels measured one by one: {self.measured_kernels * 1e3:.3f} ms; executor "
                 f"overhead {max(total - self.measured_kernels, 0.0) * 1e3:.3f} ms",
                 ""]
        for title, groups, limit in (("op kind", self.by_kind, None), ("op", self.by_op, top)):
            lines.append(f"{title:<32} {'calls':>6} {'measured ms':>12} {'share':>7} "
                         f"{'predicted ms':>13} {'pred/meas':>10}")
            rows = sorted(groups.items(), key=lambda kv: -kv[1]["measured"])
            for name, g in rows[:limit]:
                ratio = g["predicted"] / g["measured"] if g["measured"] > 0 else float("nan")
                lines.append(f"{name[:32]:<32} {g['calls']:>6} {g['measured'] * 1e3:>12.3f} "
                             f"{g['measured'] / total:>7.1%} {g['predicted'] * 1e3:>13.3f} {ratio:>10.2f}")
            if limit is not None and len(rows) > limit:
                lines.append(f"... {len(rows) - limit} more ops")
            lines.append("")
        if self.quick_profile:
            lines.append("note: the CPU profile is a quick calibration (coarse); `relaygraph calibrate` "
                         "makes the full one")
        return "\n".join(lines).rstrip()

    def to_json(self) -> dict:
        """A JSON-ready form."""
        return {"measured_program": self.measured_program, "predicted_program": self.predicted_program,
                "runs": self.runs, "clock": self.clock, "by_kind": self.by_kind, "by_op": self.by_op,
                "nodes": [vars(n) for n in self.nodes], "profile": self.profile_path}


def _group(nodes: list[NodeTime], key: Callable) -> dict:
    out: dict = {}
    for n in nodes:
        g = out.setdefault(key(n), {"calls": 0, "measured": 0.0, "predicted": 0.0})
        g["calls"] += 1
        g["measured"] += n.measured
        g["predicted"] += n.predicted
    return out


class _Step:
    """One instruction: the node, how to run it, its inputs and what the model predicts."""

    __slots__ = ("node", "run", "inputs", "info")

    def __init__(self, node, run, inputs, info) -> None:
        self.node, self.run, self.inputs, self.info = node, run, inputs, info


class _InlineLiterals(ExprMutator):
    """Calls of non-Primitive function literals replaced by their bodies, as the executor inlines
    them (Primitive groups stay: each is one instruction)."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = False

    def pre_rewrite(self, node):
        # a Primitive group's body is run whole by its kernel: nothing inside it changes
        return node if isinstance(node, Function) and node.attrs.get("Primitive", 0) else None

    def rewrite_call(self, pre: Call, post: Call):
        callee = post.op
        if isinstance(callee, Function) and not callee.attrs.get("Primitive", 0):
            if len(callee.params) != len(post.args):
                raise RelayError(f"a function literal taking {len(callee.params)} argument(s) is "
                                 f"called with {len(post.args)}")
            self.changed = True
            return substitute(callee.body, dict(zip(callee.params, post.args, strict=True)))
        return post


def dataflow_form(mod: IRModule, entry: str = "main") -> IRModule:
    """``mod`` with ``entry`` as the executor runs it: lets of pure values inlined into the graph
    and calls of (let-bound or direct) non-Primitive function literals replaced by their bodies,
    until none is left; a program that needs the interpreter is refused with a RelayError."""
    from ..eval.executor import NotDataflow, PlanCompiler
    from ..passes.gnf import to_graph_normal_form

    func = mod[entry]
    try:
        PlanCompiler("numexpr").compile(func)
    except NotDataflow as exc:
        raise RelayError(f"profile runs dataflow programs (operators, tuples, lets and calls of "
                         f"function literals); this one has a {exc}, which needs the interpreter") from None
    body = func.body
    for _ in range(10_000):  # each round removes one level of nesting of function literals
        body = to_graph_normal_form(body)
        inliner = _InlineLiterals()
        body = inliner.visit(body)
        if not inliner.changed:
            break
    if body is func.body:
        return mod
    out = mod.copy()
    out[entry] = Function(func.params, body, func.ret_type, func.type_params, func.attrs)
    return out


def _steps(func: Function, typed: IRModule, model) -> list[_Step]:
    """The instructions of ``func`` in execution order, each with its prediction (label, op, kind,
    signature, seconds)."""
    from ..eval.fused_kernels import FusedOpKernel, fused_kernel
    from ..eval.kernels import kernel_of, normalize
    from .cpu_cost import op_kind

    def type_of(node):
        if isinstance(node, Constant):
            return TensorType(node.data.shape, str(node.data.dtype))
        return typed.checked_types.type_of(node)

    from ..eval.executor import folded_at_compile

    inner = lambda n: isinstance(n, Function) and n is not func  # noqa: E731 - groups run whole
    steps: list[_Step] = []
    for node in iter_post_order(func.body, skip=inner):
        if isinstance(node, (Var, Constant, Op, Function)) or folded_at_compile(node):
            continue  # no instruction (a constant's transpose is computed when the plan is made)
        if isinstance(node, Tuple):
            steps.append(_Step(node, lambda args, _: tuple(args), node.fields,
                               ("tuple", "tuple", "tuple", "", model.profile.dispatch)))
            continue
        if isinstance(node, TupleGetItem):
            steps.append(_Step(node, lambda args, i: args[0][i], [node.tuple_value],
                               (f".{node.index}", "tuple", "tuple", "", model.profile.dispatch)))
            continue
        if isinstance(node, Let):
            raise RelayError("profile runs dataflow programs in graph form; convert lets with "
                             "`relaygraph convert --to gnf` first")
        if not isinstance(node, Call):
            raise RelayError(f"profile runs dataflow programs; this one has a {type(node).__name__} node, "
                             "which needs the interpreter")
        arg_types = [type_of(a) for a in node.args]
        out_type = type_of(node)
        sig = f"({', '.join(format_type(t) for t in arg_types)}) -> {format_type(out_type)}"
        if isinstance(node.op, Op):
            kernel = kernel_of(node.op)
            name = node.op.name
            run = (lambda k: lambda args, attrs: normalize(k(args, attrs)))(kernel)
            steps.append(_Step(node, run, node.args, (name, name, op_kind(name), sig,
                                                       model(name, node.attrs, arg_types, out_type))))
            continue
        if not (isinstance(node.op, Function) and node.op.attrs.get("Primitive", 0)):
            raise RelayError("profile runs calls of operators and of Primitive functions; this program "
                             f"calls a {type(node.op).__name__} (inline it first)")
        group = fused_kernel(node.op)
        if isinstance(group, FusedOpKernel):
            from ..ops.fused_ops import recognise

            name, attrs, args = recognise(node.op.body)
            position = {p: i for i, p in enumerate(node.op.params)}
            types = [arg_types[position[a]] if a in position else type_of(a) for a in args]
            predicted = model(name, attrs, types, out_type)
        else:
            members = [(n.op.name, n.attrs, tuple(type_of(a) for a in n.args), type_of(n))
                       for n in iter_post_order(node.op.body)
                       if isinstance(n, Call) and isinstance(n.op, Op)]
            name = "fused(" + ", ".join(dict.fromkeys(m[0] for m in members)) + ")"
            predicted = model.group(members, group.uses_numexpr and _float(arg_types), out_type)
        steps.append(_Step(node, group, node.args, (name, name if name.startswith("fused.") else group.label,
                                                    "fused", sig, predicted)))
    _layout_copies_to_consumers(steps, model.profile.dispatch)
    return steps


def _layout_copies_to_consumers(steps: list[_Step], dispatch: float) -> None:
    """A transpose between NCHW and NHWC is a view in the executor: the one instruction reading it
    makes the permuting copy (its kernel reads the strided view), and is timed with it. The model
    prices that copy on the transpose (extraction pays it where the layout changes), so each row
    here would show the copy on the wrong side: MobileNet's (1, 128, 56, 56) transpose predicted at
    0.39 ms and measured at 0.04, its depthwise consumer predicted at 0.52 and measured at 0.88.
    The prediction of the copy moves to the consumer, the transpose keeping its dispatch; the
    program's prediction is unchanged. A transpose read by several instructions, or by none (a
    result), keeps it."""
    from .cpu_cost import layout_change

    readers: dict = {}
    for step in steps:
        for value in step.inputs:
            readers.setdefault(value, []).append(step)
    for step in steps:
        node = step.node
        if not (isinstance(node, Call) and isinstance(node.op, Op) and node.op.name == "transpose"
                and layout_change(node.attrs) is not None):
            continue
        users = readers.get(node, [])
        if len(users) != 1:
            continue
        label, op, kind, sig, predicted = step.info
        moved = max(predicted - dispatch, 0.0)
        step.info = (label, op, kind, sig, predicted - moved)
        user = users[0]
        user.info = (*user.info[:4], user.info[4] + moved)


def _float(types) -> bool:
    return all(isinstance(t, TensorType) and t.dtype in ("float32", "float64") for t in types)


def _timed_plan(func: Function, steps: list[_Step], clock, samples: list[list[float]]):
    """The executor's plan of ``func`` with each instruction timed into ``samples`` in place (its
    order, and its freeing of values after their last use, as when the program runs), or None
    when the plan's instructions are not the steps one for one."""
    from ..eval.executor import compile_function

    plan = compile_function(func)
    if plan is None or len(plan.instrs) != len(steps):
        return None
    for label, step in zip(plan.labels, steps, strict=True):
        if not (label == step.info[0] or (step.info[1] == "tuple" and label in ("tuple", step.info[0]))
                or step.info[2] == "fused"):
            return None

    return plan.timed(samples, clock)


def _run_steps(func: Function, steps: list[_Step], values: list, clock, samples: list[list[float]]) -> None:
    """Each step in turn, timed into ``samples`` (every value is kept until the end)."""
    from ..eval.executor import fold_value, folded_at_compile

    env = dict(zip(func.params, values, strict=True))
    for step in steps:  # values the plan computes when it is made, contiguous as the plan makes them
        for c in step.inputs:
            if c not in env and folded_at_compile(c):
                env[c] = fold_value(c.op, [a.data for a in c.args], c.attrs)
    for i, step in enumerate(steps):
        args = [c.data if isinstance(c, Constant) else env[c] for c in step.inputs]
        node = step.node
        extra = node.index if isinstance(node, TupleGetItem) else getattr(node, "attrs", None)
        start = clock()
        env[step.node] = step.run(args, extra)
        samples[i].append(clock() - start)


def profile(mod: IRModule | Function, params: dict | None = None, entry: str = "main", inputs=None,
            runs: int = 5, seed: int = 0, calibrate: bool = True, progress="auto") -> ProgramProfile:
    """Time ``entry`` of ``mod`` node by node and as a whole, beside the ``cpu`` model's prediction.

    ``params`` bind weights (as ``rg.optimize`` takes them); ``inputs`` default to seeded random
    values. A missing CPU profile is calibrated first unless ``calibrate`` is False (then
    ProfileError says how to make one).
    """
    from ..eval import evaluate
    from ..eval.inputs import random_inputs
    from ..progress import phase
    from ..ty import infer_type
    from ..validate import positive
    from .cpu_cost import default_profile, timer
    from .optimize import bind_params

    positive("runs", runs, integer=True, allow_none=False)
    model = default_profile(calibrate=calibrate, progress=progress)
    if isinstance(mod, Function):
        mod = IRModule.from_expr(mod)
    if entry not in mod:
        raise RelayError(f"the module has no @{entry} to profile")
    if params:
        mod = bind_params(mod, params, entry)
    typed = infer_type(mod)
    flat = infer_type(dataflow_form(typed, entry))
    func = flat[entry]
    steps = _steps(func, flat, model)
    values = list(inputs) if inputs is not None else random_inputs(typed, seed, entry=entry)
    timing = phase("profile", f"{len(steps)} instructions, {runs} runs of each and of the program",
                   total=runs, unit="run", progress=progress, every=2.0)
    clock = timer(model.profile.clock)
    samples: list[list[float]] = [[] for _ in steps]
    program = []
    in_place = _timed_plan(func, steps, clock, samples)
    with np.errstate(all="ignore"):
        for _ in range(runs):
            if in_place is not None:
                in_place.run(values)
            else:
                _run_steps(func, steps, values, clock, samples)
            start = clock()
            evaluate(typed, *values, entry=entry)
            program.append(clock() - start)
            timing.step()
    timing.done()
    nodes = [NodeTime(*s.info, measured=statistics.median(t)) for s, t in zip(steps, samples, strict=True)]
    predicted = sum(n.predicted for n in nodes) + model.program_overhead(len(func.params))
    return ProgramProfile(nodes, statistics.median(program), predicted, runs,
                          profile_path=model.profile.path, quick_profile=model.profile.quick,
                          clock=model.profile.clock)


def predict(mod: IRModule | Function, params: dict | None = None, entry: str = "main",
            calibrate: bool = True) -> float:
    """Seconds the ``cpu`` model predicts for one run of ``entry``: every instruction the executor
    runs, plus the per-program overhead (nothing is measured)."""
    from ..ty import infer_type
    from .cpu_cost import default_profile
    from .optimize import bind_params

    model = default_profile(calibrate=calibrate)
    if isinstance(mod, Function):
        mod = IRModule.from_expr(mod)
    if params:
        mod = bind_params(mod, params, entry)
    typed = infer_type(dataflow_form(infer_type(mod), entry))
    func = typed[entry]
    return sum(s.info[4] for s in _steps(func, typed, model)) + model.program_overhead(len(func.params))


def _runner(mod, inputs: list, entry: str, own_constants: bool) -> Callable[[], object]:
    """One run of ``entry`` of ``mod`` on ``inputs``: through the executor's plan, on its own
    copies of the constants with ``own_constants``, where the entry is dataflow-only; else
    through ``evaluate``."""
    from ..eval import evaluate
    from ..eval.evaluate import bind_inputs
    from ..eval.executor import compile_function

    if own_constants and isinstance(mod, IRModule) and entry in mod:
        func = mod[entry]
        plan = compile_function(func)
        if plan is not None:
            own, values = plan.with_own_constants(), bind_inputs(func, tuple(inputs), {}, entry)
            return lambda: own.run(values)
    return lambda: evaluate(mod, *inputs, entry=entry)


def time_programs(mods: list, inputs: list, runs: int = 7, budget: float = 0.0, clock: str | None = None,
                  entry: str = "main", probe: Callable[[], float] | None = None, max_runs: int = 200,
                  on_round: Callable[[], object] | None = None, warm_up: bool = True,
                  samples: list | None = None, wall_samples: list | None = None,
                  own_constants: bool = True) -> tuple[list[float], list[float], float | None]:
    """Median seconds of each program, runs alternated (at least ``runs`` of each, more until
    ``budget`` seconds have passed, up to ``max_runs``, then on to the end of the rotation;
    ``on_round()`` is called after each round): by ``clock`` (default: the clock of this machine's
    CPU profile key, see ``clock_of``) and by the wall clock; and the median of ``probe()`` (for
    example a ``calibrate.Probe``) called every third round, alternated with the programs, or None.
    Each program runs once untimed first, unless ``warm_up`` is False (the caller has just run
    them all, for their values). ``samples``, if a list, receives each program's samples by
    ``clock`` (one list per program, in their order; sample k of each comes from round k, so
    programs can be compared round by round, see ``paired_ratio``); ``wall_samples`` likewise by
    the wall clock.

    ``own_constants`` (the default): each program the executor runs reads its own copies of its
    constants (``Plan.with_own_constants``), one set per place in ``mods``, so no program runs on
    weights another has just read. Hash-consing shares a constant between programs that hold the
    same values: the original, the pass pipeline's program (which keeps most weights as they are)
    and a second timing of the original read the same arrays, and in the alternation each ran with
    the one before's weights still in the cache, while a rewritten program's new weights never
    were. On DCGAN (42 MB of weights), four programs alternated at one BLAS thread: the original
    13.6 ms reading shared weights, 15.3 ms reading its own copies; the e-graph's program, whose
    transposed weights are its own, 13.4 and 14.2 ms; its measured speedup 1.02 and 1.09x (the
    ``cpu`` model predicted 1.085x).

    The order rotates by one program each round, and the rounds stop at a whole rotation, so each
    program runs equally often in each slot. A fixed order measurably favours some slots: on
    programs of a few milliseconds, a program's median moved by up to 4% with its slot alone in a
    fixed order."""
    import time as _time

    from ..validate import positive
    from .cpu_cost import clock_of, machine_key, timer

    positive("runs", runs, integer=True, allow_none=False)
    if not mods:
        raise RelayError("time_programs needs at least one program")
    read = timer(clock or clock_of(machine_key()))
    runs_of = [_runner(m, inputs, entry, own_constants) for m in mods]
    for run in runs_of if warm_up else ():
        run()
    n = len(mods)
    by_clock: list[list[float]] = [[] for _ in mods]
    by_wall: list[list[float]] = [[] for _ in mods]
    probes: list[float] = []
    last = runs_of[-1]
    rounds = 0
    started = _time.perf_counter()
    while (rounds < runs or rounds % n
           or (rounds < max_runs and _time.perf_counter() - started < budget)):
        if probe is not None and rounds % 3 == 0:
            probes.append(probe())
            last()  # the caches as the last program left them
        for k in range(n):
            i = (rounds + k) % n
            t0, w0 = read(), _time.perf_counter()
            runs_of[i]()
            by_clock[i].append(read() - t0)
            by_wall[i].append(_time.perf_counter() - w0)
            last = runs_of[i]
        rounds += 1
        if on_round is not None:
            on_round()
    if samples is not None:
        samples.extend(by_clock)
    if wall_samples is not None:
        wall_samples.extend(by_wall)
    return ([statistics.median(c) for c in by_clock], [statistics.median(w) for w in by_wall],
            statistics.median(probes) if probes else None)


def paired_ratio(base: list[float], other: list[float]) -> float:
    """How many times faster ``other`` ran than ``base``: the median over rounds of the ratio of
    their times in the same round (``time_programs``'s ``samples``, one of each per round).

    This machine's speed flips between states within seconds, and a state lasts across the runs of
    one round far more often than across a whole measurement: on MobileNet at one BLAS thread, eight
    measurements of 48-54 rounds each gave the ratio of the two medians 1.25-1.40 (sd 0.045) and
    the median of the rounds' ratios 1.31-1.35 (sd 0.017)."""
    if len(base) != len(other) or not base:
        raise RelayError(f"paired_ratio needs the same number of rounds of each program, at least one "
                         f"(got {len(base)} and {len(other)})")
    return statistics.median(b / o for b, o in zip(base, other, strict=True))
