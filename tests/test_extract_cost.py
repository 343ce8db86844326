"""Cost models: node count, FLOPs, bytes, roofline latency with fusion, measured numpy time."""

import json

import pytest

import relaygraph as rg
from relaygraph.egraph import cost
from relaygraph.egraph.extract import from_json
from relaygraph.ir.types import TensorType

X, W, Y = TensorType((64, 256)), TensorType((128, 256)), TensorType((64, 128))
DENSE = ("nn.dense", {}, (X, W), Y)
RELU = ("nn.relu", {}, (Y,), Y)
FUSED = ("fused.custom_dense_relu", {"fused_ops": [DENSE, RELU]}, (X, W), Y)


def test_flops_and_bytes_come_from_the_op_table():
    assert cost.flops(*DENSE) == 2 * 64 * 128 * 256
    assert cost.bytes("add", {}, (Y, Y), Y) == 3 * 64 * 128 * 4
    assert cost.node_count(*DENSE) == 1.0
    # not an operator (a variable, a tuple): free for every model but node_count
    assert cost.flops("Var", {}, (), Y) == cost.latency("Tuple", {}, (), None) == 0.0


def test_latency_is_a_roofline_plus_a_launch_and_machine_figures_are_configurable():
    slow_memory = cost.Machine(peak_flops=1e12, bandwidth=1e9, launch=1e-5)
    lat = cost.make_latency(slow_memory)
    expect = max(cost.flops(*DENSE) / 1e12, cost.bytes(*DENSE) / 1e9) + 1e-5
    assert lat(*DENSE) == pytest.approx(expect)
    fast_flops = cost.make_latency(cost.Machine(peak_flops=1e18, bandwidth=1e9, launch=0.0))
    assert fast_flops(*RELU) == pytest.approx(cost.bytes(*RELU) / 1e9)


def test_a_fused_group_pays_one_launch_and_no_internal_traffic():
    assert cost.flops(*FUSED) == cost.flops(*DENSE) + cost.flops(*RELU)
    assert cost.bytes(*FUSED) == (64 * 256 + 128 * 256 + 64 * 128) * 4  # inputs and output only
    assert cost.latency(*FUSED) < cost.latency(*DENSE) + cost.latency(*RELU)
    with pytest.raises(cost.CostModelError, match="fused_ops"):
        cost.latency("fused.mystery", {}, (X,), Y)


def test_fused_ops_in_the_op_table_cost_themselves():
    table_fused = ("fused.dense_relu", {}, (X, W), Y)
    assert cost.flops(*table_fused) >= cost.flops(*DENSE)
    assert cost.latency(*table_fused) < cost.latency(*DENSE) + cost.latency(*RELU)


def test_symbolic_dims_count_as_configured_and_unknown_dims_are_an_error():
    from relaygraph.ty.dims import sym

    n = sym("n")
    t = TensorType((n, 4))
    assert cost.flops("add", {}, (t, t), t) == 4.0  # n counts as Machine.symbolic_dim = 1
    unknown = TensorType((rg.Any, 4))
    with pytest.raises(cost.CostModelError, match="'\\?' dimension"):
        cost.latency("add", {}, (unknown, unknown), unknown)


def test_measured_times_numpy_once_and_reads_the_cache_after(tmp_path, monkeypatch):
    path = tmp_path / "costs.json"
    model = cost.MeasuredCost(path=str(path), repeats=2, min_seconds=1e-4)
    first = model(*DENSE)
    assert 0 < first < 1.0
    assert model.key(*DENSE) in json.loads(path.read_text())

    def never(*args):
        raise AssertionError("measured again")

    again = cost.MeasuredCost(path=str(path))
    monkeypatch.setattr(again, "_measure", never)
    assert again(*DENSE) == first
    assert again("Var", {}, (), Y) == 0.0


def test_measured_cache_lives_under_the_users_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cost.cache_dir() == str(tmp_path / "relaygraph")
    assert cost.MeasuredCost().path == str(tmp_path / "relaygraph" / "measured_costs.json")


