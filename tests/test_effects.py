"""Effects under hash-consing: ref nodes are nominal and every pass keeps what effects do."""

import pytest

import relaygraph as rg
from relaygraph import transform as T
from relaygraph.ir.traversal import post_order

REFS = """#[version = "0.0.5"]
def @main() {
  let %a = ref(0);
  let %b = ref(0);
  let %w = ref_write(%a, 5);
  (ref_read(%a), ref_read(%b))
}
"""

PASSES = {
    "ToANormalForm": [T.ToANormalForm()],
    "ToGraphNormalForm": [T.ToGraphNormalForm()],
    "ANF-then-GNF": [T.ToANormalForm(), T.ToGraphNormalForm()],
    "ToBasicBlockNormalForm": [T.ToBasicBlockNormalForm()],
    "DeadCodeElimination": [T.DeadCodeElimination(inline_once=True)],
    "EliminateCommonSubexpr": [T.ToANormalForm(), T.EliminateCommonSubexpr()],
    "FoldConstant": [T.FoldConstant()],
    "Inline": [T.Inline()],
    "LambdaLift": [T.LambdaLift()],
    "SimplifyExpr": [T.InferType(), T.SimplifyExpr()],
    "FuseOps": [T.InferType(), T.FuseOps()],
    "DefuseOps": [T.InferType(), T.FuseOps(), T.DefuseOps()],
}


def _ints(value):
    return tuple(int(v) for v in value)


def test_the_refs_program_evaluates_to_5_0():
    assert _ints(rg.evaluate(rg.parse(REFS))) == (5, 0)


@pytest.mark.parametrize("name", sorted(PASSES))
def test_every_pass_keeps_the_value_of_the_refs_program(name):
    with T.PassContext(opt_level=3):
        out = T.Sequential(PASSES[name])(rg.parse(REFS))
    assert _ints(rg.evaluate(out)) == (5, 0), rg.astext(out)


def test_two_ref_creations_are_two_nodes():
    zero = rg.const(0)
    a, b = rg.RefCreate(zero), rg.RefCreate(zero)
    assert a is not b
    assert rg.RefRead(a) is not rg.RefRead(a)
    assert rg.RefWrite(a, zero) is not rg.RefWrite(a, zero)
    # Structurally equal, and alpha-equal only with the same sharing.
    assert rg.alpha_equal(a, b)
    assert rg.alpha_equal(rg.Tuple([a, b]), rg.Tuple([b, a]))
    assert not rg.alpha_equal(rg.Tuple([a, a]), rg.Tuple([a, b]))


def test_replace_and_with_children_build_new_ref_nodes():
    a = rg.RefCreate(rg.const(0))
    assert a.replace(value=a.value) is a and a.with_children((a.value,)) is a
    b = a.replace(value=rg.const(1))
    assert b is not a and int(b.value.data) == 1 and isinstance(b, rg.RefCreate)
    w = rg.RefWrite(a, rg.const(2))
    assert w.with_children((b, w.value)).ref is b


def test_the_printer_prints_two_cells_as_two_bindings_and_reads_back_the_same_value():
    mod = rg.parse(REFS)
    text = rg.astext(mod)
    assert text.count("ref(0)") == 2
    back = rg.parse(text)
    assert _ints(rg.evaluate(back)) == (5, 0)
    cells = [n for n in post_order(back["main"]) if isinstance(n, rg.RefCreate)]
    assert len(cells) == 2


def test_a_shared_cell_whose_value_calls_a_local_function_prints_once_for_both_branches():
    # The cell's value calls a recursive local function (which may have effects), so the value is
    # a call printed per use; the cell itself is nominal and must stay one node, bound before the
    # if that uses it in both branches.
    x, p, f = rg.Var("x"), rg.Var("p"), rg.Var("f")
    value = rg.Let(f, rg.Function([p], f), rg.Call(f, (x,)))
    cell = rg.RefCreate(value)
    cond = rg.Var("c", rg.TensorType((), "bool"))
    mod = rg.IRModule.from_expr(rg.Function([x, cond], rg.If(cond, cell, cell)))
    text = rg.astext(mod)
    assert text.count("ref(") == 1
    back = rg.parse(text)
    assert rg.alpha_equal(back, mod), text
    assert len([n for n in post_order(back["main"]) if isinstance(n, rg.RefCreate)]) == 1


