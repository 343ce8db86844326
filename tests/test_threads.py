"""Threads: interning is atomic, nodes are complete before they are visible, e-graphs per thread."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

import relaygraph as rg
from relaygraph.egraph import RelayEGraph, saturate

THREADS = 8

ASSOC = """
(ruleset t)
(rewrite (r:add a b) (r:add b a) :ruleset t :name "add-commute")
(rewrite (r:add a (r:add b c)) (r:add (r:add a b) c) :ruleset t :name "add-assoc")
"""


@pytest.fixture
def busy_switching():
    """Switch threads as often as the interpreter allows, so races show up."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def run_together(work, n: int = THREADS) -> list:
    """Run ``work(i)`` in ``n`` threads released at once; their results (re-raises a failure)."""
    barrier = threading.Barrier(n)
    results: list = [None] * n
    errors: list = []

    def main(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as exc:  # reported to the test below, with its thread
            errors.append((i, exc))

    threads = [threading.Thread(target=main, args=(i,), name=f"worker-{i}") for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0][1]
    return results


def build(x: rg.Var, n: int) -> list:
    """Fresh nodes over ``x`` (calls with attributes, tuples, projections), in building order."""
    nodes = []
    prev = x
    for i in range(n):
        call = rg.op.nn.softmax(rg.op.add(prev, x), axis=i % 3 - 1)
        pair = rg.Tuple([call, prev])
        prev = rg.TupleGetItem(pair, 0)
        nodes += [call, pair, prev]
    return nodes


def test_threads_interning_the_same_structures_get_identical_nodes(busy_switching):
    for _ in range(5):
        x = rg.var("x", shape=(2, 3))  # a new variable: every node below is new to the table
        built = run_together(lambda i, x=x: build(x, 300))
        first = built[0]
        for other in built[1:]:
            assert len(other) == len(first)
            assert all(a is b for a, b in zip(first, other, strict=True))
        # and a later build still finds the very same nodes
        assert all(a is b for a, b in zip(build(x, 300), first, strict=True))


def test_constants_built_concurrently_are_complete(busy_switching):
    def work(base: int) -> list:
        seen = []
        for k in range(400):
            c = rg.Constant(np.full((4,), base + k, dtype="int64"))
            seen.append((c, int(c.data[0]), c.data.shape))
        return seen

    for round_ in range(3):
        base = 1000 * round_
        results = run_together(lambda i, base=base: work(base))
        for seen in results:
            for k, (c, value, shape) in enumerate(seen):
                assert value == base + k and shape == (4,)
                assert c is results[0][k][0]


def test_attrs_built_concurrently_are_complete(busy_switching):
    def work(tag: str) -> list:
        return [rg.Attrs(axis=k, name=tag) for k in range(300)]

    for round_ in range(3):
        results = run_together(lambda i, tag=f"t{round_}": work(tag))
        for attrs_list in results:
            for k, a in enumerate(attrs_list):
                assert a["axis"] == k and a is results[0][k]


def _sum_chain(n: int) -> rg.Function:
    xs = [rg.var(f"x{i}", shape=(2, 3)) for i in range(n)]
    acc = xs[0]
    for v in xs[1:]:
        acc = rg.op.add(acc, v)
    return rg.Function(xs, acc)


def _same_values(a: rg.Function, b: rg.Function) -> None:
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(p.type_annotation.shape).astype("float32") for p in a.params]
    np.testing.assert_allclose(rg.evaluate(rg.IRModule.from_expr(b), *args),
                               rg.evaluate(rg.IRModule.from_expr(a), *args), rtol=1e-5, atol=1e-5)


def test_two_threads_saturate_at_once():
    fn = _sum_chain(6)

    def work(i: int):
        eg = RelayEGraph(fn)
        report = saturate(eg, ASSOC, node_limit=2_000, iter_limit=6, isolate=False, progress=False)
        return report, eg.extract()

    results = run_together(work, 2)
    for report, best in results:
        assert report.mode == "in-process" and report.matches.get("add-assoc", 0) > 0
        assert report.nodes > report.initial_nodes
        _same_values(fn, best)
    assert results[0][0].nodes == results[1][0].nodes


