"""``relaygraph optimize``: equality saturation, extraction and checking, on a file or a zoo model."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..validate import EXTRACTORS
from . import UsageError

__all__ = ["register"]

# for --help only: the names are checked by relaygraph.validate, as rg.optimize checks them
COSTS = ("node-count", "flops", "bytes", "latency", "measured", "cpu")
PREVIEW_LINES = 25


def model_options(args: argparse.Namespace) -> dict:
    """The zoo options of ``-O name=value`` (values parsed as pass options are) and ``--small``,
    checked against what the model takes before anything is built."""
    from .. import zoo
    from ..passes.pipeline import option_value

    out = {}
    for pair in args.model_option:
        if "=" not in pair:
            raise UsageError(f"model option {pair!r} must look like name=value")
        key, value = pair.split("=", 1)
        out[key.strip().replace("-", "_")] = option_value(value)
    if args.small:
        out["small"] = True
    zoo.check_options(args.model, **out)
    return out


def load_program(args: argparse.Namespace, what: str = "optimize"):
    """(module, params, label) of the Relay file or ``--model`` the command was given."""
    from .. import zoo
    from .cmd_import import read_program

    if (args.file is None) == (args.model is None):
        raise UsageError("give a Relay file or --model NAME (not both)")
    if args.file is not None:
        if args.small or args.model_option:
            raise UsageError("--small and -O are options of --model, not of a Relay file")
        mod = read_program(args.file, args.shape)
        if what == "optimize" and "main" not in mod:
            raise UsageError(f"{args.file}: no @main function to {what}")
        return mod, None, args.file
    if args.shape:
        raise UsageError("--shape applies to ONNX models, not to --model")
    options = model_options(args)
    mod, params = zoo.get(args.model, **options)
    return mod, params, args.model


def add_program_arguments(p) -> None:
    """The arguments that name a program: a file, or a zoo model with its options."""
    from .cmd_import import SHAPE_HELP

    p.add_argument("file", nargs="?", help="a Relay text file or an ONNX model (or use --model)")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=DIMS", help=SHAPE_HELP)
    p.add_argument("--model", help="a built-in model (relaygraph.zoo)")
    p.add_argument("--small", action="store_true", help="the model's small configuration")
    p.add_argument("-O", "--model-option", action="append", default=[], metavar="NAME=VALUE",
                   help="a model option, e.g. -O num_layers=4 or -O batch_size=2 (repeatable)")


def _cmd_optimize(args: argparse.Namespace) -> int:
    from ..egraph.optimize import optimize
    from ..text import astext
    from ..validate import optimize_options

    optimize_options(cost=args.cost, extractor=args.extractor, node_limit=args.node_limit,
                     iter_limit=args.iter_limit, time_limit=args.time_limit, prefix="--")
    if args.compare_pipeline is not None:
        from ..passes.pipeline import NAMED_PIPELINES

        if args.compare_pipeline not in NAMED_PIPELINES:
            raise UsageError(f"--compare-pipeline: unknown pipeline {args.compare_pipeline!r}; known: "
                             f"{', '.join(NAMED_PIPELINES)}")
    if args.cost == "cpu":  # before any work: a missing profile is measured (or reported) first
        from ..egraph.cpu_cost import default_profile

        default_profile(calibrate=not args.no_calibrate)
    mod, params, label = load_program(args)
    if _wants_rule_check(args):
        _check_rules(args.rules)
    entry = f"{len(mod['main'].params)} inputs" if "main" in mod else "no @main"
    print(f"optimizing {label}: {entry}"
          + (f", {len(params)} weights bound as constants" if params else ""))
    res = optimize(mod, rules=args.rules or None, cost=args.cost, extractor=args.extractor,
                   node_limit=args.node_limit, iter_limit=args.iter_limit, time_limit=args.time_limit,
                   check=not args.no_check, params=params, seed=args.seed,
                   progress=not args.no_progress, functions=args.function or None,
                   keep_fused_ops=args.keep_fused_ops, explain=args.explain)
    print(res.summary())
    print(speedup_line(res))
    if args.explain:
        from ..synth.explain import explain

        print()
        print(explain(res).text())
    if args.compare_pipeline:
        from ..egraph.compare import compare_pipeline

        print(f"\noriginal vs the {args.compare_pipeline} pipeline vs the e-graph "
              f"(measured: numpy executor, runs alternated, medians):")
        print(compare_pipeline(res, args.compare_pipeline, seed=args.seed,
                               progress=not args.no_progress).table())
    text = astext(res.module)
    if args.output and _may_write(res, args):
        Path(args.output).write_text(text)
        print(f"optimized program written to {args.output}")
    elif not args.output:
        lines = text.splitlines()
        print(f"\noptimized program ({len(lines)} lines; -o FILE writes all of it):")
        print("\n".join(lines[:PREVIEW_LINES]) + ("\n..." if len(lines) > PREVIEW_LINES else ""))
    if args.report:
        res.save_report(args.report)
        print(f"report written to {args.report}")
    if res.check_passed is True or args.no_check:
        return 0
    return _check_failed(res, args)


def speedup_line(res) -> str:
    """The cost model's predicted speedup beside the measured one, as the demo shows them."""
    predicted = f"{res.cost_before / res.cost_after:.2f}x" if res.cost_after > 0 else "n/a"
    measured = f"{res.speedup:.2f}x" if res.speedup is not None else "not measured (--no-check)"
    return (f"speedup: predicted {predicted} ({res.cost_model} model), measured {measured} (numpy, median "
            "of the alternated runs' ratios)")


