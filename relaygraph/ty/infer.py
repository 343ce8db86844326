"""InferType: Relay's type inference (unification plus operator relations solved to a fixed point).

One iterative walk over each function gives every node a type, using holes where a type is not
known yet (unannotated parameters, let-bound recursive functions, mutually recursive globals).
Operator calls whose argument types are all known are checked on the spot through the op's
relation (the fast path of concrete models); the others become constraints that wait on their
holes (see ``solver.py``). Generic functions and ADT constructors are instantiated per call.
``if`` branches and ``match`` arms are unified, a complete ``match`` is checked for
exhaustiveness, and the result carries every node's type in its own ``TypeMap`` (``checked.py``).
Like TVM, the typed program gets the annotations inference found: unannotated variables and
functions without a return type are rebuilt with them.
"""

from __future__ import annotations

from ..errors import RelayError, RelayTypeError
from ..ir.adt import Constructor, Match, PatternConstructor, PatternTuple, PatternVar, PatternWildcard
from ..ir.expr import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Op,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from ..ir.module import IRModule
from ..ir.node import Node, paused_gc
from ..ir.traversal import ExprMutator, free_vars
from ..ir.types import FuncType, IncompleteType, RefType, TensorType, TupleType, Type, TypeCall, format_type
from ..ops import registry
from .checked import TypeMap, publish
from .exhaustive import missing_case
from .solver import Mismatch, Solver, has_holes, subst_type

__all__ = ["infer_type", "infer_type_expr", "describe"]

BOOL = TensorType((), "bool")


def describe(node: Node) -> str:
    """A short name for a node in error messages (``call of nn.dense``, ``%x``, ``if``)."""
    if isinstance(node, Call):
        op = node.op
        if isinstance(op, Op):
            return f"call of {op.name}"
        if isinstance(op, GlobalVar):
            return f"call of @{op.name_hint}"
        if isinstance(op, (Var, Constructor)):
            return f"call of {'%' if isinstance(op, Var) else ''}{op.name_hint}"
        return "call of a function"
    if isinstance(node, Var):
        return f"%{node.name_hint}"
    if isinstance(node, GlobalVar):
        return f"@{node.name_hint}"
    if isinstance(node, Let):
        return f"let %{node.var.name_hint}"
    if isinstance(node, TupleGetItem):
        return f"projection .{node.index}"
    names = {Function: "function", If: "if", Match: "match", Tuple: "tuple", Constant: "constant",
             RefCreate: "ref", RefRead: "ref_read", RefWrite: "ref_write"}
    return names.get(type(node), type(node).__name__)


class _OpConstraint:
    """An operator call whose relation waits for its argument types."""

    __slots__ = ("op", "attrs", "args", "out", "node", "done")

    def __init__(self, op, attrs, args, out, node) -> None:
        self.op, self.attrs, self.args, self.out, self.node = op, attrs, args, out, node
        self.done = False


class _ProjConstraint:
    """``t.N`` whose tuple type is not known yet."""

    __slots__ = ("tuple_t", "index", "out", "node", "done")

    def __init__(self, tuple_t, index, out, node) -> None:
        self.tuple_t, self.index, self.out, self.node = tuple_t, index, out, node
        self.done = False


