"""relaygraph's dataflow executor against onnxruntime on the same models, on this machine.

onnxruntime is the reference users would otherwise pick, so the ratio is reported as measured
(relaygraph time / onnxruntime time; above 1 means relaygraph is slower). Models:

- ``bert_encoder`` and ``gpt_block`` (tests/data/onnx, as torch.onnx.export writes them) and the
  light ResNet-50 from the onnx package's backend test data: imported with
  ``rg.frontend.from_onnx`` (static shapes) and run on the executor; onnxruntime runs the file.
- ``resnet-18`` and ``bert`` (small unless ``--full``) from relaygraph's zoo: the executor runs
  the Relay program; onnxruntime runs ``rg.frontend.to_onnx`` of it.

Both run in this process on the same inputs (outputs compared first), runs alternate, and the
medians are compared. onnxruntime is optional (``pip install 'relaygraph[bench]'``).

    python benchmarks/bench_onnx.py [--models bert_encoder,gpt_block,resnet50-light,resnet-18,bert]
                                    [--repeat 7] [--seq 32] [--full]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import relaygraph as rg
from relaygraph.eval import compile_function

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "onnx"
IMPORTED = ("bert_encoder", "gpt_block", "resnet50-light")
ZOO = ("resnet-18", "bert")
ZOO_OPTIONS = {"resnet-18": {}, "bert": {"small": True}}  # BERT-base at 128 tokens takes ~20 s a run


def light_model_path(name: str) -> Path:
    import onnx.backend.test

    return Path(onnx.backend.test.__file__).parent / "data" / "light" / f"light_{name}.onnx"


def imported(name: str, seq: int):
    """(relaygraph module, ONNX bytes, feeds) of an .onnx file imported with static shapes."""
    import onnx

    path = light_model_path("resnet50") if name == "resnet50-light" else DATA / f"{name}.onnx"
    model = onnx.load(str(path))
    rng = np.random.default_rng(0)
    if name == "resnet50-light":
        inits = {i.name for i in model.graph.initializer}
        x = next(i for i in model.graph.input if i.name not in inits)
        dims = [d.dim_value for d in x.type.tensor_type.shape.dim]
        feeds = {x.name: rng.standard_normal(dims).astype(np.float32)}
    else:
        feeds = {"hidden_states": rng.standard_normal((1, seq, 64)).astype(np.float32)}
        if name == "bert_encoder":
            feeds["attention_mask"] = np.ones((1, seq), np.int64)
    mod, params = rg.frontend.from_onnx(str(path), shape={k: v.shape for k, v in feeds.items()})
    return mod, params, model.SerializeToString(), feeds


def exported(name: str, full: bool):
    """(relaygraph module, ONNX bytes, feeds) of a zoo model written with to_onnx."""
    mod, params = rg.zoo.get(name, **({} if full else ZOO_OPTIONS[name]))
    feeds = rg.zoo.example_inputs(mod, params, seed=0)
    model = rg.frontend.to_onnx(mod, params)
    return mod, params, model.SerializeToString(), feeds


def medians(fns, repeat: int) -> list[float]:
    """Median wall time of each function, the functions run in turn ``repeat`` times."""
    for fn in fns:  # warm up: first-call costs (allocation, onnxruntime's graph setup) left out
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, out in zip(fns, times, strict=True):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def bench(name: str, build, repeat: int, ort) -> None:
    mod, params, onnx_bytes, feeds = build()
    func = mod["main"]
    args = [feeds[p.name_hint] if p.name_hint in feeds else params[p.name_hint] for p in func.params]
    plan = compile_function(func)
    if plan is None:
        print(f"== {name}: not a dataflow program; the executor cannot run it")
        return
    session = ort.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
    ours = plan.run(args)
    theirs = session.run(None, feeds)[0]
    ours = ours[0] if isinstance(ours, tuple) else ours
    diff = float(np.max(np.abs(np.asarray(ours, np.float64) - theirs)))
    t_rg, t_ort = medians([lambda: plan.run(args), lambda: session.run(None, feeds)], repeat)
    print(f"== {name}: {len(plan)} executor steps; outputs agree to {diff:.1e}")
    print(f"   relaygraph executor {t_rg * 1e3:9.2f} ms   onnxruntime {t_ort * 1e3:9.2f} ms   "
          f"ratio {t_rg / t_ort:6.2f}  (median of {repeat}, alternated)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(IMPORTED + ZOO))
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--seq", type=int, default=32, help="sequence length of the transformer models")
    parser.add_argument("--full", action="store_true",
                        help="full-size zoo models (by default BERT is its small configuration)")
    args = parser.parse_args()
    try:
        import onnxruntime as ort
    except ImportError:
        print("onnxruntime is not installed; install the bench extra to compare against it:\n"
              "    pip install -e '.[bench]'    (or: pip install onnxruntime)")
        return 0
    print(f"onnxruntime {ort.__version__} (CPUExecutionProvider, its default threads); the machine may "
          "be shared, so compare ratios measured in one run")
    for name in args.models.split(","):
        if name in IMPORTED:
            if not hasattr(rg.frontend, "from_onnx"):
                print(f"== {name}: needs the ONNX importer (rg.frontend.from_onnx), not in this build")
                continue
            bench(name, lambda n=name: imported(n, args.seq), args.repeat, ort)
        elif name in ZOO:
            bench(f"{name} (zoo, exported with to_onnx)", lambda n=name: exported(n, args.full),
                  args.repeat, ort)
        else:
            print(f"unknown model {name!r}; choose from {', '.join(IMPORTED + ZOO)}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
