"""PassContext, Sequential, decorators and instruments: TVM's semantics."""

import pytest

import relaygraph as rg
from relaygraph import transform as T
from relaygraph.passes import PassError


def _mod():
    x = rg.var("x")
    return rg.IRModule.from_expr(rg.Function([x], rg.Call(rg.Op("exp"), (x,))))


def recorder(name, log, opt_level=1, required=()):
    @T.module_pass(opt_level=opt_level, name=name, required=required)
    def run(mod, ctx):
        log.append(name)
        return mod

    return run


def test_opt_level_filters_passes_in_sequential():
    log = []
    seq = T.Sequential([recorder("a", log, 1), recorder("b", log, 3), recorder("c", log, 2)])
    with T.PassContext(opt_level=2):
        seq(_mod())
    assert log == ["a", "c"]


def test_required_and_disabled_passes():
    log = []
    seq = T.Sequential([recorder("a", log, 1), recorder("b", log, 3)])
    with T.PassContext(opt_level=2, required_pass=["b"], disabled_pass=["a"]):
        seq(_mod())
    assert log == ["b"]
    log.clear()
    with T.PassContext(opt_level=0, required_pass=["a"], disabled_pass=["a"]):
        seq(_mod())  # disabled wins over required
    assert log == []


def test_required_passes_of_a_pass_run_first_by_name():
    log = []
    T.register_pass("RecordPre", lambda: recorder("RecordPre", log, 0))
    seq = T.Sequential([recorder("main-pass", log, 0, required=["RecordPre"])])
    seq(_mod())
    assert log == ["RecordPre", "main-pass"]


def test_context_stack_and_config():
    assert T.PassContext.current().opt_level == 2
    with T.PassContext(opt_level=3, config={"relay.FuseOps.max_depth": 5}) as outer:
        assert T.PassContext.current() is outer
        assert outer.get_config("relay.FuseOps.max_depth") == 5
        with T.PassContext(opt_level=0) as inner:
            assert T.PassContext.current() is inner
            assert inner.get_config("relay.FuseOps.max_depth") == 256
        assert T.PassContext.current() is outer
    with pytest.raises(PassError, match="unknown config key 'relay.nope'.*relay.FuseOps.max_depth"):
        T.PassContext(config={"relay.nope": 1})
    with pytest.raises(PassError, match="expects int"):
        T.PassContext(config={"relay.FuseOps.max_depth": "deep"})


def test_function_pass_maps_every_function_and_class_decorators():
    mod = _mod()
    mod.add("other", rg.Function([rg.var("y")], rg.const(1.0)))
    seen = []

    @T.function_pass(opt_level=0)
    class Count:
        def __init__(self, tag):
            self.tag = tag

        def transform_function(self, func, mod, ctx):
            seen.append(self.tag)
            return func

    Count("t")(mod)
    assert seen == ["t", "t"]
    with pytest.raises(PassError, match="opt_level is required"):
        T.module_pass(lambda m, c: m)


def test_passes_never_change_their_input():
    mod = _mod()
    before = dict(mod.functions)

    @T.module_pass(opt_level=0)
    def replace_main(m, ctx):
        m.update_func("main", rg.Function([], rg.const(0.0)))
        return m

    out = replace_main(mod)
    assert mod.functions == before and out["main"] is not mod["main"]


class Events(T.PassInstrument):
    def __init__(self, name, log, skip=(), fail_at=None):
        self.name, self.log, self.skip, self.fail_at = name, log, set(skip), fail_at

    def _event(self, what):
        self.log.append(f"{self.name} {what}")
        if what == self.fail_at:
            raise RuntimeError(f"{self.name} failed in {what}")

    def enter_pass_ctx(self):
        self._event("enter")

    def exit_pass_ctx(self):
        self._event("exit")

    def should_run(self, mod, info):
        self._event(f"should_run {info.name}")
        return info.name not in self.skip

    def run_before_pass(self, mod, info):
        self._event(f"before {info.name}")

    def run_after_pass(self, mod, info):
        self._event(f"after {info.name}")


def test_instrument_hook_order():
    log, ran = [], []
    p = recorder("p", ran, 0)
    with T.PassContext(instruments=[Events("A", log), Events("B", log)]):
        p(_mod())
    assert log == ["A enter", "B enter", "A should_run p", "B should_run p", "A before p",
                   "B before p", "A after p", "B after p", "A exit", "B exit"]
    assert ran == ["p"]


def test_should_run_false_skips_the_pass():
    log, ran = [], []
    with T.PassContext(instruments=[Events("A", log, skip=["p"])]):
        recorder("p", ran, 0)(_mod())
    assert ran == [] and "A before p" not in log


def test_errors_from_instruments():
    log = []
    ctx = T.PassContext(instruments=[Events("A", log), Events("B", log, fail_at="enter")])
    with pytest.raises(RuntimeError, match="B failed in enter"):
        with ctx:
            pass
    assert log == ["A enter", "B enter", "A exit"] and ctx.instruments == []
    log.clear()
    with pytest.raises(RuntimeError, match="A failed in before p"):
        with T.PassContext(instruments=[Events("A", log, fail_at="before p")]):
            recorder("p", [], 0)(_mod())
    assert log[-1] == "A exit"  # leaving the context still exits the instruments


def test_timing_instrument_reports_each_pass():
    timing = T.PassTimingInstrument()
    seq = T.Sequential([T.ToANormalForm(), T.ToGraphNormalForm()], name="seq")
    with T.PassContext(instruments=[timing]):
        seq(_mod())
    names = [name for _, name, _ in timing.records]
    assert names == ["seq", "ToANormalForm", "ToGraphNormalForm"]
    assert "  ToANormalForm:" in timing.render() and set(timing.totals()) == set(names)


def test_pipeline_text():
    seq = T.parse_pipeline("ToANormalForm, DeadCodeElimination(inline-once=true)")
    assert [p.info.name for p in seq.passes] == ["ToANormalForm", "DeadCodeElimination"]
    with pytest.raises(PassError, match="unknown pass 'Nope'"):
        T.parse_pipeline("Nope")
    with pytest.raises(PassError, match="no option 'depth'"):
        T.parse_pipeline("DeadCodeElimination(depth=3)")
    with pytest.raises(PassError, match="bad pass pipeline"):
        T.parse_pipeline("ToANormalForm((")
