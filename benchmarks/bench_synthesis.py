"""Rule synthesis benchmark (issue 18): synthesize rules over ten tensor ops and compare them with
the hand-written ``rules/algebraic.rules``.

Over {add, subtract, multiply, negative, transpose, reshape, nn.relu, nn.dense, nn.batch_matmul,
sum}, terms of up to 3 ops (terms of 3 ops use two ops and variables only):

- Coverage: the share of the hand-written rules over these ops (each direction an instance of
  which the synthesized set proves within 5 iterations, 2 random instances each). Target >= 90%.
  The misses are printed.
- Size: the synthesized rules those derivations use, against the hand-written rules covered.
  Target: no more.
- New rules: synthesized rules the hand-written rules (algebraic and layout) cannot derive within 5
  iterations. Target >= 10, listed; then each zoo model below is optimized (latency cost) with the
  default rules, and with the default rules plus the new rules, in this process: a model whose
  cost goes down shows that at least one new rule pays (the rules responsible are found by adding
  them one at a time).
- Time: the synthesis, target under 10 minutes on 2 cores.

Run with ``python benchmarks/bench_synthesis.py [--quick]`` (``--quick``: size 2, for a smoke test).
The machine may be loaded by other work: the times printed say so only by being slow.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import relaygraph as rg
from relaygraph.egraph.optimize import default_rule_files
from relaygraph.rewrite import load_rules
from relaygraph.rewrite.pattern import PCall, walk
from relaygraph.rewrite.rule import Rule
from relaygraph.synth import synthesize
from relaygraph.synth.derive import base_name, format_derivation, rule_derivation

OPS = ["add", "subtract", "multiply", "negative", "transpose", "reshape", "nn.relu", "nn.dense",
       "nn.batch_matmul", "sum"]
RULES = Path(__file__).resolve().parent.parent / "rules"
MODELS = [("bert", {"small": True}), ("nasrnn", {"small": True}), ("lstm", {"small": True})]


def rule_ops(rule: Rule) -> set[str]:
    """The ops a rule's two sides call."""
    return {n.op for p in (*rule.lhs, *rule.rhs) for n in walk(p) if isinstance(n, PCall)}


def optimize_cost(name: str, options: dict, rules) -> float:
    mod, params = rg.zoo.get(name, **options)
    result = rg.optimize(mod, rules=rules, cost="latency", extractor="greedy-dag", check=False,
                         params=params, iter_limit=8, time_limit=None, node_limit=30_000)
    return result.cost_after


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    size, wide = (2, 2) if quick else (3, 2)
    print(f"synthesizing over {', '.join(OPS)}: terms of up to {size} ops (above {wide}: two ops, "
          "variables only)")
    t0 = time.perf_counter()
    result = synthesize(OPS, size=size, wide=wide, progress=True)
    seconds = time.perf_counter() - t0
    out = Path(tempfile.mkdtemp()) / "synthesized.rules"
    result.write(out)
    synth = result.load()
    st = result.stats
    print(f"\n{len(result.rules)} rules in {seconds:.1f} s ({st['terms']} terms, {st['classes']} classes, "
          f"{st['candidates']} candidates, {st['unsound']} refused by the checker, "
          f"{st['derived'] + st['pruned'] + st['minimized']} derivable); written to {out}")
    print(result.text)

    # -- coverage --------------------------------------------------------------------------------
    hand_all = [r for r in load_rules(RULES / "algebraic.rules") if isinstance(r, Rule)]
    hand = [r for r in hand_all if rule_ops(r) <= set(OPS)]
    covered, misses, used = [], [], set()
    for r in hand:
        d = rule_derivation(r, synth, iterations=5, trials=2)
        if d is not None and d.proved:
            covered.append(r)
            used |= {base_name(n) for n in d.rules}
            print(f"  derived {r.name}: {format_derivation(d)}")
        else:
            misses.append((r, d))
    share = len(covered) / len(hand) if hand else 0.0
    print(f"\ncoverage: {len(covered)}/{len(hand)} hand-written rule directions over these ops derived "
          f"within 5 iterations = {share:.0%} (target >= 90%: {'met' if share >= 0.9 else 'NOT met'})")
    for r, d in misses:
        why = format_derivation(d) if d is not None else "no instance"
        print(f"  missed {r.name}: {r.text.split(':', 1)[1].strip()[:100]}  ({why})")
    covered_names = {base_name(r.name) for r in covered}
    print(f"size: {len(used)} synthesized rules derive the {len(covered_names)} hand-written rules covered "
          f"(target: no more: {'met' if len(used) <= len(covered_names) else 'NOT met'})")

    # -- new rules --------------------------------------------------------------------------------
    reference = hand_all + [r for r in load_rules(RULES / "layout.rules") if isinstance(r, Rule)]
    new = []
    for r in synth:
        d = rule_derivation(r, reference, iterations=5, trials=1)
        if d is not None and not d.proved:
            new.append(r)
    print(f"\nnew rules (sound, not derivable by the hand-written rules within 5 iterations): {len(new)} "
          f"(target >= 10: {'met' if len(new) >= 10 else 'NOT met'})")
    for r in new:
        print(f"  {r.name}: {r.text.split(':', 1)[1].strip()}")

    # -- latency ----------------------------------------------------------------------------------
    defaults = default_rule_files()
    lowered = []
    for name, options in MODELS:
        base = optimize_cost(name, options, defaults)
        more = optimize_cost(name, options, [*defaults, *new])
        print(f"{name}: latency cost with the default rules {base:.6g}, with the new rules too {more:.6g} "
              f"({more / base:.3f}x)")
        if more < base * (1 - 1e-6):
            for r in new:
                alone = optimize_cost(name, options, [*defaults, r])
                if alone < base * (1 - 1e-6):
                    lowered.append((name, r.name, base, alone))
                    print(f"  {r.name} alone: {alone:.6g} ({alone / base:.3f}x)")
    print(f"new rules that lower a zoo model's latency cost: {len(lowered)} "
          f"({'met' if lowered else 'NOT met'})")
    print(f"\ntime: synthesis {seconds:.1f} s (target < 600 s on 2 cores: "
          f"{'met' if seconds < 600 else 'NOT met'}; the machine may be loaded by other work)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
