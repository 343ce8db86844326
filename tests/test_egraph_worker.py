"""Saturation in a worker process: the hard time limit, and the same results as in-process."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest
from test_egraph_saturate import ASSOC, COMMUTE, _DoubleRule, _same_values, _sum_chain, _vars

import relaygraph as rg
from relaygraph.egraph import RelayEGraph, saturate

EXPLOSIVE = ASSOC + '(rewrite (r:add (r:add a b) c) (r:add a (r:add b c)) :ruleset t :name "add-assoc-r")'


def test_worker_matches_in_process_run():
    x, y, z = _vars(3)
    fn = rg.Function([x, y, z], rg.op.multiply(rg.op.add(x, y), z))
    here = saturate(fn, COMMUTE, isolate=False, progress=False)
    eg = RelayEGraph(fn)
    there = saturate(eg, COMMUTE, time_limit=60, progress=False)
    assert there.mode == "worker" and there.stop_reason == here.stop_reason == "saturated"
    assert [(i.nodes, i.classes) for i in there.iterations] == [(i.nodes, i.classes) for i in here.iterations]
    assert there.matches == here.matches
    assert there.initial_nodes == here.initial_nodes
    assert eg.sizes() == (there.nodes, there.classes)  # the parent's e-graph follows the worker's
    replayed = RelayEGraph.from_journal(eg.journal, eg.root)  # and its journal rebuilds it here
    assert replayed.sizes() == eg.sizes()
    _same_values(fn, eg.extract())


def test_hard_time_limit_stops_an_exploding_iteration():
    fn = _sum_chain(40)
    eg = RelayEGraph(fn)
    report = saturate(eg, EXPLOSIVE, time_limit=2.5, node_limit=None, iter_limit=100, scheduler="simple",
                      progress=False)
    assert report.stop_reason == "time-limit-hard"
    assert report.state_iteration <= len(report.iterations)  # a checkpoint before the killed iteration
    assert "still running at the time limit" in report.notes[0]
    assert (report.nodes, report.classes) == eg.sizes()
    out = eg.extract()
    _same_values(fn, out)
    print(report)


def test_a_killed_worker_leaves_no_temporary_files(monkeypatch):
    from relaygraph.egraph import worker as worker_module

    killed = []  # (the child's temporary directory, what it held as the child was killed)
    kill = worker_module._Worker.kill

    def recording_kill(self):
        if self.proc.poll() is None:
            killed.append((self.tmpdir, os.listdir(self.tmpdir)))
        kill(self)

    monkeypatch.setattr(worker_module._Worker, "kill", recording_kill)
    report = saturate(_sum_chain(40), EXPLOSIVE, time_limit=2.5, node_limit=None, iter_limit=100,
                      scheduler="simple", progress=False)
    assert report.stop_reason == "time-limit-hard"
    assert killed and killed[0][1]  # the child's e-graph had its files there (the bulk input)
    assert not any(os.path.exists(tmpdir) for tmpdir, _ in killed)


def test_a_worker_whose_parent_ends_without_clean_up_removes_its_directory(tmp_path):
    # a study's forked cell ends with os._exit: no atexit, no finalizers in the parent
    script = tmp_path / "parent.py"
    script.write_text(
        "import os, sys\n"
        "import relaygraph as rg\n"
        "from relaygraph.egraph import saturate, worker\n"
        "x = rg.var('x', shape=(2, 3))\n"
        "saturate(rg.Function([x], rg.op.add(x, x)), " + repr(COMMUTE) + ", time_limit=60, progress=False)\n"
        "held = [w for w in worker._IDLE] or [f()._worker for f in worker._HELD if f() is not None]\n"
        "print(held[0].tmpdir, flush=True)\n"
        "os._exit(0)\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    tmpdir = out.stdout.strip()
    assert os.path.basename(tmpdir).startswith("relaygraph-worker-")
    deadline = time.monotonic() + 30  # the child sees its pipe close and ends
    while os.path.exists(tmpdir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(tmpdir)


def test_rule_errors_cross_the_process_boundary():
    x, y = _vars(2)
    fn = rg.Function([x, y], rg.op.add(x, y))
    rules = COMMUTE + '(rewrite (r:add a b) (r:transpose a "None") :ruleset t :name "add-to-transpose")'
    with pytest.raises(rg.RuleError, match="rule add-to-transpose unions terms of different types"):
        saturate(fn, rules, time_limit=60, progress=False)


def test_python_rewrites_run_in_the_parent():
    (x,) = _vars(1)
    fn = rg.Function([x], rg.op.nn.relu(rg.op.add(x, x)))
    rule = _DoubleRule()
    eg = RelayEGraph(fn)
    report = saturate(eg, [rule], time_limit=60, progress=False)
    assert report.stop_reason == "saturated" and rule.python_rewrite.calls == 1
    out = eg.extract("tree", lambda op, attrs, args, out: 5.0 if op == "add" else 1.0)
    assert "multiply" in rg.astext(out)
    _same_values(fn, out)


SMALL_ZOO = ["vgg-11", "lstm", "dcgan", "squeezenet-1.1"]


def _check_zoo_model(name: str, isolate: bool) -> None:
    mod, params = rg.zoo.get(name, small=True)
    rules = rg.load_rules(["rules/algebraic.rules", "rules/fusion.rules"])
    eg = RelayEGraph(mod)
    report = saturate(eg, rules, node_limit=50_000, time_limit=60 if isolate else None, isolate=isolate,
                      progress=False)
    print(f"== {name}\n{report}")
    out = eg.extract("greedy-dag", "latency")
    inputs = rg.zoo.example_inputs(mod, params)
    args = [params.get(p.name_hint, inputs.get(p.name_hint)) for p in mod["main"].params]
    want, got = rg.evaluate(mod, *args), rg.evaluate(rg.IRModule.from_expr(out), *args)
    for w, g in zip(*(v if isinstance(v, tuple) else (v,) for v in (want, got)), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", SMALL_ZOO)
def test_zoo_models_saturate_and_evaluate_equal(name):
    _check_zoo_model(name, isolate=False)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(rg.zoo.MODELS))
def test_every_zoo_model_saturates_under_the_node_limit(name):
    _check_zoo_model(name, isolate=True)


# -- the worker's process and final state ---------------------------------------------------------
from relaygraph.egraph import worker as worker_mod  # noqa: E402


def _idle_pids() -> list[int]:
    return [w.proc.pid for w in worker_mod._IDLE]


def test_the_final_serialization_is_made_when_first_used_and_equals_the_in_process_one():
    fn = _sum_chain(8)
    here = RelayEGraph(fn)
    saturate(here, ASSOC, isolate=False, progress=False)
    eg = RelayEGraph(fn)
    saturate(eg, ASSOC, time_limit=60, progress=False)
    assert eg._final is not None and eg._document is None  # saturation ended without serializing
    doc = eg.document()
    assert eg._final is None
    assert len(doc["nodes"]) == len(here.document()["nodes"])
    ops = lambda d: sorted(n["op"] for n in d["nodes"].values())  # noqa: E731
    assert ops(doc) == ops(here.document())
    _same_values(fn, eg.extract())


def test_a_finished_worker_process_is_reused_by_the_next_saturation():
    fn = _sum_chain(6)
    eg = RelayEGraph(fn)
    saturate(eg, COMMUTE, time_limit=60, progress=False)
    eg.document()  # the worker hands over its e-graph and becomes idle
    pids = _idle_pids()
    assert len(pids) == 1
    eg2 = RelayEGraph(fn)
    saturate(eg2, COMMUTE, time_limit=60, progress=False)
    assert eg2._final._worker.proc.pid == pids[0]
    _same_values(fn, eg2.extract())


def test_a_changed_or_lost_final_state_is_rebuilt_from_the_journal():
    fn = _sum_chain(6)
    eg = RelayEGraph(fn)
    saturate(eg, COMMUTE, time_limit=60, progress=False)
    eg._final._worker.kill()  # the child died while holding the e-graph
    _same_values(fn, eg.extract())
    eg2 = RelayEGraph(fn)
    saturate(eg2, COMMUTE, time_limit=60, progress=False)
    eg2.run_egglog("(run t 1)")  # a change in the parent: the child's state no longer describes it
    assert eg2._final is None
    _same_values(fn, eg2.extract())


def test_held_egraphs_are_bounded_and_a_quick_ones_worker_is_taken_over(monkeypatch):
    fn = _sum_chain(5)
    graphs = []
    for _ in range(3):  # quick saturations: the next one takes over the last one's process
        eg = RelayEGraph(fn)
        saturate(eg, COMMUTE, time_limit=60, progress=False)
        graphs.append(eg)
    held = [g for g in graphs if g._final is not None and g._final._worker is not None]
    assert held == graphs[-1:]
    monkeypatch.setattr(worker_mod, "_REBUILD_CHEAPER", 0.0)  # as if each had taken long
    for _ in range(3):
        eg = RelayEGraph(fn)
        saturate(eg, COMMUTE, time_limit=60, progress=False)
        graphs.append(eg)
    held = [g for g in graphs if g._final is not None and g._final._worker is not None]
    assert held == graphs[-2:]  # new processes, at most two held
    for g in graphs:
        _same_values(fn, g.extract())
