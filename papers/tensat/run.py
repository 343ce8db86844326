"""Reproduce the shape of TENSAT's study with relaygraph; writes results.md, results.json and plots.

For each model, under the calibrated ``cpu`` cost model: the predicted and the measured numpy
speedup of the extracted program, beside TVM's opt-level-3 pass pipeline (``tvm-o3``) on the same
program (original, pipeline and e-graph programs alternated in one process, medians), optimization
time, greedy DAG against ILP extraction, and (for BERT) the effect of the e-graph node limit.

The CPU profile is calibrated at the start of the run (``--profile-dir`` reuses one), and the
cells use it. BLAS and numexpr run on one thread, so the profile and the programs are timed by
CPU time, which the other work on a shared machine does not inflate; wall-clock medians and the
load average are recorded beside them.

The work runs as a study (``study.toml``: one cell per model and per node limit, through
``rg.study.run``), with its results in ``results.sqlite``: a rerun after an interruption only
runs the cells not yet done; ``--new`` runs them all again.

    python papers/tensat/run.py            # the committed results (CPU-sized configurations)
    python papers/tensat/run.py --full     # full-size models (slow; results-full.sqlite)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one BLAS thread: steady timings on a shared 2-core machine

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[1]))

import relaygraph as rg  # noqa: E402
from relaygraph.egraph.calibrate import calibrate  # noqa: E402
from relaygraph.egraph.cpu_cost import default_profile  # noqa: E402
from relaygraph.egraph.extract.bench import machine_description  # noqa: E402
from relaygraph.egraph.optimize import random_inputs  # noqa: E402
from relaygraph.egraph.program_profile import paired_ratio, predict, time_programs  # noqa: E402

# Configurations sized for a 2-core CPU run; --full uses the zoo's defaults.
MODELS = {
    "resnet-50": dict(image_shape=(3, 64, 64)),
    "bert": dict(num_layers=2, hidden=256, heads=4, seq_len=64),
    "nasrnn": dict(),
    "inception-v3": dict(small=True),
    "squeezenet-1.1": dict(image_shape=(3, 96, 96)),
    "vgg-19": dict(image_shape=(3, 64, 64)),
}
NODE_LIMITS = (150, 250, 400, 600, 1_000)
RUNS = 7
# More runs of the small programs, until this many seconds have passed (up to 200 runs): with 7
# runs of each, ResNet-50 at 64x64 (21 ms) once measured 1.00x where three timings of the same
# programs with 15 runs or more, each in its own process, gave 1.059-1.063x.
BUDGET = 3.0
PIPELINE = "tvm-o3"


def study(name: str, options: dict, time_limit: float) -> dict:
    mod, params = rg.zoo.get(name, **options)
    row: dict = {"model": name, "options": {k: list(v) if isinstance(v, tuple) else v
                                            for k, v in options.items()}}
    row["load_start"] = os.getloadavg()[0]
    for extractor in ("greedy-dag", "ilp"):
        start = time.perf_counter()
        res = rg.optimize(mod, params=params, cost="cpu", extractor=extractor, time_limit=time_limit,
                          check=True, repeats=1, timing_budget=0, ilp_time_limit=60)
        row[extractor] = {"seconds": time.perf_counter() - start, "cost_before": res.cost_before,
                          "cost_after": res.cost_after, "optimal": res.optimal,
                          "saturation": res.saturation.stop_reason,
                          "enodes": res.saturation.nodes, "check": res.check_passed,
                          "max_abs_error": res.max_abs_error}
        if extractor == "ilp":  # the measured program is rg.optimize's default choice
            original = rg.infer_type(res.original)
            piped = rg.transform.named_pipeline(PIPELINE)(original)
            optimized = rg.infer_type(res.module)
            inputs = random_inputs(original["main"], seed=1)
            load = os.getloadavg()[0]
            rounds: list = []
            times, wall, _ = time_programs([original, piped, optimized], inputs, RUNS, BUDGET,
                                           samples=rounds)
            row["load"] = (load + os.getloadavg()[0]) / 2
            for key, prog, t, w in zip(("before", "pipeline", "after"), (original, piped, optimized),
                                       times, wall, strict=True):
                row[f"numpy_ms_{key}"], row[f"wall_ms_{key}"] = t * 1e3, w * 1e3
                row[f"predicted_ms_{key}"] = predict(prog) * 1e3
            # speedups are the medians of the rounds' ratios (programs compared round by round)
            row["speedup"] = paired_ratio(rounds[0], rounds[2])
            row["pipeline_speedup"] = paired_ratio(rounds[0], rounds[1])
            row["rounds"] = len(rounds[0])
            row["predicted_speedup"] = row["predicted_ms_before"] / row["predicted_ms_after"]
            row["predicted_pipeline_speedup"] = row["predicted_ms_before"] / row["predicted_ms_pipeline"]
    return row


def sweep_point(limit: int, time_limit: float) -> dict:
    """BERT optimized under one node limit (ILP extraction, no timing)."""
    mod, params = rg.zoo.get("bert", **MODELS["bert"])
    start = time.perf_counter()
    res = rg.optimize(mod, params=params, cost="cpu", node_limit=limit, time_limit=time_limit, check=False)
    return {"node_limit": limit, "enodes": res.saturation.nodes,
            "stop": res.saturation.stop_reason, "stop_detail": res.saturation.stop_detail,
            "extractor": "ilp", "cost_after": res.cost_after,
            "cost_before": res.cost_before, "seconds": time.perf_counter() - start}


def node_limit_sweep(time_limit: float) -> list[dict]:
    return [sweep_point(limit, time_limit) for limit in NODE_LIMITS]


# The study's cells ([[call]] in study.toml): one per model, one per node limit of the sweep.
def model_cell(model: str, full: bool = False, time_limit: float = 60.0) -> dict:
    """One model's row (the zoo's defaults when ``full``, else the CPU-sized MODELS)."""
    return study(model, {} if full else MODELS[model], time_limit)


def sweep_cell(node_limit: int, time_limit: float = 60.0) -> dict:
    """One point of BERT's node-limit sweep."""
    return sweep_point(node_limit, time_limit)