def _may_write(res, args: argparse.Namespace) -> bool:
    """``-o`` is written when the check passed (or was not asked for), or with ``--force``."""
    return res.check_passed is True or args.no_check or args.force


def _check_failed(res, args: argparse.Namespace) -> int:
    """Say why the check failed and what became of ``-o``; exit code 1."""
    import sys

    print(f"relaygraph: error: {res.failure_message()}", file=sys.stderr)
    if args.output and args.force:
        print(f"relaygraph: {args.output} was written anyway (--force)", file=sys.stderr)
    elif args.output:
        print(f"relaygraph: {args.output} was not written because the check did not pass "
              "(--force writes it anyway)", file=sys.stderr)
    return 1


def _wants_rule_check(args: argparse.Namespace) -> bool:
    """``--check-rules`` / ``--no-check-rules``; by default rule files given with ``--rules`` are
    checked, the built-in ones (checked by the test suite) are not."""
    return bool(args.rules) if args.check_rules is None else args.check_rules


def _check_rules(paths) -> None:
    """Run the soundness checker (as ``relaygraph rules check``); UsageError naming the bad rules."""
    from ..egraph.optimize import default_rule_files
    from ..rewrite import load_rules
    from ..rewrite.soundness import check_rules

    results = check_rules(load_rules(paths or default_rule_files()))
    bad = [r for r in results if not (r.ok or r.status == "not instantiable")]
    if bad:
        raise UsageError("; ".join(f"rule {r.rule}" + (f" ({r.source})" if r.source else "")
                                   + f" is {r.status}: {'; '.join(r.detail.splitlines())}"
                                   for r in bad)
                         + " (--no-check-rules skips this check)")


def register(sub) -> None:
    """Add ``optimize``."""
    p = sub.add_parser("optimize", help="rewrite a program by equality saturation and extract the best")
    add_program_arguments(p)
    p.add_argument("--rules", nargs="+", help="rule files (default: rules/algebraic.rules, "
                                              "rules/fusion.rules, rules/cpu.rules, rules/conv.rules)")
    p.add_argument("--cost", default="cpu",
                   help=f"cost model: {', '.join(COSTS)} (default cpu: this machine's numpy executor, "
                        "from its calibrated profile; see relaygraph calibrate)")
    p.add_argument("--no-calibrate", action="store_true",
                   help="with --cost cpu, fail instead of calibrating when this machine has no CPU profile")
    p.add_argument("--extractor", default="ilp",
                   help=f"{', '.join(EXTRACTORS)}; default ilp: DAG-optimal within its time limit, "
                        "warm-started by greedy-dag")
    p.add_argument("--node-limit", type=int, default=50_000)
    p.add_argument("--iter-limit", type=int, default=30)
    p.add_argument("--time-limit", type=float, default=60.0, help="saturation seconds (hard limit)")
    p.add_argument("--function", action="append", metavar="NAME",
                   help="rewrite only this function (repeatable; default: every function the e-graph "
                        "can take, the others kept unchanged)")
    p.add_argument("--keep-fused-ops", action="store_true",
                   help="write the fused.* ops the rules made (default: standard Relay, each fused op "
                        "as a Primitive=1 function of its parts)")
    p.add_argument("-o", "--output", help="write the optimized program here")
    p.add_argument("--report", help="write a JSON report here")
    p.add_argument("--no-check", action="store_true", help="skip evaluating and timing both programs")
    p.add_argument("--force", action="store_true",
                   help="write -o even when the check fails (by default it is written only when the "
                        "optimized program's outputs match the original's)")
    p.add_argument("--check-rules", action=argparse.BooleanOptionalAction, default=None,
                   help="run the soundness checker (relaygraph rules check) on the rules first and stop "
                        "if one is unsound (default: on for files given with --rules)")
    p.add_argument("--compare-pipeline", nargs="?", const="tvm-o3", default=None, metavar="PIPELINE",
                   help="also run a named pass pipeline on the original (default tvm-o3: TVM's opt_level-3 "
                        "build) and print original vs pipeline vs e-graph, predicted and measured")
    p.add_argument("--explain", action="store_true",
                   help="print, per changed op of the result, the rules that made it from the original")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs for the check")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(run=_cmd_optimize)
