"""Dataflow pattern benchmark: matching patterns at every node of full-size BERT and ResNet-50.

For each model, three patterns (ResNet: conv2d + batch_norm/bias_add + relu, a dominator pattern
conv2d -> elementwise path -> add, and their alternation with a dense + bias pattern; BERT: dense +
bias_add, a gelu-ish dense + bias + erf pattern, and a dominator pattern layer_norm -> any path ->
residual add) are matched
at every node, with one matcher per program (its graph and post-dominator tree built on demand).
The program is measured at 1x (the model) and at 10x (ten copies of it side by side, each with
its own parameters, in one tuple). Prints the per-node cost of each and the ratio 10x / 1x:
matching is linear when the ratio stays <= 1.3. Best of several runs (the machine is shared).

Run with ``python benchmarks/bench_patterns.py``.
"""

from __future__ import annotations

import gc
import time

import relaygraph as rg
from relaygraph.dataflow_pattern import DFPatternMatcher, dominates, is_constant, is_op, wildcard

REPEATS = 5
TARGET = 1.3


def _copies(fn: rg.Function, k: int) -> rg.Expr:
    """``k`` copies of ``fn``'s body side by side, each over fresh parameters (k x the nodes)."""
    bodies = []
    for i in range(k):
        fresh = {p: rg.var(f"{p.name_hint}_{i}", p.type_annotation) for p in fn.params}
        bodies.append(rg.substitute(fn.body, fresh))
    return bodies[0] if k == 1 else rg.Tuple(tuple(bodies))


def _elemwise_path():
    unary = wildcard().has_attr({"TOpPattern": 0})(wildcard())
    return unary | is_op("nn.batch_norm")(None) | wildcard()[0] | is_op("nn.bias_add")(None)


def resnet_patterns() -> dict:
    conv = is_op("nn.conv2d")(wildcard(), wildcard())
    bn = is_op("nn.batch_norm")(conv, wildcard(), wildcard(), wildcard(), wildcard())[0]
    cbr = is_op("nn.relu")(bn | is_op("nn.bias_add")(conv, wildcard()))
    dom = dominates(conv, _elemwise_path(), is_op("add")(wildcard(), wildcard()))
    dense_bias = is_op("nn.bias_add")(is_op("nn.dense")(wildcard(), wildcard()), wildcard())
    return {"conv+bn/bias+relu": cbr, "dominator conv..add": dom, "alternation": cbr | dom | dense_bias}


def bert_patterns() -> dict:
    dense = is_op("nn.dense")(wildcard(), wildcard())
    dense_bias = is_op("nn.bias_add")(dense, wildcard())
    erf = is_op("erf")(is_op("multiply")(dense_bias, is_constant()))
    gelu = is_op("multiply")(is_op("multiply")(dense_bias, is_constant()),
                             is_op("add")(is_constant(), erf))
    # a residual add that post-dominates the layer_norm feeding its block, over any path
    dom = dominates(is_op("nn.layer_norm")(None), wildcard(), is_op("add")(wildcard(), wildcard()))
    return {"dense+bias": dense_bias, "dense+bias+gelu-ish": gelu, "dominator norm..add": dom}


def _match_everywhere(pattern, expr) -> tuple[float, int, int]:
    """Seconds to match ``pattern`` at every node of ``expr`` (best of REPEATS), nodes, matches."""
    nodes = [n for n in rg.post_order(expr) if isinstance(n, rg.Expr)]
    best, found = float("inf"), 0
    for _ in range(REPEATS):
        gc.collect()
        t0 = time.perf_counter()
        matcher = DFPatternMatcher(expr)
        found = sum(1 for n in nodes if matcher.match(pattern, n))
        best = min(best, time.perf_counter() - t0)
    return best, len(nodes), found


def main() -> None:
    worst = 0.0
    for model, patterns in (("bert", bert_patterns()), ("resnet-50", resnet_patterns())):
        mod, _ = rg.zoo.get(model)
        fn = mod["main"]
        small, large = _copies(fn, 1), _copies(fn, 10)
        print(f"{model}: {rg.node_count(small)} nodes at 1x, {rg.node_count(large)} at 10x")
        for name, pattern in patterns.items():
            t1, n1, m1 = _match_everywhere(pattern, small)
            t10, n10, m10 = _match_everywhere(pattern, large)
            per1, per10 = t1 / n1 * 1e6, t10 / n10 * 1e6
            ratio = per10 / per1
            worst = max(worst, ratio)
            print(f"  {name:24s} 1x: {per1:6.2f} us/node ({m1} matches)   "
                  f"10x: {per10:6.2f} us/node ({m10} matches)   ratio {ratio:.2f}")
    verdict = "linear" if worst <= TARGET else "NOT linear"
    print(f"worst per-node ratio 10x / 1x: {worst:.2f} (target <= {TARGET}): {verdict}")


if __name__ == "__main__":
    main()