def run_study(models: list[str], full: bool, time_limit: float, new: bool) -> tuple[list[dict], list[dict]]:
    """Run (or resume) the study of ``models`` and the sweep; their rows in the usual order."""
    spec = rg.study.load_spec(HERE / "study.toml")
    if models != list(MODELS) or full or time_limit != 60.0:  # another grid: its own database
        base = {"function": "run.py:model_cell", "args": {"model": models, "full": full,
                                                          "time_limit": time_limit}}
        sweep = {"function": "run.py:sweep_cell", "args": {"node_limit": list(NODE_LIMITS),
                                                           "time_limit": time_limit}}
        name = "results-full" if full else "results-custom"
        spec = rg.study.parse_spec({"study": {"name": name, "database": f"{name}.sqlite"},
                                    "call": [base, sweep]}, base=HERE)
    db = spec.database or HERE / "results.sqlite"
    counts = rg.study.run(spec, db, new=new, progress="lines")
    rows = {json.dumps(json.loads(r["params"])["args"], sort_keys=True): r
            for r in rg.study.load(db, as_frame=False)}
    failed = [r for r in rows.values() if r["status"] == "failed"]
    if failed:
        raise SystemExit("cells failed:\n" + "\n".join(f"  {r['params']}: {r['error']}" for r in failed))
    print(f"study {counts['spec_hash']}: ran {counts['done']}, {counts['skipped']} already done", flush=True)
    out = []
    for cell in spec.cells:
        result = json.loads(rows[json.dumps(cell.params["args"], sort_keys=True)]["result"])
        out.append({k: v for k, v in result.items() if k not in ("wall_seconds", "worker", "machine",
                                                                 "started")})
    models_out = [r for r in out if "model" in r]
    order = {m: i for i, m in enumerate(models)}
    return (sorted(models_out, key=lambda r: order[r["model"]]),
            sorted((r for r in out if "node_limit" in r), key=lambda r: r["node_limit"]))


def _reduction(part: dict) -> float:
    return 1 - part["cost_after"] / part["cost_before"]


