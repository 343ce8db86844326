"""The egglog side of the bridge: one e-graph, loaded in bulk from batches, with errors made clear.

Loading works without one command per node. A batch's rows are written as tab-separated files
and read by egglog's ``input`` command into relations ``in:<constructor>`` (handle, then the
node's fields with children as handles). One rule per constructor then builds every node at
once over placeholders ``(Ph k)`` standing for handle ``k`` (so no node waits for its children),
sets ``(nid k)``, and a link rule unions each placeholder with the class its handle names;
the placeholders and input rows are deleted afterwards. Types arrive the same way
(``in:ty``, handle -> type text), and the facts rules read (``rank``, ``dtype``, ``dim``) are
derived inside egglog from per-type tables (``ty:rank``, ``ty:dtype``, ``ty:dim``). Building
and running the ``input`` commands is linear in the rows and far cheaper than a command per
node. Small tables, and strings that a tab-separated file cannot carry (tabs, newlines,
surrounding spaces), go in as one command per row instead.

The classes rules create are typed inside egglog too, by signature (``_typing_rules``; the
Python side is ``relaygraph.egraph.scan``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref

from ..errors import RelayError
from .encoding import EXPR, LIST, constructor_fields, schema_program
from .tables import Batch
from .typer import TypeTable

__all__ = ["EgglogError", "Backend", "constructor_fields", "parse_egglog", "MACHINERY", "TYPING_STEP"]

# The schedule step that types new classes and sets their facts (rg-type holds both kinds of rule);
# saturation ends each iteration's schedule with it, so one egglog call runs the rules and types.
TYPING_STEP = "(saturate (run rg-type))"


class EgglogError(RelayError):
    """egglog refused a command or failed while running one (its message is kept in ``detail``)."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail

    @property
    def is_type_merge(self) -> bool:
        """True when a union would have merged classes of different types."""
        return "Illegal merge attempted for function" in self.detail and any(
            f"function {name}" in self.detail for name in ("ty", "rank", "dtype", "dim"))


MACHINERY = """
(constructor Ph (i64) RExpr :unextractable)
(constructor PhL (i64) RList :unextractable)
(relation in:union (i64 i64))
(function in:ty (i64) String :no-merge)
(function ty:rank (String) i64 :no-merge)
(function ty:dtype (String) String :no-merge)
(function ty:dim (String i64) i64 :no-merge)
(function lty (RList) String :no-merge)
(ruleset rg-load)
(ruleset rg-type)
(ruleset rg-sig-clean)
(ruleset rg-facts)
(ruleset rg-clean)
(rule ((= p (Ph a)) (= e (nid a))) ((union p e)) :ruleset rg-load :name "rg-link")
(rule ((in:union a b) (= x (nid a)) (= y (nid b))) ((union x y)) :ruleset rg-load :name "rg-union")
(rule ((= s (in:ty k)) (= e (nid k))) ((set (ty e) s)) :ruleset rg-facts :name "rg-ty")
(rule ((= s (ty e)) (= r (ty:rank s))) ((set (rank e) r)) :ruleset rg-facts :name "rg-rank")
(rule ((= s (ty e)) (= d (ty:dtype s))) ((set (dtype e) d)) :ruleset rg-facts :name "rg-dtype")
(rule ((= s (ty e)) (= v (ty:dim s i))) ((set (dim e i) v)) :ruleset rg-facts :name "rg-dim")
(rule ((= s (ty e)) (= r (ty:rank s))) ((set (rank e) r)) :ruleset rg-type :name "rg-type-rank")
(rule ((= s (ty e)) (= d (ty:dtype s))) ((set (dtype e) d)) :ruleset rg-type :name "rg-type-dtype")
(rule ((= s (ty e)) (= v (ty:dim s i))) ((set (dim e i) v)) :ruleset rg-type :name "rg-type-dim")
(rule ((= p (Ph k))) ((delete (Ph k))) :ruleset rg-clean :name "rg-clean-ph")
(rule ((= p (PhL k))) ((delete (PhL k))) :ruleset rg-clean :name "rg-clean-phl")
(rule ((in:union a b)) ((delete (in:union a b))) :ruleset rg-clean :name "rg-clean-union")
(rule ((= l (RNil))) ((set (lty l) "()")) :ruleset rg-type :name "rg-type-RNil")
(rule ((= e (RTuple l)) (= u (lty l))) ((set (ty e) u)) :ruleset rg-type :name "rg-type-RTuple")
(rule ((= s (in:ty k))) ((delete (in:ty k))) :ruleset rg-clean :name "rg-clean-ty")
"""