class _Checker:
    """The state of one inference: the solver, node types and variable types."""

    def __init__(self, mod: IRModule) -> None:
        self.mod = mod
        self.solver = Solver()
        self.types: dict[Node, Type] = {}
        self.var_types: dict[Var, Type] = {}
        self.global_types: dict[GlobalVar, Type] = {}
        self.constraints: list = []
        self.unannotated: list[Var] = []
        self.untyped_functions = False
        self.top_functions: set = set()
        # closed nodes whose type is polymorphic (``Nil()``): one interned node may stand for
        # values of different types, so every use instantiates the node's type scheme afresh
        self.inst_holes: set = set()
        self.poly: dict = {}
        self.poly_uses: dict = {}  # poly node -> its type at each use (all are recorded)
        self.match_data: dict = {}
        self._opdefs: dict = {}
        self._handlers = {
            Var: self._var, GlobalVar: self._global_var, Constant: self._constant, Op: self._op,
            Constructor: self._constructor, Tuple: self._tuple, TupleGetItem: self._tuple_get,
            Let: self._let, Function: self._function, Call: self._call, If: self._if,
            Match: self._match, RefCreate: self._ref_create, RefRead: self._ref_read,
            RefWrite: self._ref_write,
        }

    # -- errors -------------------------------------------------------------------------------
    def error(self, node: Node, message: str) -> RelayTypeError:
        """A type error about ``node`` (its source position when it was parsed)."""
        return RelayTypeError(f"{describe(node)}: {message}", *self.mod.source_map.locate(node))

    def show(self, t: Type) -> str:
        return format_type(self.solver.resolve(t))

    def unify(self, node: Node, a: Type, b: Type, what: str) -> Type:
        """Unify or raise a type error naming the node, both types and what differs."""
        try:
            return self.solver.unify(a, b)
        except Mismatch as exc:
            raise self.error(node, f"{what}: {self.show(a)} vs {self.show(b)} ({exc})") from None

    # -- the walk -----------------------------------------------------------------------------
    def check(self, root: Expr) -> Type:
        """Type ``root`` and everything under it (iteratively, each shared node once)."""
        types, handlers, solver = self.types, self._handlers, self.solver
        stack = [(root, 0)]
        while stack:
            node, state = stack.pop()
            if state == 0 and node in types:
                continue
            handler = handlers.get(type(node))
            if handler is None:
                raise RelayError(f"cannot type-check a {type(node).__name__} as an expression")
            handler(node, state, stack)
            if solver.queue:
                self.drain()
            if self.inst_holes and node in types and type(types[node]) is not TensorType:
                self._maybe_poly(node)
        return self.use(root)

    def use(self, node: Node) -> Type:
        """The type of ``node`` at one use (a fresh instance for a polymorphic closed node)."""
        scheme = self.poly.get(node)
        if scheme is None:
            return self.solver.find(self.types[node])
        t, holes = scheme
        inst = subst_type(t, {h: self.solver.fresh() for h in holes}, holes=True)
        uses = self.poly_uses.get(node)
        if uses is None:
            self.poly_uses[node] = [inst]
        else:
            uses.append(inst)
        return inst

    def _maybe_poly(self, node: Node) -> None:
        if node in self.poly or isinstance(node, Var):
            return
        t = self.solver.resolve(self.types[node])
        holes = self.solver.holes(t)
        if not holes or any(h not in self.inst_holes for h in holes):
            return
        if free_vars(node):
            return
        self.poly[node] = (t, holes)

    def _bind_var(self, v: Var) -> Type:
        t = self.var_types.get(v)
        if t is None:
            t = v.type_annotation
            if t is None:
                t = self.solver.fresh()
                self.unannotated.append(v)
            self.var_types[v] = t
        self.types[v] = t
        return t

    def _var(self, node: Var, state: int, stack: list) -> None:
        t = self.var_types.get(node)
        if t is None:  # a free variable
            t = self.var_types[node] = node.type_annotation or self.solver.fresh()
        self.types[node] = t

    def _global_var(self, node: GlobalVar, state: int, stack: list) -> None:
        t = self.global_types.get(node)
        if t is None:
            raise self.error(node, "is not defined in the module")
        self.types[node] = t

    def _constant(self, node: Constant, state: int, stack: list) -> None:
        self.types[node] = TensorType(node.shape, node.dtype)

    def _op(self, node: Op, state: int, stack: list) -> None:
        raise self.error(node, f"the operator {node.name} is used as a value; only calls of "
                               "operators can be type-checked")

    def _constructor(self, node: Constructor, state: int, stack: list) -> None:
        self.types[node] = self._constructor_type(node, node)

    def _tuple(self, node: Tuple, state: int, stack: list) -> None:
        if state == 0:
            stack.append((node, 1))
            stack.extend((f, 0) for f in reversed(node.fields))
            return
        self.types[node] = TupleType([self.use(f) for f in node.fields])

    def _tuple_get(self, node: TupleGetItem, state: int, stack: list) -> None:
        if state == 0:
            stack.append((node, 1))
            stack.append((node.tuple_value, 0))
            return
        tuple_t = self.use(node.tuple_value)
        if type(tuple_t) is TupleType and node.index < len(tuple_t.fields):
            self.types[node] = self.solver.find(tuple_t.fields[node.index])
            return
        out = self.solver.fresh()
        c = _ProjConstraint(tuple_t, node.index, out, node)
        self.constraints.append(c)
        self._solve(c)
        self.types[node] = out if not c.done else self.solver.find(out)

    def _let(self, node: Let, state: int, stack: list) -> None:
        if state == 0:
            self._bind_var(node.var)
            stack.append((node, 1))
            stack.append((node.value, 0))
        elif state == 1:
            self.unify(node, self.var_types[node.var], self.use(node.value),
                       "the bound value does not match the variable's type")
            stack.append((node, 2))
            stack.append((node.body, 0))
        else:
            self.types[node] = self.use(node.body)

    def _function(self, node: Function, state: int, stack: list) -> None:
        if state == 0:
            for p in node.params:
                self._bind_var(p)
            if node.ret_type is None and node not in self.top_functions:
                self.untyped_functions = True
            stack.append((node, 1))
            stack.append((node.body, 0))
            return
        body = self.use(node.body)
        ret = node.ret_type
        if ret is not None:
            self.unify(node, ret, body, "the body's type does not match the declared return type")
        self.types[node] = FuncType([self.var_types[p] for p in node.params], ret or body,
                                    node.type_params)

    def _call(self, node: Call, state: int, stack: list) -> None:
        op = node.op
        if state == 0:
            stack.append((node, 1))
            stack.extend((a, 0) for a in reversed(node.args))
            if type(op) is not Op and type(op) is not Constructor:
                stack.append((op, 0))
            return
        args = [self.use(a) for a in node.args]
        if type(op) is Op:
            self.types[node] = self._op_call(node, op, args)
            return
        if type(op) is Constructor:
            name = op.name_hint
            callee = self._constructor_type(op, node)
        else:
            name = describe(op) if isinstance(op, (Var, GlobalVar)) else "the function"
            callee = self.solver.find(self.use(op))
            if type(callee) is IncompleteType:
                ret = self.solver.fresh()
                self.unify(node, callee, FuncType(args, ret), "the callee's type")
                self.types[node] = ret
                return
            if not isinstance(callee, FuncType):
                raise self.error(node, f"cannot call a value of type {self.show(callee)}")
            callee = self._instantiate(callee, node.type_args, node)
        if len(callee.arg_types) != len(args):
            given = ", ".join(self.show(a) for a in args)
            raise self.error(node, f"{name} takes {len(callee.arg_types)} argument(s) but is given "
                                   f"{len(args)}: its type is {self.show(callee)}, the arguments "
                                   f"have types ({given})")
        for i, (want, got) in enumerate(zip(callee.arg_types, args, strict=True)):
            self.unify(node, want, got, f"argument {i} of {name} has the wrong type (expected vs got)")
        self.types[node] = callee.ret_type

    def _if(self, node: If, state: int, stack: list) -> None:
        if state == 0:
            stack.append((node, 1))
            stack.extend(((node.false_branch, 0), (node.true_branch, 0), (node.cond, 0)))
            return
        cond = self.solver.resolve(self.use(node.cond))
        try:
            self.solver.unify(cond, BOOL)
        except Mismatch:
            raise self.error(node, f"the condition must be a bool scalar ({format_type(BOOL)}), "
                                   f"got {format_type(cond)}") from None
        self.types[node] = self.unify(node, self.use(node.true_branch),
                                      self.use(node.false_branch),
                                      "the two branches have different types")

    def _match(self, node: Match, state: int, stack: list) -> None:
        if state == 0:
            stack.append((node, 1))
            stack.append((node.data, 0))
            return
        if state == 1:
            data = self.use(node.data)
            self.match_data[node] = data
            for clause in node.clauses:
                self._pattern(clause.lhs, data, node)
            stack.append((node, 2))
            stack.extend((c.rhs, 0) for c in reversed(node.clauses))
            return
        if not node.clauses:
            self.types[node] = self.solver.fresh()
        else:
            t = self.use(node.clauses[0].rhs)
            for i, c in enumerate(node.clauses[1:], 1):
                t = self.unify(node, t, self.use(c.rhs),
                               f"clause {i} returns a different type from clause 0")
            self.types[node] = t
        if node.complete:
            missing = missing_case([c.lhs for c in node.clauses], self._constructors_of)
            if missing is not None:
                raise self.error(node, f"the match on {self.show(self.match_data[node])} is not "
                                       f"exhaustive: no clause matches {missing}")

    def _ref_create(self, node: RefCreate, state: int, stack: list) -> None:
        if state == 0:
            stack.append((node, 1))
            stack.append((node.value, 0))
            return
        self.types[node] = RefType(self.use(node.value))

    def _ref_read(self, node: RefRead, state: int, stack: list) -> None:
        if state == 0:
            stack.append((node, 1))
            stack.append((node.ref, 0))
            return
        value = self.solver.fresh()
        self.unify(node, self.use(node.ref), RefType(value), "expected a reference")
        self.types[node] = value

    def _ref_write(self, node: RefWrite, state: int, stack: list) -> None:
        if state == 0:
            stack.append((node, 1))
            stack.extend(((node.value, 0), (node.ref, 0)))
            return
        self.unify(node, self.use(node.ref), RefType(self.use(node.value)),
                   "the written value does not match the reference")
        self.types[node] = TupleType(())

    # -- operators and constraints ------------------------------------------------------------
    def _opdef(self, node: Call, name: str):
        opdef = self._opdefs.get(name)
        if opdef is None:
            try:
                opdef = self._opdefs[name] = registry.get(name)
            except KeyError as exc:
                raise self.error(node, str(exc.args[0])) from None
        return opdef

    def _relation(self, opdef, node: Call, args: list) -> Type:
        try:
            return opdef.type_relation(args, node.attrs)
        except RelayTypeError as exc:
            raise RelayTypeError(exc.message, *self.mod.source_map.locate(node)) from None

    def _op_call(self, node: Call, op: Op, args: list) -> Type:
        opdef = self._opdef(node, op.name)
        if all(type(t) is TensorType for t in args):  # every input known: check now
            return self._relation(opdef, node, args)
        out = self.solver.fresh()
        c = _OpConstraint(opdef, node.attrs, args, out, node)
        self.constraints.append(c)
        self._solve(c)
        return out

    def _solve(self, c) -> None:
        if c.done:
            return
        solver = self.solver
        if isinstance(c, _ProjConstraint):
            t = solver.find(c.tuple_t)
            if type(t) is IncompleteType:
                solver.wait(c, [t])
                return
            if not isinstance(t, TupleType):
                raise self.error(c.node, f"expected a tuple, got {self.show(t)}")
            if c.index >= len(t.fields):
                raise self.error(c.node, f"index {c.index} is out of range for "
                                         f"{self.show(t)} ({len(t.fields)} fields)")
            c.done = True
            self.unify(c.node, c.out, t.fields[c.index], "the projected field")
            return
        args = [solver.resolve(t) for t in c.args]
        holes = [h for t in args for h in solver.holes(t)]
        if holes and c.op.infer_inputs is not None:
            guesses = c.op.infer_inputs(args, c.attrs) or []
            # a call of the wrong arity has its error from the op's relation below: guess what fits
            for i, (arg, guess) in enumerate(zip(args, guesses, strict=False)):
                if guess is not None and solver.holes(arg):
                    self.unify(c.node, arg, guess, f"input {i} of {c.op.name}")
            args = [solver.resolve(t) for t in c.args]
            holes = [h for t in args for h in solver.holes(t)]
        if holes:
            solver.wait(c, holes)
            return
        c.done = True
        self.unify(c.node, c.out, self._relation(c.op, c.node, args), "the result type")

    def drain(self) -> None:
        """Run woken constraints until none is left (the relations' fixed point)."""
        queue = self.solver.queue
        while queue:
            self._solve(queue.popleft())

    # -- functions, constructors, patterns ------------------------------------------------------
    def _instantiate(self, ft: FuncType, type_args, node: Node) -> FuncType:
        if not ft.type_params:
            return ft
        if type_args:
            if len(type_args) != len(ft.type_params):
                raise self.error(node, f"{len(type_args)} type argument(s) given for "
                                       f"{len(ft.type_params)} type parameter(s)")
            mapping = dict(zip(ft.type_params, type_args, strict=True))
        else:
            mapping = {p: self._inst_hole() for p in ft.type_params}
        return FuncType([subst_type(a, mapping) for a in ft.arg_types],
                        subst_type(ft.ret_type, mapping))

    def _inst_hole(self) -> IncompleteType:
        h = self.solver.fresh()
        self.inst_holes.add(h)
        return h

    def _adt(self, c: Constructor, node: Node):
        data = self.mod.type_definitions.get(c.belong_to)
        if data is None:
            raise self.error(node, f"constructor {c.name_hint} belongs to "
                                   f"{c.belong_to.name_hint}, which the module does not define")
        return data

    def _constructors_of(self, c: Constructor):
        data = self.mod.type_definitions.get(c.belong_to)
        return list(data.constructors) if data is not None else None

    def _constructor_type(self, c: Constructor, node: Node) -> FuncType:
        data = self._adt(c, node)
        mapping = {tv: self._inst_hole() for tv in data.type_vars}
        result = TypeCall(c.belong_to, [mapping[tv] for tv in data.type_vars])
        return FuncType([subst_type(t, mapping) for t in c.inputs], result)

    def _pattern(self, pattern, expected: Type, match: Match) -> None:
        stack = [(pattern, expected)]
        while stack:
            p, t = stack.pop()
            if isinstance(p, PatternWildcard):
                continue
            if isinstance(p, PatternVar):
                self.unify(match, self._bind_var(p.var), t, f"pattern variable %{p.var.name_hint}")
            elif isinstance(p, PatternConstructor):
                ft = self._constructor_type(p.constructor, match)
                self.unify(match, ft.ret_type, t, f"pattern {p.constructor.name_hint}")
                stack.extend(zip(p.patterns, ft.arg_types, strict=True))
            elif isinstance(p, PatternTuple):
                fields = [self.solver.fresh() for _ in p.patterns]
                self.unify(match, TupleType(fields), t, "tuple pattern")
                stack.extend(zip(p.patterns, fields, strict=True))
            else:
                raise self.error(match, f"unknown pattern {type(p).__name__}")

    def signature(self, fn: Function) -> FuncType:
        """A global's type before its body is checked (holes where it is not annotated)."""
        params = [self._bind_var(p) for p in fn.params]
        return FuncType(params, fn.ret_type or self.solver.fresh(), fn.type_params)

    # -- results ------------------------------------------------------------------------------
    def finish(self) -> tuple[dict[Node, Type], dict[Node, tuple]]:
        """Every checked node's final type, and the nodes used at several types with all of
        them; errors for what could not be inferred."""
        self.drain()
        for c in self.constraints:
            if not c.done:
                what = (f"the argument types of {c.op.name}" if isinstance(c, _OpConstraint)
                        else "the tuple type")
                raise self.error(c.node, f"cannot infer {what}; annotate the inputs")
        final: dict[Node, Type] = {}
        resolve, poly_uses = self.solver.resolve, self.poly_uses
        for node, t in self.types.items():
            uses = poly_uses.get(node)
            r = resolve(t if uses is None else uses[0])
            if type(r) is not TensorType and has_holes(r):
                raise self.error(node, f"cannot infer its type (got {format_type(r)}); add a type "
                                       "annotation")
            final[node] = r
        several: dict[Node, tuple] = {}
        for node, uses in poly_uses.items():
            distinct = list(dict.fromkeys(resolve(u) for u in uses))  # types are interned
            if len(distinct) > 1:
                for r in distinct:
                    if type(r) is not TensorType and has_holes(r):
                        raise self.error(node, f"cannot infer its type (got {format_type(r)}); "
                                               "add a type annotation")
                several[node] = tuple(distinct)
                del final[node]
        return final, several


