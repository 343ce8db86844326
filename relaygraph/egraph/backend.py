"""The egglog side of the bridge: one e-graph, loaded in bulk from batches, with errors made clear.

Loading works without one command per node. A batch's rows are written as tab-separated files
and read by egglog's ``input`` command into relations ``in:<constructor>`` (handle, then the
node's fields with children as handles). One rule per constructor then builds every node at
once over placeholders ``(Ph k)`` standing for handle ``k`` (so no node waits for its children),
sets ``(nid k)``, and a link rule unions each placeholder with the class its handle names;
the placeholders and input rows are deleted afterwards. Types arrive the same way
(``in:ty``, handle -> type text, becomes ``(union (Ty e) (T text))``; ``in:sig:<ctor>``, a
signature Python has typed, becomes ``(union (Sig:<ctor> ...) (T text))``), and the facts rules
read (``rank``, ``dtype``, ``dim`` of a class) come from per-type tables (``ty:rank``,
``ty:dtype``, ``ty:dim``) through the rules of ``rg-class-facts``. Building and running the
``input`` commands is linear in the rows and far cheaper than a command per node. Small
tables, and strings that a tab-separated file cannot carry (tabs, newlines, surrounding
spaces), go in as one command per row instead.

The classes rules create are typed inside egglog too, one action per new node
(``_typing_rules``; the Python side is ``relaygraph.egraph.signatures``).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import tempfile
import threading
import weakref

from ..errors import RelayError
from .batches import Batch
from .encoding import EXPR, LIST, POSITIVE, constructor_fields, schema_program
from .typer import TypeTable

__all__ = ["EgglogError", "Backend", "constructor_fields", "parse_egglog", "MACHINERY", "typing_ruleset",
           "combined_name", "scratch_egraph"]

# egglog e-graphs are bound to the thread that made them (using one from another thread panics
# with "EGraph is unsendable"), so what is cached for reuse is cached per thread.
_PER_THREAD = threading.local()


# An egglog e-graph can only be freed by the thread that made it (elsewhere egglog refuses,
# warns and leaks it). One whose Backend dies in another thread waits here, by its thread, and
# is freed when that thread next uses egglog or ends.
_ORPHANS: dict[threading.Thread, list] = {}
_ORPHANS_LOCK = threading.Lock()


def _free_orphans() -> None:
    if _ORPHANS:
        me = threading.current_thread()
        with _ORPHANS_LOCK:
            mine = _ORPHANS.pop(me, None)
            for thread in [t for t in _ORPHANS if not t.is_alive()]:  # ended before freeing them
                _keep_for_good(_ORPHANS.pop(thread))
        del mine


def _keep_for_good(obj) -> None:
    # Nobody may free it any more: keep it instead of letting egglog complain when it is freed.
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


class _ThreadEnd:
    """Kept in a thread's local storage: when the thread ends, frees the e-graphs left for it."""

    __slots__ = ("thread",)

    def __init__(self) -> None:
        self.thread = threading.current_thread()

    def __del__(self) -> None:
        with _ORPHANS_LOCK:
            mine = _ORPHANS.pop(self.thread, None)
        del mine


def _orphan(eg, owner: threading.Thread) -> None:
    with _ORPHANS_LOCK:
        if owner.is_alive():
            _ORPHANS.setdefault(owner, []).append(eg)
            return
    _keep_for_good(eg)


def scratch_egraph():
    """This thread's empty e-graph, for parsing egglog text without touching a real one."""
    eg = getattr(_PER_THREAD, "scratch", None)
    if eg is None:
        from egglog import bindings

        eg = _PER_THREAD.scratch = bindings.EGraph()
    return eg


def typing_ruleset(ctor: str) -> str:
    """The ruleset holding the typing rule of a constructor (see ``_typing_rules``)."""
    return f"rg-type-{ctor}"


def combined_name(prefix: str, members) -> str:
    """The name of the ruleset running ``members`` together: the same members, the same name."""
    digest = hashlib.blake2b(" ".join(sorted(members)).encode(), digest_size=6).hexdigest()
    return f"{prefix}-{digest}"