def parse_egglog(eg, text: str, what: str = "egglog text") -> list:
    """Parse egglog text with a bindings e-graph (an EgglogError on a syntax error)."""
    try:
        return eg.parse_program(text)
    except BaseException as exc:  # egglog panics are BaseException subclasses
        if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
            raise
        raise EgglogError(f"{what} does not parse: {str(exc).strip()}", str(exc)) from None


def _load_rules(ctor: str) -> str:
    fields = constructor_fields(ctor)
    names = [f"a{i}" for i in range(len(fields))]
    cols = " ".join(["i64"] + ["i64" if s in (EXPR, LIST) else s for s in fields])
    wrapped = [f"(Ph {n})" if s == EXPR else f"(PhL {n})" if s == LIST else n for n, s in zip(names, fields)]
    atom = f"(in:{ctor} k {' '.join(names)})"
    term = f"({ctor}{''.join(' ' + w for w in wrapped)})"
    if ctor in ("RCons", "RNil"):
        action = f"(union (PhL k) {term})"
    else:
        action = f"(union (Ph k) {term}) (set (nid k) (Ph k))"
    return (f"(relation in:{ctor} ({cols}))\n"
            f"(rule ({atom}) ({action}) :ruleset rg-load :name \"rg-load-{ctor}\")\n"
            f"(rule ({atom}) ((delete {atom})) :ruleset rg-clean :name \"rg-clean-{ctor}\")")


_FILE_ROWS = 32  # fewer rows than this go in as commands: a file costs more than a few commands
_FUNCTION_TABLES = ("in:ty", "ty:rank", "ty:dtype", "ty:dim", "tyof:")  # the last column is the output


def signature_fields(ctor: str) -> tuple[str, ...]:
    """The sorts of a constructor's signature row: a type text per child, then its literals."""
    return tuple("String" if s in (EXPR, LIST) else s for s in constructor_fields(ctor))


def _signature_query(ctor: str) -> tuple[tuple, list[str], list[str], str]:
    """For a node ``(ctor a0 a1 ...)``: its fields, the facts reading its children's type texts
    (``t<i>``), the signature's variables (type texts, then literal fields) and the node's args."""
    fields = constructor_fields(ctor)
    names = [f"a{i}" for i in range(len(fields))]
    facts, sig = [], []
    for i, (n, s) in enumerate(zip(names, fields)):
        if s in (EXPR, LIST):
            facts.append(f"(= t{i} ({'ty' if s == EXPR else 'lty'} {n}))")
            sig.append(f"t{i}")
        else:
            sig.append(n)
    return fields, facts, sig, "".join(" " + n for n in names)


def _typing_rule(ctor: str, ruleset: str, name: str) -> str:
    """The rule that types the nodes of ``ctor`` whose signature is known (see ``_typing_rules``)."""
    if ctor == "RNil":
        return f'(rule ((= l (RNil))) ((set (lty l) "()")) :ruleset {ruleset} :name "{name}")'
    if ctor == "RTuple":
        return f'(rule ((= e (RTuple l)) (= u (lty l))) ((set (ty e) u)) :ruleset {ruleset} :name "{name}")'
    _, facts, sig, node_args = _signature_query(ctor)
    query = " ".join([f"(= e ({ctor}{node_args}))", *facts, f"(= r (tyof:{ctor} {' '.join(sig)}))"])
    out = "lty" if ctor == "RCons" else "ty"
    return (f"(rule ({query}) ((set ({out} e) r) (typed:{ctor}{node_args})) :ruleset {ruleset} "
            f":name \"{name}\")")


