"""InferType throughput on generated ResNet-like programs of 1,000 and 10,000 operator calls.

Each program is a stem convolution followed by residual blocks (conv2d, batch_norm, .0, relu,
conv2d, batch_norm, .0, add, relu) with their own weights, then global pooling, dense and
softmax, so every kind of call of a real ResNet is checked. The figure of merit is the per-call
cost ratio between the two sizes, measured in this process: inference is linear when it stays
near 1 (target <= 1.2). A symbolic-batch run of the small program is reported too.
"""

from __future__ import annotations

import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__) + "/..")

import relaygraph as rg  # noqa: E402
from relaygraph.ir import Call, Function, IRModule, Op, TensorType, TupleGetItem, Var  # noqa: E402
from relaygraph.ty import sym  # noqa: E402

C, HW = 16, 8


def resnet_like(calls: int, batch=1) -> tuple[IRModule, int]:
    """A ResNet-shaped program with at least ``calls`` operator calls; returns it and the count."""
    params: list[Var] = []

    def weight(name: str, shape) -> Var:
        v = Var(name, TensorType(shape))
        params.append(v)
        return v

    def conv_bn(x, i: int, j: int):
        w = weight(f"b{i}_conv{j}_weight", (C, C, 3, 3))
        bn = [weight(f"b{i}_bn{j}_{k}", (C,)) for k in ("gamma", "beta", "mean", "var")]
        y = rg.op.nn.conv2d(x, w, padding=(1, 1), channels=C, kernel_size=(3, 3))
        return TupleGetItem(rg.op.nn.batch_norm(y, *bn), 0)

    data = Var("data", TensorType((batch, 3, HW, HW)))
    params.append(data)
    h = rg.op.nn.relu(rg.op.nn.conv2d(data, weight("stem_weight", (C, 3, 3, 3)), padding=(1, 1)))
    count = 2
    i = 0
    while count + 7 + 4 <= calls:  # 7 calls per block, 4 for the head
        skip = h
        h = rg.op.nn.relu(conv_bn(h, i, 0))
        h = rg.op.nn.relu(rg.op.add(conv_bn(h, i, 1), skip))
        count += 7
        i += 1
    h = rg.op.nn.batch_flatten(rg.op.nn.global_avg_pool2d(h))
    h = rg.op.nn.softmax(rg.op.nn.dense(h, weight("fc_weight", (10, C)), units=10))
    count += 4
    func = Function([data] + [p for p in params if p is not data], h)
    return IRModule.from_expr(func), count


def count_calls(mod: IRModule) -> int:
    """Operator calls in the program (each shared call once)."""
    return sum(1 for n in rg.post_order(mod["main"]) if isinstance(n, Call) and isinstance(n.op, Op))


def interleaved_best(mods: list[IRModule], rounds: int = 7) -> list[float]:
    """Best CPU time of InferType on each module, alternating between them every round so
    that background load affects every size alike."""
    best = [float("inf")] * len(mods)
    for _ in range(rounds):
        for i, mod in enumerate(mods):
            gc.collect()
            start = time.process_time()  # CPU time: other processes' load does not count
            rg.infer_type(mod)
            best[i] = min(best[i], time.process_time() - start)
    return best


def main() -> None:
    rg.infer_type(resnet_like(200)[0])  # warm-up: first use imports the op table and fills caches
    mods = [resnet_like(target)[0] for target in (1_000, 10_000)]
    calls = [count_calls(m) for m in mods]
    for n, seconds in zip(calls, interleaved_best(mods), strict=True):
        print(f"InferType, {n:>6} calls: {seconds * 1e3:8.1f} ms  "
              f"{n / seconds:>10,.0f} calls/s  {seconds / n * 1e6:6.1f} us/call")
        if n == calls[0]:
            small = seconds / n
        else:
            big = seconds / n
    print(f"per-call cost ratio, {calls[1]} vs {calls[0]} calls: {big / small:.2f} (target <= 1.2)")
    mod = resnet_like(1_000, batch=sym("n"))[0]
    (seconds,) = interleaved_best([mod], rounds=1)
    typed = rg.infer_type(mod)
    print(f"symbolic batch n, {count_calls(mod)} calls: {seconds * 1e3:.1f} ms, "
          f"output {typed['main'].ret_type}")


if __name__ == "__main__":
    main()