def write_markdown(rows: list[dict], sweep: list[dict], path: Path) -> None:
    loads = [r["load"] for r in rows if "load" in r]
    lines = ["# Results (generated by run.py)", "",
             f"Cost model: `cpu` (this machine's calibrated profile: seconds of the numpy executor per "
             f"node). Timings: numpy on {machine_description()}, one BLAS thread, CPU time (the wall "
             f"clock is in results.json), median of at least {RUNS} runs (more for up to "
             f"{BUDGET:.0f} s) of the original, the {PIPELINE} pipeline's and the e-graph's "
             "programs, alternated in one process; a measured speedup is the median of the rounds' "
             "ratios (the two programs' times in the same round). `rg.optimize` "
             "extracts with ILP by default; the greedy DAG columns show what greedy extraction alone "
             "reaches. The machine was shared with other jobs: load average "
             f"{min(loads, default=0):.1f} to {max(loads, default=0):.1f} while the programs were timed "
             "(the last column).", "",
             "| model | predicted before | after (greedy) | after (ILP) | reduction (ILP) | ILP optimal | "
             f"e-nodes | saturation | measured before | e-graph after | e-graph speedup: predicted | "
             f"measured | {PIPELINE}: predicted | measured | {PIPELINE} speedup: predicted | measured | "
             "optimize time (ILP) | load |",
             "|---|---:|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        g, i = r["greedy-dag"], r["ilp"]
        lines.append(f"| {r['model']} | {r['predicted_ms_before']:.2f} ms | {g['cost_after'] * 1e3:.2f} ms | "
                     f"{i['cost_after'] * 1e3:.2f} ms | {_reduction(i):.1%} | {i['optimal']} | "
                     f"{i['enodes']} | {i['saturation']} | {r['numpy_ms_before']:.2f} ms | "
                     f"{r['numpy_ms_after']:.2f} ms | {r['predicted_speedup']:.2f}x | {r['speedup']:.2f}x | "
                     f"{r['predicted_ms_pipeline']:.2f} ms | {r['numpy_ms_pipeline']:.2f} ms | "
                     f"{r['predicted_pipeline_speedup']:.2f}x | {r['pipeline_speedup']:.2f}x | "
                     f"{i['seconds']:.1f} s | {r['load']:.1f} |")
    lines += ["", "Predicted times are the `cpu` model's for the whole program (`rg.egraph.program_profile"
              ".predict`); the greedy and ILP columns are the extraction's own cost of the program it "
              "chose, in the same seconds.", "",
              "## BERT: effect of the node limit (ILP extraction)", "",
              "Saturation checks the node limit between iterations, so the iteration that crosses "
              "the limit can leave the e-graph well above it: the e-nodes column is the size "
              "actually reached.", "",
              "| node limit | e-nodes reached | stopped | cpu cost after (ILP) | reduction (ILP) "
              "| time |",
              "|---:|---:|---|---:|---:|---:|"]
    for s in sweep:
        lines.append(f"| {s['node_limit']} | {s['enodes']} | {s.get('stop_detail', s['stop'])} | "
                     f"{s['cost_after'] * 1e3:.2f} ms | {_reduction(s):.1%} | {s['seconds']:.1f} s |")
    path.write_text("\n".join(lines) + "\n")


def plot(rows: list[dict], sweep: list[dict], path: Path, machine: str | None = None):
    """Three panels: cpu-model cost reduction (greedy and ILP), predicted and measured speedups of
    the e-graph's and the pipeline's programs, BERT's node limit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter, PercentFormatter

    fig, (a, b, c) = plt.subplots(1, 3, figsize=(16, 5.5), layout="constrained",
                                  gridspec_kw={"width_ratios": [1.1, 1.4, 1.0]})
    names = [r["model"] for r in rows]
    xs = range(len(names))
    for k, (ext, label) in enumerate((("greedy-dag", "greedy DAG extraction"),
                                      ("ilp", "ILP extraction (rg.optimize's default)"))):
        vals = [_reduction(r[ext]) for r in rows]
        pos = [x + (k - 0.5) * 0.38 for x in xs]
        a.bar(pos, vals, 0.38, label=label, color=f"C{k}")
        for x, v in zip(pos, vals, strict=True):
            a.text(x, max(v, 0), f"{v:.1%}", ha="center", va="bottom", rotation=90, fontsize=7)
    a.set_xticks(list(xs), names, rotation=25, ha="right")
    top = max([_reduction(r[e]) for r in rows for e in ("greedy-dag", "ilp")] + [0.05])
    a.set_ylim(min(0, min(_reduction(r["ilp"]) for r in rows)), min(1, top * 1.6))
    a.yaxis.set_major_formatter(PercentFormatter(1.0))
    a.set_ylabel("cpu-model cost reduction (1 - after / before)")
    a.set_xlabel("model")
    a.set_title("predicted time saved (cpu model)")
    a.legend(loc="upper left", fontsize=8)

    series = (("predicted_speedup", "e-graph, predicted", "C0", "//"),
              ("speedup", "e-graph, measured", "C0", ""),
              ("predicted_pipeline_speedup", f"{PIPELINE}, predicted", "C3", "//"),
              ("pipeline_speedup", f"{PIPELINE}, measured", "C3", ""))
    width = 0.2
    values = [r[key] for r in rows for key, *_ in series]
    for k, (key, label, color, hatch) in enumerate(series):
        vals = [r[key] for r in rows]
        pos = [x + (k - 1.5) * width for x in xs]
        b.bar(pos, [v - 1 for v in vals], width, bottom=1.0, color=color, hatch=hatch, label=label,
              alpha=0.55 if hatch else 1.0, edgecolor="white" if not hatch else color)
        for x, v in zip(pos, vals, strict=True):
            b.text(x, v, f"{v:.2f}", ha="center", va="bottom" if v >= 1 else "top", fontsize=6, rotation=90)
    b.set_yscale("log")
    # room above and below the bars for their rotated labels
    lo, hi = min(1 / 1.15, min(values) / 1.2), max(1.15, max(values) * 1.25)
    b.set_ylim(lo, hi)
    b.set_yticks([t for t in (0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0) if lo <= t <= hi])
    b.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    b.yaxis.set_minor_formatter(NullFormatter())
    b.axhline(1.0, color="black", linewidth=0.8)
    b.set_xticks(list(xs), names, rotation=25, ha="right")
    b.set_xlabel("model")
    b.set_ylabel("time before / after (log scale)")
    b.set_title(f"speedup over the original: e-graph vs {PIPELINE} (measured: median of the rounds' "
                "ratios)")
    b.legend(loc="upper left", fontsize=7, ncol=2)

    limits = [s["node_limit"] for s in sweep]
    red = [_reduction(s) for s in sweep]
    c.plot(limits, red, "o-", color="C1", label="ILP extraction")
    for s, v in zip(sweep, red, strict=True):
        c.annotate(f"{v:.1%}\n{s['enodes']} e-nodes", (s["node_limit"], v), textcoords="offset points",
                   xytext=(0, 8 if v < 0.1 * max(red + [0.05]) else -26), ha="center", fontsize=7)
    c.set_xscale("log")
    c.set_xlim(min(limits) / 1.25, max(limits) * 1.25)
    c.set_xticks(limits, [str(n) for n in limits])
    c.xaxis.set_minor_formatter(NullFormatter())
    c.set_ylim(min(0, min(red)), max(0.05, max(red) * 1.6))
    c.yaxis.set_major_formatter(PercentFormatter(1.0))
    c.set_xlabel("e-graph node limit (log scale)")
    c.text(0.98, 0.03, "the limit is checked between iterations,\nso the e-graph can overshoot it",
           transform=c.transAxes, ha="right", va="bottom", fontsize=8)
    c.set_ylabel("cpu-model cost reduction (ILP)")
    c.set_title("BERT: effect of the node limit")
    c.legend(loc="upper left", fontsize=8)
    fig.suptitle("TENSAT's study on relaygraph: cpu cost model; timings with numpy on "
                 f"{machine or machine_description()}")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return fig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="full-size models (slow)")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--new", action="store_true", help="run every cell again (a new database)")
    parser.add_argument("--profile-dir", help="use (or make) the CPU profile here, not a new one")
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw results.png and results.md from results.json")
    args = parser.parse_args()
    if args.plot_only:
        saved = json.loads((HERE / "results.json").read_text())
        write_markdown(saved["rows"], saved["node_limits"], HERE / "results.md")
        plot(saved["rows"], saved["node_limits"], HERE / "results.png")
        return
    # numexpr on one thread as well, so the profile and the programs are timed by CPU time (set
    # here, not on import: a process that imports this file keeps its own setting)
    os.environ.setdefault("NUMEXPR_NUM_THREADS", "1")
    if "numexpr" in sys.modules:
        sys.modules["numexpr"].set_num_threads(int(os.environ["NUMEXPR_NUM_THREADS"]))
    if args.profile_dir:
        os.environ["RELAYGRAPH_PROFILE_DIR"] = args.profile_dir
        default_profile()  # made once when missing; the cells (child processes) read it
    else:  # calibrated now, so the profile sees the machine as the cells will
        os.environ["RELAYGRAPH_PROFILE_DIR"] = tempfile.mkdtemp(prefix="tensat-profile-")
        load = os.getloadavg()[0]
        profile = calibrate()
        print(f"calibrated in {profile.data['seconds']:.1f} s, load average {load:.1f}-"
              f"{os.getloadavg()[0]:.1f}", flush=True)
    rows, sweep = run_study(args.models, args.full, args.time_limit, args.new)
    (HERE / "results.json").write_text(json.dumps({"rows": rows, "node_limits": sweep,
                                                   "cpu_count": os.cpu_count()}, indent=2,
                                                  default=str) + "\n")
    write_markdown(rows, sweep, HERE / "results.md")
    plot(rows, sweep, HERE / "results.png")
    print((HERE / "results.md").read_text())


if __name__ == "__main__":
    main()