def _typing_rules(ctor: str) -> str:
    """The typing rules of a constructor.

    ``tyof:<ctor>`` (filled by Python, once per signature) gives the type of a signature: the
    children's type texts and the node's literal fields. The typing rule sets the type of every
    node whose signature is known and marks the node in ``typed:<ctor>``; comparing the sizes
    of ``<ctor>`` and ``typed:<ctor>`` tells which constructors have nodes of unknown signature,
    and only for those does the signature rule (``sig:<ctor>``, a second join per node) run.
    """
    fields, facts, sig, node_args = _signature_query(ctor)
    cols = " ".join(signature_fields(ctor))
    query = " ".join([f"(= e ({ctor}{node_args}))", *facts])
    args = " ".join(sig)
    return (f"(relation sig:{ctor} ({cols}))\n"
            f"(function tyof:{ctor} ({cols}) String :no-merge)\n"
            f"(relation typed:{ctor} ({' '.join(fields)}))\n"
            f"(ruleset rg-sig-{ctor})\n"
            f"(rule ({query}) ((sig:{ctor} {args})) :ruleset rg-sig-{ctor} :name \"rg-sig-{ctor}\")\n"
            f"{_typing_rule(ctor, 'rg-type', f'rg-type-{ctor}')}\n"
            f"(rule ((sig:{ctor} {args})) ((delete (sig:{ctor} {args}))) :ruleset rg-sig-clean "
            f":name \"rg-sig-clean-{ctor}\")")


def _tsv_safe(value) -> bool:
    return not isinstance(value, str) or (
        value == value.strip() and "\t" not in value and "\n" not in value and "\r" not in value)


def _rows(out) -> list[tuple]:
    """The rows of a print-function output over primitives, as tuples of str and int."""
    get = out.termdag.get
    return [tuple(get(a).value.value for a in get(term).args) for term, _ in out.terms]


