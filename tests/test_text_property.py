"""Property: any well-formed program prints to text that parses back to the same program.

Programs are drawn at random: dataflow with shared (DAG) nodes, lets, ifs, matches on a list
ADT, nested functions and their calls, globals, tuples, references, calls with attributes and
scalar and tensor constants of several dtypes.
"""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import relaygraph as rg
from relaygraph.ir import (
    Call,
    Clause,
    Constant,
    Constructor,
    Function,
    GlobalTypeVar,
    GlobalVar,
    If,
    IRModule,
    Let,
    Match,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    RefCreate,
    RefRead,
    RefWrite,
    TensorType,
    Tuple,
    TupleGetItem,
    TypeCall,
    TypeData,
    TypeVar,
    Var,
    const,
)
from relaygraph.text import astext, parse

NAMES = ["x", "x1", "y", "", "0", "a.b", "v"]
TYPES = [None, TensorType((), "float32"), TensorType((2, 3), "float32"),
         TensorType((3,), "int64"), TensorType((), "bool")]


def list_adt():
    header = GlobalTypeVar("List")
    a = TypeVar("A")
    cons = Constructor("Cons", [a, TypeCall(header, [a])], header)
    nil = Constructor("Nil", [], header)
    return TypeData(header, [a], [cons, nil]), cons, nil


class Builder:
    """Draws a program step by step; ``pool`` holds what is in scope at each point."""

    def __init__(self, data, cons: Constructor, nil: Constructor, helper: GlobalVar) -> None:
        self.data, self.cons, self.nil, self.helper = data, cons, nil, helper

    def draw(self, strategy):
        return self.data.draw(strategy)

    def var(self) -> Var:
        return Var(self.draw(st.sampled_from(NAMES)), self.draw(st.sampled_from(TYPES)))

    def pick(self, pool):
        return self.draw(st.sampled_from(pool))

    def constant(self):
        kind = self.draw(st.sampled_from(["f32", "i32", "i64", "bool", "f16", "f64", "tensor", "i8"]))
        if kind == "tensor":
            shape = self.draw(st.sampled_from([(2,), (2, 3), (1,)]))
            dtype = self.draw(st.sampled_from(["float32", "int32", "uint8", "bool"]))
            return Constant(np.arange(int(np.prod(shape))).reshape(shape).astype(dtype))
        floats = st.floats(allow_nan=False, width=32)
        value = {
            "f32": lambda: const(self.draw(floats), "float32"),
            "f16": lambda: const(self.draw(st.floats(allow_nan=False, width=16)), "float16"),
            "f64": lambda: const(self.draw(st.floats(allow_nan=False, allow_infinity=False)), "float64"),
            "i32": lambda: const(self.draw(st.integers(-(2**31), 2**31 - 1)), "int32"),
            "i64": lambda: const(self.draw(st.integers(-(2**63), 2**63 - 1)), "int64"),
            "i8": lambda: const(self.draw(st.integers(-128, 127)), "int8"),
            "bool": lambda: const(self.draw(st.booleans())),
        }[kind]
        return value()

    def block(self, pool: list, depth: int):
        """An expression built from ``pool``; may add bindings of its own."""
        pool = list(pool)
        for _ in range(self.draw(st.integers(1, 5))):
            pool.append(self.step(pool, depth))
        return self.pick(pool[-3:])

    def step(self, pool: list, depth: int):
        kinds = ["unary", "binary", "attrs", "tuple", "project", "constant", "ctor", "global", "ref"]
        if depth < 3:
            kinds += ["let", "if", "fn", "match", "let_fn"]
        kind = self.draw(st.sampled_from(kinds))
        x = self.pick(pool)
        if kind == "unary":
            return rg.op.make_call(self.draw(st.sampled_from(["negative", "exp", "tanh"])), x)
        if kind == "binary":
            return rg.op.make_call(self.draw(st.sampled_from(["add", "multiply", "less"])), x,
                                   self.pick(pool))
        if kind == "attrs":
            axis = self.draw(st.integers(-1, 1))
            if self.draw(st.booleans()):
                return rg.op.make_call("nn.softmax", x, axis=axis)
            return rg.op.make_call("sum", x, axis=(axis,), keepdims=self.draw(st.booleans()))
        if kind == "tuple":
            return Tuple([self.pick(pool) for _ in range(self.draw(st.integers(0, 3)))])
        if kind == "project":
            return TupleGetItem(Tuple([x, self.pick(pool)]), self.draw(st.integers(0, 1)))
        if kind == "constant":
            return self.constant()
        if kind == "ctor":
            return Call(self.cons, (x, Call(self.nil, ()))) if self.draw(st.booleans()) else self.cons
        if kind == "global":
            return Call(self.helper, (x,))
        if kind == "ref":
            r = RefCreate(x)
            return self.draw(st.sampled_from([r, RefRead(r), RefWrite(r, self.pick(pool))]))
        if kind == "let":
            v = self.var()
            return Let(v, x, self.block(pool + [v], depth + 1))
        if kind == "if":
            return If(x, self.block(pool, depth + 1), self.block(pool, depth + 1))
        if kind == "fn":
            params = [self.var() for _ in range(self.draw(st.integers(0, 2)))]
            fn = Function(params, self.block(pool + params, depth + 1),
                          attrs={"Primitive": 1} if self.draw(st.booleans()) else None)
            return Call(fn, tuple(self.pick(pool) for _ in params)) if self.draw(st.booleans()) else fn
        if kind == "let_fn":  # recursion through let
            f, p = Var("f"), self.var()
            fn = Function([p], self.block(pool + [f, p], depth + 1))
            return Let(f, fn, Call(f, (x,)))
        head, rest = self.var(), self.var()
        pats = [PatternConstructor(self.cons, [PatternVar(head), PatternVar(rest)]),
                PatternConstructor(self.cons, [PatternWildcard(),
                                               PatternConstructor(self.nil, [])])]
        clauses = [Clause(self.draw(st.sampled_from(pats)), self.block(pool + [head, rest], depth + 1)),
                   Clause(PatternTuple([]) if self.draw(st.booleans()) else PatternWildcard(),
                          self.block(pool, depth + 1))]
        if not isinstance(clauses[0].lhs.patterns[0], PatternVar):
            clauses[0] = Clause(clauses[0].lhs, self.block(pool, depth + 1))
        return Match(x, clauses, complete=self.draw(st.booleans()))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.data_too_large])
@given(st.data())
def test_printing_then_parsing_gives_back_the_program(data):
    adt, cons, nil = list_adt()
    mod = IRModule(type_definitions={adt.header: adt})
    helper = GlobalVar("helper")
    b = Builder(data, cons, nil, helper)
    hp = b.var()
    mod.add(helper, Function([hp], b.block([hp], 2)))
    params = [b.var() for _ in range(b.draw(st.integers(1, 3)))]
    mod.add("main", Function(params, b.block(params, 0)))
    text = astext(mod)
    back = parse(text)
    assert rg.alpha_equal(back, mod), text
    assert astext(back) == text
