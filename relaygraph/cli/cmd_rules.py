"""``relaygraph rules``: work with rule files (``check``: evaluate every rule on random inputs, or
with ``--redundant`` list the rules derivable from the others; ``derive``: prove an equality with
a rule set; ``synthesize``: infer rules from enumerated terms)."""

from __future__ import annotations

import argparse
import sys

from ..validate import positive

__all__ = ["register"]


def _cmd_check(args: argparse.Namespace) -> int:
    from ..rewrite import load_rules
    from ..rewrite.soundness import check_rules, format_results

    for option in ("trials", "tries"):
        positive(f"--{option}", getattr(args, option), integer=True, allow_none=False)
    rules = load_rules(args.paths)  # a bad rule file is reported by the command line (exit 2)
    if args.redundant:
        return _redundant(args, rules)
    if args.rule:
        wanted = set(args.rule)
        rules = [r for r in rules if r.name in wanted or r.name.removesuffix("<=") in wanted]
        if not rules:
            print(f"relaygraph: error: no rule named {', '.join(sorted(wanted))}", file=sys.stderr)
            return 2
    results = check_rules(rules, trials=args.trials, seed=args.seed, tries=args.tries)
    print(format_results(results))
    return 0 if all(r.ok or r.status == "not instantiable" for r in results) else 1


def _redundant(args: argparse.Namespace, rules) -> int:
    from ..synth.derive import base_name, format_derivation, redundant_rules

    positive("--iterations", args.iterations, integer=True, allow_none=False)
    found = redundant_rules(rules, iterations=args.iterations, trials=min(args.trials, 3), seed=args.seed,
                            only=args.rule or None)
    names = {r.name for r, _ in found}
    checked = sum(1 for r in rules if getattr(r, "lhs", None) is not None
                  and (not args.rule or base_name(r.name) in set(args.rule)))
    shown = 0
    for rule, d in found:
        both = rule.name + "<=" in names
        if rule.name.endswith("<=") and base_name(rule.name) in names:
            continue  # told with its other direction
        where = f"  [{rule.span.source_name}:{rule.span.line}]" if rule.span else ""
        what = f"{rule.name} (both directions)" if both else rule.name
        print(f"{what} is derivable from the others{where}")
        print(f"    {format_derivation(d)}")
        shown += 1
    print(f"{shown} of {checked} rule directions checked are derivable from the other rules "
          f"within {args.iterations} iteration(s)")
    return 0


def _term_rule(lhs: str, rhs: str, cond: str | None):
    from ..errors import RuleError
    from ..rewrite import parse_rules

    for side, text in (("--lhs", lhs), ("--rhs", rhs)):
        if not text or not text.strip():
            raise RuleError(f"{side}: an empty term")
    statement = f"rule goal : {lhs} => {rhs}" + (f" if {cond}" if cond else "")
    rules = parse_rules(statement, "<--lhs/--rhs>", ruleset="goal")
    return [r for r in rules if getattr(r, "lhs", None) is not None][0]


def _cmd_derive(args: argparse.Namespace) -> int:
    from ..rewrite import load_rules
    from ..synth.derive import format_derivation, rule_derivation

    positive("--iterations", args.iterations, integer=True, allow_none=False)
    positive("--trials", args.trials, integer=True, allow_none=False)
    rules = load_rules(args.paths)
    goal = _term_rule(args.lhs, args.rhs, args.cond)
    d = rule_derivation(goal, rules, iterations=args.iterations, trials=args.trials, seed=args.seed)
    if d is None:
        print(f"relaygraph: error: no types found under which {args.lhs} type-checks"
              + (" and the condition holds" if args.cond else ""), file=sys.stderr)
        return 2
    if d.proved:
        print(f"proved within {args.iterations} iteration(s) on {args.trials} random instance(s): "
              f"{args.lhs} == {args.rhs}")
        print(f"    {format_derivation(d)}")
        return 0
    print(f"not proved within {args.iterations} iteration(s): {format_derivation(d)}")
    return 1


def _cmd_synthesize(args: argparse.Namespace) -> int:
    from ..synth import MAX_TERMS, synthesize

    positive("--size", args.size, integer=True, allow_none=False)
    positive("--max-terms", args.max_terms, integer=True)
    positive("--iterations", args.iterations, integer=True, allow_none=False)
    literals = [float(x) for x in args.literals.split(",") if x.strip()] if args.literals else []
    result = synthesize(args.ops.split(","), args.size, variables_count=args.variables, literals=literals,
                        wide=args.wide, iterations=args.iterations, conditions=not args.no_conditions,
                        max_terms=args.max_terms or MAX_TERMS, seed=args.seed, both_ways=args.both_ways,
                        progress=True)
    result.command = _synthesize_command(args)
    path = result.write(args.out)
    st = result.stats
    derivable = st["derived"] + st["pruned"] + st["minimized"]
    print(f"{len(result.rules)} rules written to {path} ({st['terms']} terms, {st['candidates']} candidates: "
          f"{st['unsound']} refused by the soundness checker, {derivable} derivable "
          f"from the rules kept; {st['seconds']:.1f} s)")
    return 0