class Backend:
    """One live egglog e-graph with the Relay schema and the bulk-loading machinery."""

    def __init__(self) -> None:
        from egglog import bindings

        self.b = bindings
        self.eg = bindings.EGraph()
        self.span = bindings.PanicSpan()
        self._declared: set[str] = set()
        self._sizes: dict[str, int] | None = None
        self._i64: dict = {}
        self._str: dict = {}
        self._files = 0
        self.tmpdir = tempfile.mkdtemp(prefix="relaygraph-egraph-")
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.tmpdir, True)
        self.run_text(schema_program() + MACHINERY)
        self._typed: list[str] = []  # constructors whose typing rules are declared
        b = bindings
        # The facts rules have copies in rg-type: one saturation types classes and sets their facts.
        self._types_schedule = [
            b.RunSchedule(b.Saturate(self.span, b.Run(self.span, b.RunConfig("rg-type", None)))),
        ]
        self._sig_clean = [b.RunSchedule(b.Run(self.span, b.RunConfig("rg-sig-clean", None)))]
        self._flush_schedule = [
            b.RunSchedule(b.Saturate(self.span, b.Run(self.span, b.RunConfig("rg-load", None)))),
            b.RunSchedule(b.Saturate(self.span, b.Run(self.span, b.RunConfig("rg-facts", None)))),
            b.RunSchedule(b.Run(self.span, b.RunConfig("rg-clean", None))),
        ]

    # -- running commands -----------------------------------------------------------------------
    def run(self, *commands, what: str = "egglog command") -> list:
        """Run bindings commands; egglog errors and panics become EgglogError."""
        self._sizes = None
        try:
            return self.eg.run_program(*commands)
        except BaseException as exc:  # egglog panics are BaseException subclasses
            if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
                raise
            detail = str(exc)
            raise EgglogError(f"{what} failed: {detail.splitlines()[0] if detail else type(exc).__name__}",
                              detail) from None

    def parse(self, text: str, what: str = "egglog text") -> list:
        """Parse egglog text into bindings commands (an EgglogError on a syntax error)."""
        return parse_egglog(self.eg, text, what)

    def run_text(self, text: str, what: str = "egglog text") -> list:
        """Parse and run egglog text one line-group at a time (parsing one big string is quadratic)."""
        out: list = []
        for cmd in self.parse(text, what):
            out.extend(self.run(cmd, what=what))
        return out

    def run_fixed(self, name: str) -> None:
        """Run one of the bridge's own schedules: ``types`` (typing rules, then facts) or
        ``sig-clean``."""
        schedule = self._types_schedule if name == "types" else self._sig_clean
        self.run(*schedule, what=f"typing new e-classes ({name})")

    def untyped_constructors(self) -> list[str]:
        """Constructors with nodes the typing rules have not typed (unknown signatures)."""
        sizes = self.sizes()
        return [c for c in self._typed if sizes.get(c, 0) != sizes.get(f"typed:{c}", 0)]

    def collect_signatures(self, ctors) -> dict[str, list[tuple]]:
        """Run the signature rules of ``ctors`` (see ``_typing_rules``), read the signatures they
        recorded and clear them, in one call; the rows by constructor (as tuples of str and int)."""
        b, span = self.b, self.span
        runs = [b.Run(span, b.RunConfig(f"rg-sig-{c}", None)) for c in ctors]
        reads = [b.PrintFunction(span, f"sig:{c}", None, None, b.DefaultPrintFunctionMode()) for c in ctors]
        outs = self.run(b.RunSchedule(b.Sequence(span, runs)), *reads, *self._sig_clean,
                        what="recording signatures")
        printed = [o for o in outs if isinstance(o, b.PrintFunctionOutput)]
        return {c: rows for c, out in zip(ctors, printed) if (rows := _rows(out))}

    def sizes(self) -> dict[str, int]:
        """Rows per table (egglog's print-size; kept until the next command)."""
        if self._sizes is None:
            (out,) = self.run(self.b.PrintSize(self.span, None), what="print-size")
            self._sizes = dict(out.sizes)
        return self._sizes

    # -- decoding values ------------------------------------------------------------------------
    def i64(self, value) -> int:
        """An egglog i64 value as int (cached: the same value is decoded once)."""
        hit = self._i64.get(value)
        if hit is None:
            hit = self._i64[value] = self.eg.value_to_i64(value)
        return hit

    def string(self, value) -> str:
        """An egglog String value as str (cached)."""
        hit = self._str.get(value)
        if hit is None:
            hit = self._str[value] = self.eg.value_to_string(value)
        return hit

    # -- bulk loading ---------------------------------------------------------------------------
    def declare(self, ctors) -> None:
        """Declare the loading and typing rules of constructors (each once; declaring all ~100 up
        front would cost a second per e-graph)."""
        for ctor in ctors:
            if ctor in self._declared or ctor == "union":
                continue
            text = _load_rules(ctor)
            if ctor not in ("RNil", "RTuple"):  # those two are typed by fixed rules (MACHINERY)
                text += "\n" + _typing_rules(ctor)
                self._typed.append(ctor)
            self.run_text(text, what=f"declaring the rules of {ctor}")
            self._declared.add(ctor)

    def _input(self, table: str, rows, commands: list) -> None:
        """Commands that add ``rows`` to ``table``: an input file for many rows, else (and for
        strings a file cannot hold) one command per row."""
        b, span = self.b, self.span
        safe = [r for r in rows if all(map(_tsv_safe, r))] if len(rows) >= _FILE_ROWS else []
        if safe:
            self._files += 1
            path = os.path.join(self.tmpdir, f"{self._files}.tsv")
            with open(path, "w", encoding="utf-8") as f:
                f.writelines("\t".join(map(str, r)) + "\n" for r in safe)
            commands.append(b.Input(span, table, path))
        if len(safe) == len(rows):
            return
        for r in rows:
            if safe and all(map(_tsv_safe, r)):
                continue
            lits = [b.Lit(span, b.String(v) if isinstance(v, str) else b.Int(v)) for v in r]
            if table.startswith(_FUNCTION_TABLES):
                action = b.Set(span, table, lits[:-1], lits[-1])
            else:
                action = b.Expr_(span, b.Call(span, table, lits))
            commands.append(b.ActionCommand(action))

    def flush(self, batch: Batch, types: TypeTable) -> None:
        """Add a batch's nodes, unions and types to the e-graph."""
        if not batch and not batch.new_types and not batch.sigs:
            return
        commands: list = []
        self.declare(batch.rows)
        for ctor, rows in batch.rows.items():
            self._input(f"in:{ctor}", rows, commands)
        for ctor, rows in batch.sigs.items():
            self._input(f"tyof:{ctor}", rows, commands)
        ranks, dtypes, dims = [], [], []
        for text, _ in batch.new_types:
            facts = types.facts(types.by_text[text])
            if facts is not None:
                ranks.append((text, facts[0]))
                dtypes.append((text, facts[1]))
                dims.extend((text, i, d) for i, d in enumerate(facts[2]))
        for table, rows in (("ty:rank", ranks), ("ty:dtype", dtypes), ("ty:dim", dims),
                            ("in:ty", batch.types)):
            if rows:
                self._input(table, rows, commands)
        self.run(*commands, *self._flush_schedule, what="loading nodes into the e-graph")