class EgglogError(RelayError):
    """egglog refused a command or failed while running one (its message is kept in ``detail``)."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail

    @property
    def is_type_merge(self) -> bool:
        """True when a union would have merged classes of different types."""
        return "Illegal merge attempted for function" in self.detail and any(
            f"function {name}" in self.detail for name in ("tytext", "rank", "dtype", "dim"))


MACHINERY = """
(constructor Ph (i64) RExpr :unextractable)
(constructor PhL (i64) RList :unextractable)
(relation in:union (i64 i64))
(function in:ty (i64) String :no-merge)
(function ty:rank (String) i64 :no-merge)
(function ty:dtype (String) String :no-merge)
(function ty:dim (String i64) i64 :no-merge)
(ruleset rg-load)
(ruleset rg-sig-clean)
(ruleset rg-facts)
(ruleset rg-clean)
(rule ((= p (Ph a)) (= e (nid a))) ((union p e)) :ruleset rg-load :name "rg-link")
(rule ((in:union a b) (= x (nid a)) (= y (nid b))) ((union x y)) :ruleset rg-load :name "rg-union")
(rule ((= s (in:ty k)) (= e (nid k))) ((union (Ty e) (T s))) :ruleset rg-facts :name "rg-ty")
(rule ((= x (T s))) ((set (tytext x) s)) :ruleset rg-facts :name "rg-tytext")
(ruleset rg-leaves)
(rule ((= e (RVar k))) ((leaf-class e)) :ruleset rg-leaves :name "rg-leaf-var")
(rule ((= e (RConst k))) ((leaf-class e)) :ruleset rg-leaves :name "rg-leaf-const")
(ruleset rg-class-facts)
(rule ((= t (Ty e)) (= s (tytext t)) (= r (ty:rank s))) ((set (rank e) r)) :ruleset rg-class-facts
      :name "rg-rank")
(rule ((= t (Ty e)) (= s (tytext t)) (= d (ty:dtype s))) ((set (dtype e) d)) :ruleset rg-class-facts
      :name "rg-dtype")
(rule ((= t (Ty e)) (= s (tytext t)) (= v (ty:dim s i))) ((set (dim e i) v)) :ruleset rg-class-facts
      :name "rg-dim")
(rule ((= p (Ph k))) ((delete (Ph k))) :ruleset rg-clean :name "rg-clean-ph")
(rule ((= p (PhL k))) ((delete (PhL k))) :ruleset rg-clean :name "rg-clean-phl")
(rule ((in:union a b)) ((delete (in:union a b))) :ruleset rg-clean :name "rg-clean-union")
(rule ((= s (in:ty k))) ((delete (in:ty k))) :ruleset rg-clean :name "rg-clean-ty")
(set (tytext (T "()")) "()")
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
    wrapped = [f"(Ph {n})" if s == EXPR else f"(PhL {n})" if s == LIST else n
               for n, s in zip(names, fields, strict=True)]
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
_FUNCTION_TABLES = ("in:ty", "ty:rank", "ty:dtype", "ty:dim")  # the last column is the output


def signature_fields(ctor: str) -> tuple[str, ...]:
    """The sorts of a constructor's signature row: a type text per child, then its literals."""
    return tuple("String" if s in (EXPR, LIST) else s for s in constructor_fields(ctor))