def _synthesize_command(args: argparse.Namespace) -> str:
    """The command line that reproduces this synthesis (the options that differ from their defaults)."""
    import shlex

    words = ["relaygraph", "rules", "synthesize", "--ops", args.ops, "--size", str(args.size)]
    for flag, value, default in (("--wide", args.wide, None), ("--variables", args.variables, 3),
                                 ("--literals", args.literals, "0,1,-1,0.5"),
                                 ("--iterations", args.iterations, 3), ("--max-terms", args.max_terms, None),
                                 ("--seed", args.seed, 0)):
        if value != default:
            words += [flag, str(value)]
    flags = (("--no-conditions", args.no_conditions), ("--both-ways", args.both_ways))
    words += [flag for flag, on in flags if on]
    return shlex.join([*words, "--out", args.out])


def _literals(text: str) -> str:
    for x in text.split(","):
        if x.strip():
            try:
                float(x)
            except ValueError:
                raise argparse.ArgumentTypeError(f"not a number: {x!r}") from None
    return text


def register(sub) -> None:
    """Add ``rules`` (with its ``check`` action) to the command's subparsers."""
    p = sub.add_parser("rules", help="work with rewrite rule files")
    actions = p.add_subparsers(dest="action", required=True)
    c = actions.add_parser(
        "check", help="check that every rule is sound: both sides evaluated on random inputs agree",
        description="Instantiate every rule on random shapes and values that satisfy its condition, "
                    "evaluate both sides and compare. Exit code 1 when a rule is unsound or changes "
                    "a type, 2 for bad input.")
    c.add_argument("paths", nargs="+", help=".rules or .egg files, or directories of them")
    c.add_argument("--trials", type=int, default=3, help="instances per rule (default 3)")
    c.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    c.add_argument("--tries", type=int, default=300,
                   help="attempts to find an instance per trial (default 300)")
    c.add_argument("--rule", action="append", metavar="NAME",
                   help="check only this rule (both directions); may be repeated")
    c.add_argument("--redundant", action="store_true",
                   help="instead of soundness: list the rules derivable from the others, each with its "
                        "derivation (the rules applied, per iteration)")
    c.add_argument("--iterations", type=int, default=5,
                   help="with --redundant: saturation iterations per derivation (default 5)")
    c.set_defaults(run=_cmd_check)

    d = actions.add_parser(
        "derive", help="whether a rule set proves an equality within limits, and how",
        description="Instantiate LHS => RHS on random types (as `rules check` does), put both sides in an "
                    "e-graph and saturate with the rules; print the rules applied per iteration. Exit "
                    "code 0 proved, 1 not proved within the limits, 2 bad input.")
    d.add_argument("paths", nargs="+", help=".rules or .egg files, or directories of them")
    d.add_argument("--lhs", required=True, help="a term in the rule language, e.g. 'subtract(?a, ?b)'")
    d.add_argument("--rhs", required=True, help="a term in the rule language, e.g. 'add(?a, negative(?b))'")
    d.add_argument("--if", dest="cond", default=None, metavar="COND", help="a condition on the variables")
    d.add_argument("--iterations", type=int, default=5, help="saturation iterations (default 5)")
    d.add_argument("--trials", type=int, default=2,
                   help="random instances that must all be proved (default 2)")
    d.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    d.set_defaults(run=_cmd_derive)

    s = actions.add_parser(
        "synthesize", help="infer sound rules from terms enumerated over some ops",
        description="Enumerate well-typed terms over OPS up to N ops, group them by their values on random "
                    "inputs of several shapes and dtypes, keep the equalities the soundness checker passes "
                    "and that the rules kept before cannot derive, and write them as a .rules file.")
    s.add_argument("--ops", required=True, help="comma-separated op names, e.g. add,multiply,negative")
    s.add_argument("--size", type=int, default=2, help="most ops in a term (default 2)")
    s.add_argument("--out", required=True, help="the .rules file to write")
    s.add_argument("--wide", type=int, default=None,
                   help="terms above this many ops use two ops and variables only (default: --size)")
    s.add_argument("--variables", type=int, default=3, help="pattern variables (default 3)")
    s.add_argument("--literals", type=_literals, default="0,1,-1,0.5",
                   help="scalar literals, comma-separated (default 0,1,-1,0.5; '' for none)")
    s.add_argument("--iterations", type=int, default=3,
                   help="saturation iterations when testing whether a candidate is derivable (default 3)")
    s.add_argument("--no-conditions", action="store_true", help="do not infer conditions")
    s.add_argument("--both-ways", action="store_true",
                   help="write an unconditional equality of two terms of one size as LHS <=> RHS "
                        "(the cost model then picks the side; e.g. relu before or after a max-pool)")
    s.add_argument("--max-terms", type=int, default=None,
                   help="refuse an enumeration that could make more terms than this (default 150000)")
    s.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    s.set_defaults(run=_cmd_synthesize)