def test_two_threads_optimize_at_once():
    x = rg.var("x", shape=(4, 8))
    w = rg.var("w", shape=(16, 8))
    b = rg.var("b", shape=(16,))
    body = rg.op.nn.relu(rg.op.nn.bias_add(rg.op.nn.dense(x, w), b))
    mod = rg.IRModule.from_expr(rg.Function([x, w, b], body))

    def work(i: int):
        return rg.optimize(mod, time_limit=None, iter_limit=4, extractor="greedy-dag",
                           repeats=1, timing_budget=0.0)

    for result in run_together(work, 2):
        assert result.cost_after <= result.cost_before
        assert isinstance(result.module["main"], rg.Function)


def test_an_egraph_used_from_another_thread_says_so():
    eg = RelayEGraph(_sum_chain(3))
    eg.materialize()  # its egglog e-graph now lives in this thread
    caught: list = []

    def other() -> None:
        try:
            saturate(eg, ASSOC, iter_limit=1, isolate=False, progress=False)
        except Exception as exc:  # the test checks its kind and message below
            caught.append(exc)

    t = threading.Thread(target=other, name="elsewhere")
    t.start()
    t.join()
    assert len(caught) == 1
    exc = caught[0]
    assert type(exc) is rg.RelayError, repr(exc)
    text = str(exc)
    assert "built in thread 'MainThread'" in text and "cannot be used from another thread" in text
    assert "'elsewhere'" in text
    # the e-graph still works in its own thread
    report = saturate(eg, ASSOC, iter_limit=2, isolate=False, progress=False)
    assert report.iterations


def test_a_fresh_thread_parses_egglog_rules_with_its_own_scratch_egraph():
    eg = RelayEGraph(_sum_chain(3))
    eg.record_egglog(ASSOC)  # the first thread's scratch e-graph exists now

    def work(i: int) -> set:
        mine = RelayEGraph(_sum_chain(3))
        return mine.record_egglog(ASSOC)

    assert run_together(work, 2) == [{"add-commute", "add-assoc"}] * 2


def test_an_egraph_made_in_a_thread_can_be_dropped_in_another(monkeypatch):
    import gc

    # Garbage left by earlier tests is collected first (whenever the collector runs, some of it
    # may hold e-graphs of ended threads): this test is about the e-graphs it makes itself.
    monkeypatch.setattr(sys, "unraisablehook", lambda args: None)
    gc.collect()
    raised: list = []
    monkeypatch.setattr(sys, "unraisablehook", raised.append)

    def work(i: int) -> RelayEGraph:
        eg = RelayEGraph(_sum_chain(3))
        saturate(eg, ASSOC, iter_limit=1, isolate=False, progress=False)
        return eg

    made = run_together(work, 2)
    assert all(eg._backend is not None for eg in made)  # live e-graphs of finished threads
    del made
    gc.collect()
    assert raised == []


def test_parses_in_many_threads_keep_their_own_source_lines(busy_switching):
    # Each thread parses its own ill-typed text under one shared name, far more texts than the
    # registry of source names keeps: every error must still show its own line, and the
    # registry's trimming must not break under concurrent parses.
    def work(i: int):
        out = []
        for j in range(40):
            text = f"fn (%x: Tensor[(2), float32]) {{\n  add(%x, meta_{i}_{j})\n}}\n"
            try:
                rg.parse_expr(text)
            except rg.errors.ParseError as exc:
                out.append(str(exc))
        return out

    results = run_together(work)
    for i, messages in enumerate(results):
        assert len(messages) == 40
        for j, message in enumerate(messages):
            assert f"meta_{i}_{j}" in message, message


def test_an_egraph_is_not_freed_by_a_thread_reusing_its_owners_ident(monkeypatch):
    # A thread's ident is reused once it has ended; a Backend collected in such a new thread
    # must not free the egglog e-graph there (egglog warns and leaks): it is kept instead.
    from relaygraph.egraph import backend as be

    made: list = []
    t = threading.Thread(target=lambda: made.append(be.Backend()), name="owner")
    t.start()
    t.join()
    kept: list = []
    real = be._keep_for_good
    monkeypatch.setattr(be, "_keep_for_good", lambda eg: (kept.append(type(eg).__name__), real(eg)))

    def collect() -> None:
        made[0]._thread = threading.get_ident()  # as if this thread had been given the old ident
        made.pop()

    other = threading.Thread(target=collect, name="same-ident")
    other.start()
    other.join()
    assert kept == ["EGraph"]