def _typing_rules(ctor: str) -> str:
    """The typing machinery of a constructor.

    ``(Sig:<ctor> ...)`` is the type of a node from its children's types and its literal
    fields. The typing rule (ruleset ``rg-type-<ctor>``) unions every node's ``(Ty e)`` with its
    ``Sig``: one action per node and no lookup of the children's types, so it never waits for
    them and one run types everything a rule made. Python types each new signature once and
    unions it with its ``T`` (``in:sig:<ctor>`` rows, loaded in ``rg-facts``); a ``Sig:<ctor>``
    table with more rows than Python has typed signatures holds new ones, which the collection
    rule (ruleset ``rg-sig-<ctor>``) writes as type texts into ``sig:<ctor>`` once its children
    are typed. RNil and RTuple need no signature: ``()`` and the type of the tuple's list.
    """
    rs = typing_ruleset(ctor)
    if ctor == "RNil":
        return f'(ruleset {rs})\n(rule ((= l (RNil))) ((union (LTy l) (T "()"))) :ruleset {rs} :name "{rs}")'
    if ctor == "RTuple":
        return (f'(ruleset {rs})\n(rule ((= e (RTuple l))) ((union (Ty e) (LTy l))) :ruleset {rs} '
                f':name "{rs}")')
    fields = constructor_fields(ctor)
    names = [f"a{i}" for i in range(len(fields))]
    node_args = "".join(" " + n for n in names)
    ty_args, texts, facts, t_args = [], [], [], []
    for i, (n, sort) in enumerate(zip(names, fields, strict=True)):
        if sort in (EXPR, LIST):
            ty_args.append(f"({'Ty' if sort == EXPR else 'LTy'} {n})")
            facts.append(f"(= x{i} (tytext {n}))")
            texts.append(f"x{i}")
            t_args.append(f"(T x{i})")
        else:
            ty_args.append(n)
            texts.append(n)
            t_args.append(n)
    sorts = " ".join("RType" if s in (EXPR, LIST) else s for s in fields)
    cols = " ".join(signature_fields(ctor))
    out_ty = "LTy" if ctor == "RCons" else "Ty"
    sig_of_node = f"(Sig:{ctor}{''.join(' ' + a for a in ty_args)})"
    row = " ".join(texts)
    lhs = f"(Sig:{ctor}{node_args})"
    return "\n".join([
        f"(constructor Sig:{ctor} ({sorts}) RType)",
        f"(relation in:sig:{ctor} ({cols} String))",
        f"(relation sig:{ctor} ({cols}))",
        f"(ruleset {rs})",
        f"(ruleset rg-sig-{ctor})",
        f"(rule ((= e ({ctor}{node_args}))) ((union ({out_ty} e) {sig_of_node})) :ruleset {rs} "
        f":name \"{rs}\")",
        f"(rule ((in:sig:{ctor} {row} r)) ((union (Sig:{ctor}{''.join(' ' + a for a in t_args)}) (T r))) "
        f":ruleset rg-facts :name \"rg-sig-load-{ctor}\")",
        f"(rule ((in:sig:{ctor} {row} r)) ((delete (in:sig:{ctor} {row} r))) :ruleset rg-clean "
        f":name \"rg-sig-unload-{ctor}\")",
        f"(rule ((= s {lhs}) {' '.join(facts)}) ((sig:{ctor} {row})) :ruleset rg-sig-{ctor} "
        f":name \"rg-sig-{ctor}\")",
        f"(rule ((sig:{ctor} {row})) ((delete (sig:{ctor} {row}))) :ruleset rg-sig-clean "
        f":name \"rg-sig-clean-{ctor}\")",
    ])


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

        _free_orphans()
        if getattr(_PER_THREAD, "end", None) is None:
            _PER_THREAD.end = _ThreadEnd()
        self.b = bindings
        self._eg = bindings.EGraph()
        self._owner = threading.current_thread()
        self._thread, self._thread_name = self._owner.ident, self._owner.name
        self.span = bindings.PanicSpan()
        self._declared: set[str] = set()
        self._sizes: dict[str, int] | None = None
        self._i64: dict = {}
        self._str: dict = {}
        self._files = 0
        self.tmpdir = tempfile.mkdtemp(prefix="relaygraph-egraph-")
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.tmpdir, True)
        self.run_text(schema_program() + MACHINERY)
        self._typed: list[str] = []  # constructors with a signature (all declared ones but RNil, RTuple)
        self._typing: list[str] = []  # every declared constructor's typing ruleset
        self._combined: set[str] = set()  # combined rulesets declared
        b = bindings
        self._sig_clean = [b.RunSchedule(b.Run(self.span, b.RunConfig("rg-sig-clean", None)))]
        self._flush_schedule = [
            b.RunSchedule(b.Saturate(self.span, b.Run(self.span, b.RunConfig("rg-load", None)))),
            b.RunSchedule(b.Saturate(self.span, b.Run(self.span, b.RunConfig("rg-facts", None)))),
            b.RunSchedule(b.Run(self.span, b.RunConfig("rg-leaves", None))),
            b.RunSchedule(b.Run(self.span, b.RunConfig("rg-class-facts", None))),
            b.RunSchedule(b.Run(self.span, b.RunConfig("rg-clean", None))),
        ]

    def __del__(self) -> None:
        eg = self.__dict__.pop("_eg", None)
        if eg is not None and not self._in_owner():
            _orphan(eg, self._owner)

    def _in_owner(self) -> bool:
        # A thread's ident is reused once it has ended: the same ident in a live owner is the owner.
        return threading.get_ident() == self._thread and self._owner.is_alive()

    @property
    def eg(self):
        """The egglog e-graph (only from the thread that built it: egglog's rule)."""
        self.check_thread()
        return self._eg

    def check_thread(self) -> None:
        """Refuse, plainly, a use from a thread other than the one that built the e-graph."""
        if threading.get_ident() != self._thread:  # (hot: the ident alone; __del__ checks fully)
            raise RelayError(
                f"this e-graph was built in thread {self._thread_name!r} and egglog e-graphs cannot be "
                f"used from another thread (this is {threading.current_thread().name!r}); build the "
                "e-graph in the thread that uses it, or give each thread its own (saturate and "
                "optimize do when given a program)")

    # -- running commands -----------------------------------------------------------------------
    def run(self, *commands, what: str = "egglog command") -> list:
        """Run bindings commands; egglog errors and panics become EgglogError."""
        self.check_thread()  # (outside the try: using it from another thread is not an egglog error)
        _free_orphans()
        self._sizes = None
        try:
            outputs = self._eg.run_program(*commands)
        except BaseException as exc:  # egglog panics are BaseException subclasses
            if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
                raise
            detail = str(exc)
            raise EgglogError(f"{what} failed: {detail.splitlines()[0] if detail else type(exc).__name__}",
                              detail) from None
        if outputs and isinstance(outputs[-1], self.b.PrintAllFunctionsSize):
            # commands that end with a print-size leave the sizes it printed for ``sizes``: a
            # saturation iteration asks for them in its own call (one egglog call fewer)
            self._sizes = dict(outputs[-1].sizes)
        return outputs

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
        """Run one of the bridge's own schedules: ``types`` (every declared constructor's typing
        rule, once: they do not wait for each other), ``sigs`` (every signature collection rule,
        its rows then cleared: run after loading, so later collections see new rows only) or
        ``class-facts`` (the facts conditions read, for the classes typed since they last ran)."""
        if name == "class-facts":
            self.run(self.b.RunSchedule(self.b.Run(self.span, self.b.RunConfig("rg-class-facts", None))),
                     what="setting the facts of new e-classes")
            return
        members = self._typing if name == "types" else [f"rg-sig-{c}" for c in self._typed]
        if not members:
            return
        b = self.b
        combined = self.combined(f"rg-{name}-all", members)
        schedule = [b.RunSchedule(b.Run(self.span, b.RunConfig(combined, None)))]
        if name == "sigs":
            schedule += self._sig_clean
        self.run(*schedule, what=f"typing new e-classes ({name})")

    def combined(self, prefix: str, members) -> str:
        """A ruleset running ``members`` together (declared the first time; see ``combined_name``)."""
        name = combined_name(prefix, members)
        if name not in self._combined:
            self.run_text(f"(unstable-combined-ruleset {name} {' '.join(sorted(members))})",
                          what="combining rulesets")
            self._combined.add(name)
        return name

    def untyped_constructors(self, known: dict[str, int]) -> list[str]:
        """Constructors whose ``Sig`` table holds signatures Python has not typed (``known``: how
        many it has typed per constructor); each typed one is exactly one row of the table."""
        sizes = self.sizes()
        return [c for c in self._typed if sizes.get(f"Sig:{c}", 0) > known.get(c, 0)]

    def collect_signatures(self, ctors) -> dict[str, list[tuple]]:
        """Run the signature rules of ``ctors`` (see ``_typing_rules``), read the signatures they
        recorded and clear them, in one call; the rows by constructor (as tuples of str and int)."""
        b, span = self.b, self.span
        runs = [b.Run(span, b.RunConfig(f"rg-sig-{c}", None)) for c in ctors]
        reads = [b.PrintFunction(span, f"sig:{c}", None, None, b.DefaultPrintFunctionMode()) for c in ctors]
        outs = self.run(b.RunSchedule(b.Sequence(span, runs)), *reads, *self._sig_clean,
                        what="recording signatures")
        printed = [o for o in outs if isinstance(o, b.PrintFunctionOutput)]
        return {c: rows for c, out in zip(ctors, printed, strict=True) if (rows := _rows(out))}

    def sizes(self) -> dict[str, int]:
        """Rows per table (egglog's print-size; kept until the next command)."""
        if self._sizes is None:
            self.run(self.b.PrintSize(self.span, None), what="print-size")  # (run keeps them)
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
            text = _load_rules(ctor) + "\n" + _typing_rules(ctor)
            self.run_text(text, what=f"declaring the rules of {ctor}")
            if ctor not in ("RNil", "RTuple"):
                self._typed.append(ctor)
            self._typing.append(typing_ruleset(ctor))
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
        self.declare([*batch.rows, *batch.sigs])
        for ctor, rows in batch.rows.items():
            self._input(f"in:{ctor}", rows, commands)
        for ctor, rows in batch.sigs.items():
            self._input(f"in:sig:{ctor}", rows, commands)
        ranks, dtypes, dims = [], [], []
        for text, _ in batch.new_types:
            facts = types.facts(types.by_text[text])
            if facts is not None:
                ranks.append((text, facts[0]))
                dtypes.append((text, facts[1]))
                dims.extend((text, i, d) for i, d in enumerate(facts[2]))
        for table, rows in (("ty:rank", ranks), ("ty:dtype", dtypes), ("ty:dim", dims),
                            ("in:ty", batch.types), (POSITIVE, [(k,) for k in batch.positive])):
            if rows:
                self._input(table, rows, commands)
        self.run(*commands, *self._flush_schedule, what="loading nodes into the e-graph")
