"""A Relay function in an egglog e-graph, and terms read back from it.

    eg = RelayEGraph(mod)                 # typed, loaded in bulk (linear in the program)
    eg.extract()                          # the program back (tree extraction, node count)
    h = eg.add_expr(expr, {x: handle})    # the bridge rules use: add, union, types
    eg.union(h, other)

Every e-class has one type. Python keeps what it needs to know about classes in a GraphState
(each handle's type) and a journal of everything that changed the e-graph (batches of rows and
egglog text), so the same e-graph can be rebuilt elsewhere: in a worker process, or at an
earlier iteration to find which rule broke something. The live egglog e-graph is made on first
use from the journal.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..errors import RelayError, RuleError
from ..ir.expr import Expr, Function, Var
from ..ir.module import IRModule
from ..ir.traversal import free_vars
from ..ir.types import Type
from .backend import Backend, EgglogError, combined_name, parse_egglog, scratch_egraph
from .batches import Batch, BatchBuilder, GraphState, RelayTables
from .readback import gym_document, read_back
from .signatures import HandleMaker, Snapshot, TypingProblem, expr_constructors, resolve_signatures

__all__ = ["RelayEGraph", "retarget"]


class RelayEGraph:
    """A Relay program in an egglog e-graph: typed classes, handles, extraction and read-back."""

    def __init__(self, program: IRModule | Function | Expr | None = None, *, entry: str = "main") -> None:
        self.state = GraphState()
        self.tables = RelayTables()
        self.builder = BatchBuilder(self.state, self.tables)
        self.journal: list[tuple] = []
        self.declared: set[str] = set()  # egglog declarations already made (rules install once)
        self.installed: dict[tuple, tuple] = {}  # rules installed: (name, text) -> (ruleset, report names)
        self.function: Function | None = None
        self.root: int | None = None
        self._backend: Backend | None = None
        self._document: dict | None = None  # a worker's final serialization, until the next change
        self._sizes: tuple[int, int] | None = None  # and its sizes
        self._final = None  # a worker still holding this e-graph's final state (worker.FinalState)
        if program is not None:
            self.load(program, entry=entry)

    # -- loading ----------------------------------------------------------------------------------
    def load(self, program: IRModule | Function | Expr, *, entry: str = "main") -> int:
        """Put a program in (a module's ``entry`` function, a function, or an expression over its
        free variables); returns the handle of its body's class."""
        from ..ty import infer_type

        if isinstance(program, IRModule):
            fn = program[entry]
            types = program.checked_types
            if types is None or fn not in types:  # a module InferType has not typed (as it is)
                types = infer_type(program).checked_types
        elif isinstance(program, (Function, Expr)):
            fn = program if isinstance(program, Function) else Function(free_vars(program), program)
            types = infer_type(IRModule.from_expr(fn)).checked_types
        else:
            raise RelayError(f"RelayEGraph.load: expected an IRModule, Function or Expr, got "
                             f"{type(program).__name__}")
        self.function = fn
        self.builder.checked = types
        self.program_handles: dict = {}  # each node of the loaded body -> its handle
        self.root = self.builder.add_expr(fn.body, checked=True, record=self.program_handles)
        self.flush()
        # The typing and signature rules run once over the program now: every signature is
        # known (the batch carried them), so later runs only see what rules add.
        self._record(("run", "types"))
        self._record(("run", "sigs"))
        return self.root

    @classmethod
    def from_journal(cls, journal: list[tuple], root: int | None = None) -> RelayEGraph:
        """An e-graph rebuilt from another one's journal (no Relay objects: it cannot read back)."""
        graph = cls()
        graph.root = root
        for entry in journal:
            if entry[0] == "batch":
                graph.state.apply(entry[1])
            graph.journal.append(entry)
        graph.builder = BatchBuilder(graph.state, None)
        return graph

    def replay(self, upto: int) -> RelayEGraph:
        """This e-graph as it was after the first ``upto`` journal entries (same Relay tables)."""
        graph = RelayEGraph.from_journal(self.journal[:upto], self.root)
        graph.tables, graph.function = self.tables, self.function
        graph.builder = BatchBuilder(graph.state, graph.tables)
        graph.builder.checked = self.builder.checked
        return graph

    def __reduce__(self):
        raise TypeError("a RelayEGraph holds a live egglog e-graph and cannot be pickled; send its "
                        "journal (RelayEGraph.from_journal) instead")

    # -- the live e-graph ---------------------------------------------------------------------------
    def materialize(self) -> Backend:
        """Make the live e-graph now (it is otherwise made on first use); returns it."""
        return self.backend

    @property
    def backend(self) -> Backend:
        """The live egglog e-graph (made from the journal on first use)."""
        if self._backend is None:
            backend = Backend()
            for entry in self.journal:
                _execute(backend, self.state, entry)
            self._backend = backend
        return self._backend

    def _record(self, entry: tuple):
        self.journal.append(entry)
        self._forget()
        if self._backend is not None:
            return _execute(self._backend, self.state, entry)
        return None

    def flush(self) -> None:
        """Send pending nodes, unions and types to the e-graph."""
        batch = self.builder.take()
        if batch:
            self._record(("batch", batch))

    def declare_constructors(self, ctors) -> None:
        """Make sure the loading and typing rules of these constructors exist (rules may build
        nodes of constructors the program does not use)."""
        self.flush()
        self._record(("declare", tuple(sorted(ctors))))

    def apply_batch(self, batch: Batch) -> None:
        """Add a batch made by another builder (a Python rewrite run in another process)."""
        self.flush()
        self.state.apply(batch)
        self._record(("batch", batch))

    def run_egglog(self, text: str, ruleset: str | None = None, name: str | None = None) -> list:
        """Run egglog text now (declarations, rules, schedules); returns egglog's outputs.

        ``ruleset`` moves its rule commands into that ruleset; ``name`` names unnamed ones.
        """
        self.flush()
        self.journal.append(("egglog", text, ruleset, name))
        self._forget()
        return _execute(self.backend, self.state, self.journal[-1])

    def combined_ruleset(self, prefix: str, members) -> str:
        """A ruleset running ``members`` together (journaled; declared once per live e-graph, under
        a name that depends on the members only, so a worker and its parent agree on it)."""
        members = tuple(sorted(members))
        self._record(("combine", prefix, members))
        return combined_name(prefix, members)

    def record_egglog(self, text: str, ruleset: str | None = None, name: str | None = None) -> set[str]:
        """Add egglog text to the e-graph (run now if the e-graph is live, else on first use);
        returns the names egglog will report its rules' matches under."""
        self.flush()
        entry = ("egglog", text, ruleset, name)
        commands = parse_egglog(scratch_egraph(), text)
        if self._backend is not None:
            _execute(self._backend, self.state, entry)
        self.journal.append(entry)
        self._forget()
        return _report_names(commands, name)

    def _forget(self) -> None:
        """The e-graph changed: a worker's serialization and sizes no longer describe it."""
        self._document = self._sizes = None
        if self._final is not None:
            final, self._final = self._final, None
            final.drop()

    def adopt(self, entries: list[tuple], document: dict | None = None,
              sizes: tuple[int, int] | None = None, final=None) -> None:
        """Follow changes made to a copy of this e-graph elsewhere (a worker's journal entries,
        and its serialization and sizes at their end, so neither needs the e-graph rebuilt;
        ``final``: the worker that holds that state and serializes it when asked)."""
        self.flush()
        self._forget()
        for entry in entries:
            if entry[0] == "batch":
                self.state.apply(entry[1])
            self.journal.append(entry)
        self._backend = None  # rebuilt from the journal if it is needed again
        self._document = document
        self._sizes = sizes
        self._final = final

    # -- what the rules' Python side uses -----------------------------------------------------------
    def type_of(self, handle: int) -> Type:
        """The type of the class with this handle."""
        return self.builder.type_of(handle)

    def add_expr(self, expr: Expr, leaves: dict[Var, int] | None = None) -> int:
        """Add a Relay expression whose leaf Vars stand for existing classes; returns its handle.

        New nodes are typed through the op relations; a RuleError-worthy mismatch raises
        NodeTypeError (the caller names the rule).
        """
        return self.builder.add_expr(expr, leaves)

    def add_constants(self, constants) -> None:
        """Make constants known without a node: the constants rules write on their right side,
        whose nodes the rules' actions make (typed, and read back, as a program's constants)."""
        for c in constants:
            self.builder.constant(c)

    def union(self, h1: int, h2: int) -> None:
        """Make two classes one; refused (UnionTypeError) when their types differ."""
        self.builder.union(h1, h2)

    def handle(self, value) -> int:
        """The handle of an egglog class value (from a frozen e-graph of this one)."""
        snap = self.snapshot()
        try:
            return snap.handle[value]
        except KeyError:
            raise RelayError(f"{value!r} is not an e-class with a handle in this e-graph") from None

    def snapshot(self) -> Snapshot:
        """The e-graph frozen now (pending changes sent first)."""
        self.flush()
        return Snapshot(self.backend)

    def type_new_classes(self, typed: bool = False) -> tuple[int, list[TypingProblem]]:
        """Type every class rules created (see ``relaygraph.egraph.signatures``); returns (signatures typed,
        problems). A node whose type differs from its class's raises EgglogError (``is_type_merge``).

        ``typed``: the typing rules have just run (saturation's schedule ends with them);
        otherwise they run first, over every constructor.
        """
        total = 0
        if not typed:
            self.flush()
            self._record(("run", "types"))
        while True:
            self.flush()
            untyped = self.backend.untyped_constructors(self.state.signature_count)
            if not untyped:
                return total, []
            sigs = self._record(("signatures", tuple(untyped)))
            count, problems = resolve_signatures(sigs, self.builder) if sigs else (0, [])
            if problems:
                self.builder.take()  # the types found so far are dropped with the failed iteration
                return total, problems
            if not count:
                return total, [TypingProblem("RExpr", "some e-classes have no type and no node to type by")]
            total += count

    def set_class_facts(self) -> None:
        """Set the facts conditions read (rank, dtype, dims) on every class typed since they were
        last set (every batch sets them, with the types it resolves; saturation with rules that
        read none leaves them for later)."""
        self._record(("run", "class-facts"))

    def ensure_handles(self, snap: Snapshot, classes) -> dict:
        """Handles for classes of a snapshot (classes rules made get one); class -> handle."""
        handles = HandleMaker().ensure(snap, classes, self.builder)
        self.flush()
        return handles

    # -- sizes, serialization, extraction ---------------------------------------------------------
    def sizes(self) -> tuple[int, int]:
        """(e-nodes, e-classes) of the term language (classes counted by their types: call after
        ``type_new_classes``)."""
        self.flush()
        if self._sizes is not None and self._backend is None:
            return self._sizes
        sizes = self.backend.sizes()
        nodes = sum(sizes.get(c, 0) for c in _node_tables())
        return nodes, sizes.get("Ty", 0)

    def document(self) -> dict:
        """The e-graph as an extraction-gym document rooted at the program (see readback)."""
        if self._document is None and self._final is not None and not self.builder.batch:
            final, self._final = self._final, None
            self._document = final.fetch()  # None when the worker is gone: rebuilt here instead
        if self._document is None or self.builder.batch:
            self._document = gym_document(self.snapshot(), self.state, [self._root()])
        return self._document

    def extraction_graph(self, cost: str | Callable | None = None):
        """The e-graph for the extractors (``relaygraph.egraph.extract``), costed by ``cost``."""
        from .cost import COST_MODELS
        from .extract import apply_cost, from_json

        graph = from_json(self.document(), name="<relay e-graph>")
        if cost is None or cost == "node-count" or cost is COST_MODELS["node-count"]:
            return graph  # the document's costs are already 1 per node
        return apply_cost(graph, cost)

    def extract(self, extractor: str | Callable = "tree",
                cost: str | Callable | None = "node-count") -> Function:
        """The best program under ``cost`` by ``extractor`` (tree, greedy-dag[+ls], ilp or a function)."""
        from . import extract as ex

        graph = self.extraction_graph(cost)
        if isinstance(extractor, str):
            table = {"tree": ex.tree, "greedy-dag": ex.greedy_dag, "greedy_dag": ex.greedy_dag, "ilp": ex.ilp,
                     "greedy-dag+ls": lambda g: ex.greedy_dag(g, improve=True)}
            try:
                extractor = table[extractor]
            except KeyError:
                raise RelayError(f"unknown extractor {extractor!r}; known: tree, greedy-dag, greedy-dag+ls, "
                                 f"ilp") from None
        result = extractor(graph)
        return self.read_back(graph, result.choice)

    def read_back(self, graph, choice: dict[int, int], built: dict | None = None) -> Function:
        """The program an extraction choice stands for, as a Function like the one loaded
        (``built``, if given, receives each chosen class's expression)."""
        if self.function is None:
            raise RelayError("this e-graph was not loaded from a Relay function here; it cannot read back")
        fn = self.function
        body = read_back(graph, choice, self.tables, built=built)
        return Function(fn.params, body, fn.ret_type, fn.type_params, fn.attrs)

    def _root(self) -> int:
        if self.root is None:
            raise RelayError("no program has been loaded into this e-graph")
        return self.root