class _Annotate(ExprMutator):
    """Rebuilds a program with the annotations inference found (vars, function return types)."""

    def __init__(self, final: dict, fix: dict) -> None:
        super().__init__()
        self.final, self.fix = final, fix

    def rewrite_var(self, pre: Var, post: Var) -> Var:
        t = self.fix.get(pre)
        return Var(pre.name_hint, t) if t is not None else post

    def rewrite_function(self, pre: Function, post: Function) -> Function:
        if post.ret_type is None and pre in self.final:
            return post.replace(ret_type=self.final[pre].ret_type)
        return post

    def rewrite(self, pre: Node, post: Node) -> Node:
        return post


def _finish_exprs(ck: _Checker, final: dict, several: dict, roots: list) -> tuple[list, TypeMap]:
    """Rebuild the roots with found annotations; returns the new roots and every node's type."""
    fix = {v: final[v] for v in ck.unannotated if v in final}
    if fix or ck.untyped_functions:
        mutator = _Annotate(final, fix)
        new_roots = [mutator.visit(r) for r in roots]
        pairs = mutator.memo.items()
    else:
        # only top-level return types are missing (or nothing): no need to walk the bodies
        new_roots = [r.replace(ret_type=final[r].ret_type)
                     if isinstance(r, Function) and r.ret_type is None else r for r in roots]
        pairs = zip(roots, new_roots, strict=True)
    extra = {}
    for old, new in pairs:
        if new is not old and old in final:
            extra[new] = final[old]
            ck.mod.source_map.carry(old, new)
        elif new is not old and old in several:
            several[new] = several[old]
    final.update(extra)
    return new_roots, TypeMap(final, several)


