"""ONNX conformance: the pass rate of ONNX's backend node tests through relaygraph's importer.

Runs every node test case the installed onnx package generates through
``rg.frontend.from_onnx`` + ``rg.evaluate`` (as tests/test_onnx_conformance.py does) and prints
covered-and-passing / total, the covered cases that fail (there should be none), and how many
cases each out-of-scope reason accounts for. ``--light`` also runs the light real models.

Run with ``python benchmarks/onnx_conformance.py [--light]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import onnx

import relaygraph as rg
from relaygraph.frontend import onnx_coverage as cov
from relaygraph.frontend.onnx_ops import covered_ops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--light", action="store_true", help="also run the light real models")
    args = parser.parse_args()
    t0 = time.perf_counter()
    cases = cov.collect_node_cases()
    outcomes = {c.name: cov.case_outcome(c) for c in cases if cov.out_of_scope(c) is None}
    rate = cov.pass_rate(cases, outcomes)
    print(f"onnx {onnx.__version__}, opsets 9..{onnx.defs.onnx_opset_version()}, "
          f"{len(covered_ops())} op types covered")
    print(f"node tests: {rate['covered']} of {rate['total']} pass "
          f"({100 * rate['covered'] / rate['total']:.1f}%), covered but failing: {rate['failing']}")
    for name, why in sorted(outcomes.items()):
        if why is not None:
            print(f"  FAIL {name}: {why}")
    print("out of scope, by reason:")
    for reason, n in sorted(rate["reasons"].items(), key=lambda kv: -kv[1]):
        print(f"  {n:5d}  {reason}")
    print(f"({time.perf_counter() - t0:.1f} s)")
    if args.light:
        for name, path, rtol, atol in cov.light_models():
            t = time.perf_counter()
            model = onnx.load(path)
            if name == "squeezenet":  # tied logits of 1e10: see tests/test_onnx_conformance.py
                model = cov.as_float64(model)
            mod, _ = rg.frontend.from_onnx(model)
            got = np.asarray(rg.evaluate(mod, *cov.light_inputs(model)), dtype=np.float32)
            ok = np.allclose(got, cov.light_expected(path)[0], rtol=rtol, atol=atol)
            print(f"light {name}: {'pass' if ok else 'FAIL'} ({time.perf_counter() - t:.1f} s)")


if __name__ == "__main__":
    main()