def _relay_egraph():
    """What a Relay bridge writes: op names, attrs, and tensor types in class_data."""
    t = {"shape": [64, 128], "dtype": "float32"}
    return from_json({
        "nodes": {
            "x": {"op": "Var", "eclass": "x", "cost": 0.0},
            "w": {"op": "Var", "eclass": "w", "cost": 0.0},
            "dense": {"op": "nn.dense", "eclass": "d", "children": ["x", "w"]},
            "relu": {"op": "nn.relu", "eclass": "r", "children": ["dense"]},
            "fused": {"op": "fused.custom_dense_relu", "eclass": "r", "children": ["x", "w"], "attrs": {
                "fused_ops": [["nn.dense", {}, [{"shape": [64, 256]}, {"shape": [128, 256]}], t],
                              ["nn.relu", {}, [t], t]]}},
        },
        "root_eclasses": ["r"],
        "class_data": {"x": {"tensor": {"shape": [64, 256]}}, "w": {"tensor": {"shape": [128, 256]}},
                       "d": {"tensor": t}, "r": {"tensor": t}},
    }, name="relay.json")


def test_apply_cost_costs_a_relay_egraph_and_latency_prefers_the_fused_kernel():
    g = _relay_egraph()
    by_flops = rg.extract.apply_cost(g, "flops")
    assert by_flops.costs[g.node_ids.index("dense")] == cost.flops(*DENSE)
    by_latency = rg.extract.apply_cost(g, cost.latency)
    r = rg.extract.ilp(by_latency)
    assert r.choice_ids()["r"] == "fused"
    unfused = {g.class_index("r"): g.node_ids.index("relu"), g.class_index("d"): g.node_ids.index("dense"),
               g.class_index("x"): 0, g.class_index("w"): 1}
    assert r.dag_cost < rg.extract.check(by_latency, unfused)
    assert rg.extract.apply_cost(g, "node-count").costs == [1.0] * 5


def test_apply_cost_needs_types_for_operator_nodes():
    g = from_json({"nodes": {"a": {"op": "nn.relu", "eclass": "a"}}, "root_eclasses": ["a"]}, name="gym.json")
    with pytest.raises(cost.CostModelError, match="gym.json: node .a. \\(nn.relu\\) has no type"):
        rg.extract.apply_cost(g, "latency")
    assert rg.extract.apply_cost(g, "node-count").costs == [1.0]
    with pytest.raises(cost.CostModelError, match="unknown cost model 'speed'"):
        rg.extract.apply_cost(g, "speed")


def test_costs_apply_to_an_egraph_in_relaygraphs_egglog_encoding():
    from egglog import bindings

    from relaygraph.egraph.encoding import schema_program
    from relaygraph.ops import get

    egraph = bindings.EGraph()
    program = schema_program([get("nn.dense"), get("nn.relu")]).splitlines() + [
        '(let $x (RVar "x#1"))', '(let $w (RVar "w#2"))',
        '(let $d (r:nn.dense $x $w "None" "\'\'"))', "(let $r (r:nn.relu $d))",
        *(f'(union (Ty ${v}) (T "Tensor[{shape}, float32]"))'
          for v, shape in (("x", "(64, 256)"), ("w", "(128, 256)"), ("d", "(64, 128)"), ("r", "(64, 128)")))]
    for command in program:
        egraph.run_program(*egraph.parse_program(command))
    root = bindings.Var(bindings.RustSpan("test", 0, 0), "$r")
    g = from_json(json.loads(egraph.serialize([root]).to_json()), name="encoded")
    costed = rg.extract.apply_cost(g, "latency")
    by_op = {g.ops[n]: costed.costs[n] for n in range(g.num_nodes)}
    assert by_op["r:nn.dense"] == pytest.approx(cost.latency(*DENSE))
    assert by_op["r:nn.relu"] == pytest.approx(cost.latency(*RELU))
    assert by_op["RVar"] == by_op["Ty"] == by_op["T"] == 0.0
    assert rg.extract.greedy_dag(costed).dag_cost == pytest.approx(cost.latency(*DENSE) + cost.latency(*RELU))


def test_an_encoded_operator_node_must_give_every_attribute():
    # nn.dense has two attributes (units, out_dtype); a node giving one is refused, not half-read
    g = from_json({"nodes": {"x": {"op": "RVar", "eclass": "x", "children": ["k"]},
                             "k": {"op": '"x#1"', "eclass": "k"}, "u": {"op": '"None"', "eclass": "u"},
                             "d": {"op": "r:nn.dense", "eclass": "d", "children": ["x", "x", "u"]}},
                   "root_eclasses": ["d"]}, name="hand.json")
    with pytest.raises(cost.CostModelError, match="hand.json: node 'd': nn.dense has 2 attribute.s., "
                                                  "the node gives 1"):
        cost.describe_from_encoding(g, g.node_ids.index("d"))