@functools.cache
def _node_tables() -> tuple[str, ...]:
    return (*expr_constructors(), "RCons", "RNil")


def _execute(backend: Backend, state: GraphState, entry: tuple):
    """Carry out one journal entry on a live e-graph."""
    if entry[0] == "batch":
        return backend.flush(entry[1], state.types)
    if entry[0] == "run":
        return backend.run_fixed(entry[1])
    if entry[0] == "declare":
        return backend.declare(entry[1])
    if entry[0] == "signatures":
        return backend.collect_signatures(entry[1])
    if entry[0] == "combine":
        return backend.combined(entry[1], entry[2])
    _, text, ruleset, name = entry
    try:
        commands = backend.parse(text)
        if ruleset is not None:
            commands = [retarget(backend.b, c, ruleset, name) for c in commands]
        return backend.run(*commands, what="egglog")
    except EgglogError as exc:
        if name is None or exc.is_type_merge:
            raise
        raise RuleError(f"rule {name}: egglog refused it: {' '.join(exc.detail.split()) or exc}") from None


def retarget(b, command, ruleset: str, name: str | None = None):
    """A rule, rewrite or birewrite command moved to another ruleset and named ``name`` if it had
    no name (other commands unchanged)."""
    if isinstance(command, (b.RewriteCommand, b.BiRewriteCommand)):
        rw = command.rewrite
        if name and not rw.name:
            rw = b.Rewrite(rw.span, rw.lhs, rw.rhs, rw.conditions, name)
        if isinstance(command, b.BiRewriteCommand):
            return b.BiRewriteCommand(ruleset, rw)
        return b.RewriteCommand(ruleset, rw, command.subsume)
    if isinstance(command, b.RuleCommand):
        r = command.rule
        return b.RuleCommand(b.Rule(r.span, r.head, r.body, r.name or name or "", ruleset))
    return command


def _report_names(commands, name: str | None) -> set[str]:
    """The names egglog's run reports use for the rules among ``commands``."""
    from egglog import bindings as b

    out: set[str] = set()
    for c in commands:
        if isinstance(c, b.RewriteCommand):
            out.add(c.rewrite.name or name or "")
        elif isinstance(c, b.BiRewriteCommand):
            base = c.rewrite.name or name or ""
            out |= {base + "=>", base + "<="}
        elif isinstance(c, b.RuleCommand):
            out.add(c.rule.name or name or "")
    out.discard("")
    return out