def infer_type_expr(expr: Expr, mod: IRModule | None = None, *, with_types: bool = False):
    """Type-check an expression (globals and ADTs from ``mod``); returns it with annotations
    filled in (and, ``with_types``, the TypeMap of every node's type: ``(expr, types)``).

    The types stay readable through ``rg.type_of`` while the returned expression lives."""
    if not isinstance(expr, Expr):
        raise RelayError(f"infer_type_expr: expected an Expr, got {type(expr).__name__}")
    context = _context_key(mod) if mod is not None else ()
    mod = mod if mod is not None else IRModule()
    with paused_gc():
        out, types = _infer_expr(expr, mod)
    publish(types, (out,), ("expr", id(out), context))
    return (out, types) if with_types else out


def _context_key(mod: IRModule) -> tuple:
    """What a module contributes to a type: its functions and ADTs (ids, so the key does not keep
    them alive; see ``checked.publish``)."""
    return (tuple(id(x) for kv in mod.functions.items() for x in kv),
            tuple(id(x) for kv in mod.type_definitions.items() for x in kv))


def _check_globals(ck: _Checker, fns: list) -> None:
    ck.top_functions = {fn for _, fn in fns}
    for gv, fn in fns:
        ck.global_types[gv] = ck.signature(fn)
    for gv, fn in fns:
        ck.unify(fn, ck.global_types[gv], ck.check(fn), f"@{gv.name_hint}'s signature")


