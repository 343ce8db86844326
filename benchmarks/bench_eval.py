"""The dataflow executor against a plain loop over the same numpy kernels, and its memory.

For ResNet-50 (batch 1, 224x224) and the BERT encoder (12 layers, hidden 768, 128 tokens):

- time: ``rg.evaluate`` (executor) against a baseline built here, in the same process: the same
  op-table kernels called in a plain Python loop over a precomputed list that keeps every
  result. Runs alternate and the best of each is compared. Target: ratio <= 1.05.
- memory: peak traced memory (tracemalloc) of one executor run against the sum of all the
  intermediate tensors the program computes. Target: <= 0.25, since intermediates are freed.
- when FuseOps and InferType are available, the fused program on the executor, for reference.

    python benchmarks/bench_eval.py [--models resnet-50,bert] [--repeat 5] [--small]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

import relaygraph as rg
from relaygraph.eval import compile_function, values_equal
from relaygraph.ir import Call, Constant, Op, Tuple, TupleGetItem, Var, iter_post_order
from relaygraph.ops import registry


def baseline_program(func):
    """A precomputed list ``(kernel, input slots, output slot, attrs)`` over the function's
    nodes in post-order, calling the op table's kernels directly; slots are never freed."""
    slot = {p: i for i, p in enumerate(func.params)}
    constants, steps = {}, []

    def project(args, index):
        return args[0][index]

    def make_tuple(args, _):
        return tuple(args)

    for node in iter_post_order(func.body):
        if node in slot or isinstance(node, Op):
            continue
        if isinstance(node, Var):
            raise ValueError(f"unbound variable %{node.name_hint}")
        slot[node] = len(slot)
        if isinstance(node, Constant):
            constants[slot[node]] = node.data
        elif isinstance(node, Call) and isinstance(node.op, Op):
            kernel = registry.get(node.op.name).kernel
            steps.append((kernel, [slot[a] for a in node.args], slot[node], node.attrs))
        elif isinstance(node, TupleGetItem):
            steps.append((project, [slot[node.tuple_value]], slot[node], node.index))
        elif isinstance(node, Tuple):
            steps.append((make_tuple, [slot[f] for f in node.fields], slot[node], None))
        else:
            raise ValueError(f"the baseline handles dataflow programs only, not {type(node).__name__}")
    return len(slot), constants, steps, slot[func.body]


def run_baseline(program, inputs):
    """The plain loop: every step's kernel on its inputs; all results stay alive."""
    num_slots, constants, steps, out = program
    env = [None] * num_slots
    env[:len(inputs)] = inputs
    for i, value in constants.items():
        env[i] = value
    for kernel, ins, dst, attrs in steps:
        env[dst] = kernel([env[i] for i in ins], attrs)
    return env[out], env


def intermediate_bytes(env, inputs, constants) -> int:
    """Bytes of every distinct buffer the program computed (views count once, inputs not)."""
    outside = {id(_root(a)) for a in list(inputs) + list(constants.values())}
    seen, total, stack = set(), 0, list(env[len(inputs):])
    while stack:
        value = stack.pop()
        if isinstance(value, tuple):
            stack.extend(value)
        elif isinstance(value, np.ndarray):
            root = _root(value)
            if id(root) not in seen and id(root) not in outside:
                seen.add(id(root))
                total += root.nbytes
    return total


def _root(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def best_of(fns, repeat: int) -> list[tuple[float, float]]:
    """Alternate the functions ``repeat`` times: the best (wall, CPU) time of each.

    CPU time (this process, all threads) is reported too because it is far less disturbed by
    other work on a busy machine than wall time is.
    """
    best = [(float("inf"), float("inf"))] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            best[i] = (min(best[i][0], wall), min(best[i][1], cpu))
    return best


def peak_traced(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def fused_module(mod):
    """The module after InferType and FuseOps."""
    from relaygraph.passes import FuseOps
    from relaygraph.ty import infer_type

    return FuseOps()(infer_type(mod))


def bench(name: str, options: dict, repeat: int) -> None:
    mod, params = rg.zoo.get(name, **options)
    inputs = rg.zoo.example_inputs(mod, params)
    func = mod["main"]
    args = rg.eval.bind_inputs(func, (), {**inputs, **params})
    plan = compile_function(func)
    program = baseline_program(func)
    nodes = rg.node_count(func)
    print(f"== {name} {options or ''}: {nodes} nodes, {len(plan)} instructions, "
          f"{sum(v.nbytes for v in params.values()) / 2**20:.1f} MiB of parameters")

    expected, env = run_baseline(program, args)
    assert values_equal(plan.run(args), expected), "executor and baseline disagree"
    total = intermediate_bytes(env, args, program[1])
    del env, expected

    (w_exec, c_exec), (w_base, c_base) = best_of([lambda: plan.run(args),
                                                   lambda: run_baseline(program, args)], repeat)
    print(f"time      executor {w_exec * 1e3:9.1f} ms   plain loop {w_base * 1e3:9.1f} ms   "
          f"ratio {w_exec / w_base:.3f}  (wall; target <= 1.05)")
    print(f"          executor {c_exec * 1e3:9.1f} ms   plain loop {c_base * 1e3:9.1f} ms   "
          f"ratio {c_exec / c_base:.3f}  (CPU)")

    peak_exec = peak_traced(lambda: plan.run(args))
    peak_base = peak_traced(lambda: run_baseline(program, args))
    print(f"memory    executor peak {peak_exec / 2**20:8.1f} MiB   all intermediates "
          f"{total / 2**20:8.1f} MiB   ratio {peak_exec / total:.3f}  (target <= 0.25)")
    print(f"          plain loop peak {peak_base / 2**20:8.1f} MiB (keeps every result)")

    fused = fused_module(mod)
    fused_plan = compile_function(fused["main"])
    groups = sum(1 for n in iter_post_order(fused["main"])
                 if isinstance(n, rg.Function) and n.attrs.get("Primitive", 0))
    out = fused_plan.run(args)
    err = float(np.max(np.abs(out - plan.run(args))))
    (w_fused, c_fused), (w_base, c_base) = best_of([lambda: fused_plan.run(args),
                                                     lambda: run_baseline(program, args)], repeat)
    peak_fused = peak_traced(lambda: fused_plan.run(args))
    print(f"fused     {groups} Primitive groups: executor {w_fused * 1e3:9.1f} ms, ratio to the "
          f"unfused plain loop {w_fused / w_base:.3f} wall, {c_fused / c_base:.3f} CPU; peak "
          f"{peak_fused / 2**20:.1f} MiB, max |difference| {err:.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet-50,bert")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--small", action="store_true", help="the small test configurations")
    ns = parser.parse_args()
    configs = {"resnet-50": {"batch_size": 1, "image_shape": (3, 224, 224)},
               "bert": {"num_layers": 12, "hidden": 768, "heads": 12, "seq_len": 128}}
    for name in ns.models.split(","):
        options = {"small": True} if ns.small else configs.get(name, {})
        bench(name, options, ns.repeat)


if __name__ == "__main__":
    main()