def test_a_shared_cell_is_one_cell():
    # One RefCreate node used twice is one cell: the write is seen by the read.
    cell = rg.RefCreate(rg.const(0))
    prog = rg.Tuple([rg.RefWrite(cell, rg.const(7)), rg.RefRead(cell)])
    assert int(rg.evaluate(prog)[1]) == 7
    text = rg.astext(prog)
    assert text.count("ref(0)") == 1
    assert int(rg.evaluate(rg.parse_expr(text))[1]) == 7
    assert int(rg.evaluate(T.ToANormalForm()(rg.IRModule.from_expr(prog)))[1]) == 7


COUNTER = """#[version = "0.0.5"]
def @main() {
  let %c = ref(0);
  let %incr = fn () { let %u = ref_write(%c, add(ref_read(%c), 1)); ref_read(%c) };
  let %x = %incr();
  let %y = %incr();
  (%x, %y, add(%incr(), %incr()), ref_read(%c))
}
"""


@pytest.mark.parametrize("name", sorted(PASSES))
def test_calls_of_an_effectful_closure_are_never_merged(name):
    mod = rg.parse(COUNTER)
    assert _ints(rg.evaluate(mod)) == (1, 2, 7, 4)
    with T.PassContext(opt_level=3):
        try:
            out = T.Sequential(PASSES[name])(mod)
        except rg.RelayError as exc:  # the refusal names the shared call
            assert name in ("FuseOps", "DefuseOps") and "%incr()" in str(exc)
            return
    assert _ints(rg.evaluate(out)) == (1, 2, 7, 4), rg.astext(out)


def test_gnf_keeps_effectful_lets_and_drops_pure_ones():
    mod = rg.parse(REFS)
    out = T.ToGraphNormalForm()(T.ToANormalForm()(mod))
    lets = [n for n in post_order(out["main"]) if isinstance(n, rg.Let)]
    assert {type(n.value) for n in lets} <= {rg.RefCreate, rg.RefRead, rg.RefWrite}
    assert len([n for n in lets if isinstance(n.value, rg.RefWrite)]) == 1


def test_anf_refuses_an_effect_shared_by_two_branches_naming_it():
    r = rg.var("r")
    write = rg.RefWrite(r, rg.const(1))
    cond = rg.var("c")
    body = rg.If(cond, rg.Tuple([write]), rg.Tuple([write]))
    with pytest.raises(rg.RelayError, match=r"ToANormalForm: the effect `.*ref_write\(%r, 1\)"):
        T.ToANormalForm()(rg.IRModule.from_expr(rg.Function([r, cond], body)))


def test_fold_constant_keeps_an_effect_in_a_dropped_tuple_field():
    r = rg.var("r")
    prog = rg.Function([r], rg.Tuple([rg.RefWrite(r, rg.const(3)), rg.const(1)])[1])
    out = T.FoldConstant()(rg.IRModule.from_expr(prog))
    assert any(isinstance(n, rg.RefWrite) for n in post_order(out["main"]))


def test_inline_binds_an_effectful_argument_once():
    src = """#[version = "0.0.5"]
def @twice(%x: int32) -> int32 { add(%x, %x) }
def @main() {
  let %c = ref(1);
  let %u = @twice(ref_read(%c));
  let %w = ref_write(%c, 10);
  (%u, ref_read(%c))
}
"""
    mod = rg.parse(src)
    mod["twice"] = mod["twice"].with_attr("Inline", 1)
    assert _ints(rg.evaluate(mod)) == (2, 10)
    out = T.Inline()(mod)
    assert "twice" not in [g.name_hint for g in out.functions]
    assert _ints(rg.evaluate(out)) == (2, 10)
    reads = [n for n in post_order(out["main"]) if isinstance(n, rg.RefRead)]
    assert len(reads) == 2  # the argument's read still happens once, plus the final read