def _infer_expr(expr: Expr, mod: IRModule) -> tuple[Expr, TypeMap]:
    ck = _Checker(mod)
    _check_globals(ck, list(mod.functions.items()))
    ck.check(expr)
    final, several = ck.finish()
    (out,), types = _finish_exprs(ck, final, several, [expr])
    return out, types


def infer_type(mod_or_expr):
    """Type-check a module (returning a new, typed IRModule that owns its checked types) or an
    expression (returning it typed); ``rg.type_of`` then reads every node's checked type."""
    if isinstance(mod_or_expr, Expr):
        return infer_type_expr(mod_or_expr)
    if not isinstance(mod_or_expr, IRModule):
        raise RelayError(f"infer_type: expected an IRModule or an Expr, got "
                         f"{type(mod_or_expr).__name__}")
    with paused_gc():
        out = _infer_module(mod_or_expr)
    publish(out.checked_types, out.functions.values(), ("module", _context_key(out)))
    return out


def _infer_module(mod: IRModule) -> IRModule:
    ck = _Checker(mod)
    fns = list(mod.functions.items())
    _check_globals(ck, fns)
    final, several = ck.finish()
    for gv in ck.global_types:
        final[gv] = ck.solver.resolve(ck.global_types[gv])
    new_fns, types = _finish_exprs(ck, final, several, [fn for _, fn in fns])
    out = mod.copy()
    for (gv, _), fn in zip(fns, new_fns, strict=True):
        out.functions[gv] = fn
    out.checked_types = types
    return out

