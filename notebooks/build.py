"""Writes the notebooks from the cell lists below (``python notebooks/build.py``).

Keeping the cells here makes the notebooks reviewable as code; the test suite executes the
generated .ipynb files and fails on any error.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).parent

TOUR = [
    ("md", "# A tour of relaygraph\n\nBuild a Relay program, print it, type it, run it, and "
           "transform it with passes."),
    ("code", "import numpy as np\nimport relaygraph as rg\nfrom relaygraph import transform as T"),
    ("md", "## Build\n\nPython operators build Relay calls; nodes are interned, so equal "
           "structure is the same object and sharing is free. In the drawing below, the shared "
           "`nn.dense` has two arrows out, one into `nn.relu` and one into `add`."),
    ("code", """x = rg.var("x", rg.TensorType((1, 8), "float32"))
w = rg.var("w", rg.TensorType((8, 8), "float32"))
h = rg.op.nn.dense(x, w)
y = rg.op.nn.relu(h) + h
f = rg.Function([x, w], y)
assert rg.op.nn.relu(h) is y.args[0]
f"""),
    ("md", "## Print and parse\n\nThe text format is TVM's (version 0.0.5) in both directions."),
    ("code", """mod = rg.IRModule.from_expr(f)
text = rg.astext(mod)
print(text)
assert rg.alpha_equal(rg.parse(text), mod)"""),
    ("md", "## Types\n\nShapes may be symbolic; sympy keeps them simplified."),
    ("code", """n = rg.ty.sym("n")
data = rg.var("data", rg.TensorType((n, 3, 32, 32), "float32"))
weight = rg.var("weight", rg.TensorType((16, 3, 3, 3), "float32"))
conv = rg.op.nn.conv2d(data, weight, strides=(2, 2), padding=(1, 1))
typed = rg.infer_type(rg.IRModule.from_expr(rg.Function([data, weight], conv)))
typed["main"].ret_type"""),
    ("md", "## Evaluate"),
    ("code", """rng = np.random.default_rng(0)
xs, ws = rng.standard_normal((1, 8), dtype="float32"), rng.standard_normal((8, 8), dtype="float32")
out = rg.evaluate(mod, xs, ws)
assert np.allclose(out, np.maximum(xs @ ws.T, 0) + xs @ ws.T, atol=1e-5)
out"""),
    ("md", "## Passes\n\nA real model from the zoo, through TVM's classic pipeline. The fused program "
           "computes the same values."),
    ("code", """model, params = rg.zoo.get("resnet-18", small=True)
with T.PassContext(opt_level=2):
    fused = T.Sequential([T.InferType(), T.SimplifyInference(), T.InferType(), T.FuseOps()])(model)
groups = [n for n in rg.post_order(fused["main"]) if isinstance(n, rg.Function) and n.attrs.get("Primitive")]
print(len(groups), "fused groups")
image = rng.standard_normal([int(d) for d in model["main"].params[0].type_annotation.shape], dtype="float32")
a = rg.evaluate(model, image, **params)
b = rg.evaluate(fused, image, **params)
assert np.allclose(a, b, rtol=1e-4, atol=1e-5)
fused["main"].body.op"""),
    ("md", "ANF and back, with a timing instrument:"),
    ("code", """timing = T.PassTimingInstrument()
with T.PassContext(instruments=[timing]):
    anf = T.ToANormalForm()(mod)
    gnf = T.ToGraphNormalForm()(anf)
print(rg.astext(anf))
print(timing.render())
assert rg.alpha_equal(gnf, mod)"""),
    ("md", "## Dataflow patterns\n\nTVM's pattern language (`rg.dataflow_pattern`): match a chain on the "
           "ResNet-18 above, rewrite every match with a callback, and partition the matches into "
           "functions, as BYOC's MergeComposite does. Every result computes the same values."),
    ("code", """from relaygraph.dataflow_pattern import DFPatternCallback, is_op, rewrite, wildcard

main = rg.infer_type(model)["main"]
conv = is_op("nn.conv2d")(wildcard(), wildcard())
bn = is_op("nn.batch_norm")(conv, wildcard(), wildcard(), wildcard(), wildcard())
conv_bn_relu = is_op("nn.relu")(bn[0])
print(sum(conv_bn_relu.match(n) for n in rg.post_order(main)), "conv + batch_norm + relu chains")


class ReluToClip(DFPatternCallback):
    def __init__(self):
        super().__init__()
        self.x = wildcard()
        self.pattern = is_op("nn.relu")(self.x)

    def callback(self, pre, post, node_map):
        return rg.op.clip(node_map[self.x][0], a_min=0.0, a_max=float("inf"))


clipped = rewrite(ReluToClip(), main)
parted = conv_bn_relu.partition(main, {"Composite": "conv_bn_relu"})
groups = [n for n in rg.post_order(parted) if isinstance(n, rg.Function) and "Composite" in n.attrs]
print(len(groups), "composite functions, e.g.", groups[0].attrs["PartitionedFromPattern"])
for variant in (clipped, parted):
    got = rg.evaluate(rg.IRModule.from_expr(variant), image, **params)
    assert np.allclose(a, got, rtol=1e-4, atol=1e-5)
groups[0]"""),
]

RULE_TEXT = """
rule relu-idempotent : nn.relu(nn.relu(?x)) => nn.relu(?x)
rule exp-of-sum      : exp(add(?a, ?b)) <=> multiply(exp(?a), exp(?b))
rule wrong-swap      : subtract(?a, ?b) => subtract(?b, ?a)
"""

RULES = [
    ("md", "# Authoring a rule\n\nWrite a rule in Relay's own syntax, check that it is sound, watch it "
           "fire in the e-graph, and read the saturation report."),
    ("code", """import numpy as np
import relaygraph as rg
from relaygraph.rewrite import parse_rules
from relaygraph.rewrite.soundness import check_rules
from relaygraph.egraph import RelayEGraph, saturate"""),
    ("md", "## Write rules\n\n`?x` is a pattern variable; `=>` rewrites one way, `<=>` both ways; "
           "conditions follow `if`. One rule here is wrong on purpose."),
    ("code", f"text = {RULE_TEXT!r}\n"
             "rules = parse_rules(text, 'notebook.rules', ruleset='mine')\n"
             "[r.name for r in rules]"),
    ("md", "## Check soundness\n\nBoth sides are evaluated on random inputs of random valid shapes; the "
           "wrong rule comes back with a counterexample."),
    ("code", """results = check_rules(rules)
for r in results:
    print(f"{r.rule:<18} {r.status}")
bad = [r for r in results if r.status == "unsound"]
assert [r.rule for r in bad] == ["wrong-swap"]
print(bad[0].detail)"""),
    ("md", "## Watch the sound ones fire"),
    ("code", """x = rg.var("x", rg.TensorType((4, 4), "float32"))
y = rg.var("y", rg.TensorType((4, 4), "float32"))
prog = rg.IRModule.from_expr(rg.Function([x, y], rg.op.nn.relu(rg.op.nn.relu(rg.op.exp(rg.op.add(x, y))))))
sound = [r for r in rules if r.name != "wrong-swap"]
egraph = RelayEGraph(prog)
report = saturate(egraph, sound, node_limit=1000, time_limit=None, progress=False)
print(report)
assert report.matches.get("relu-idempotent", 0) >= 1"""),
    ("code", """best = rg.IRModule.from_expr(egraph.extract("tree", "node-count"))
print(rg.astext(best))
xs, ys = np.random.default_rng(0).standard_normal((2, 4, 4), dtype="float32")
assert np.allclose(rg.evaluate(prog, xs, ys), rg.evaluate(best, xs, ys), rtol=1e-5)"""),
    ("md", "## The shipped rule sets\n\nThe same checker runs over `rules/` (`relaygraph rules check rules/`)."),
    ("code", """from pathlib import Path
shipped = rg.load_rules(Path(rg.__file__).resolve().parents[1] / "rules" / "algebraic.rules")
print(len(shipped), "rules in algebraic.rules, e.g.", ", ".join(r.name for r in shipped[:6]))"""),
]

EXTRACTION = [
    ("md", "# Extraction strategies and cost models, side by side\n\nTree-optimal, greedy DAG and ILP "
           "extraction on a saturated zoo model under several cost models, and on published "
           "extraction-gym e-graphs."),
    ("code", """import time
from pathlib import Path
import matplotlib.pyplot as plt
import relaygraph as rg
from relaygraph import extract as ex
from relaygraph.egraph import RelayEGraph, saturate
from relaygraph.egraph.optimize import bind_params, default_rule_files"""),
    ("md", "## A saturated BERT layer stack"),
    ("code", """mod, params = rg.zoo.get("bert", small=True)
mod = rg.infer_type(bind_params(mod, params))
rules = [r for f in default_rule_files() for r in rg.load_rules(f)]
egraph = RelayEGraph(mod)
report = saturate(egraph, rules, node_limit=20_000, time_limit=None, progress=False)
print(report.stop_reason, report.nodes, "e-nodes")"""),
    ("code", """rows = []
for cost in ["node-count", "flops", "bytes", "latency"]:
    graph = egraph.extraction_graph(cost)
    for name, fn in [("tree", ex.tree), ("greedy-dag", ex.greedy_dag),
                     ("ilp", lambda g: ex.ilp(g, time_limit=30))]:
        start = time.perf_counter()
        result = fn(graph)
        rows.append((cost, name, ex.check(graph, result.choice), time.perf_counter() - start,
                     result.optimal))
for row in rows:
    print(f"{row[0]:<11} {row[1]:<11} DAG cost {row[2]:<12.6g} {row[3]*1e3:8.1f} ms  optimal={row[4]}")"""),
    ("code", """fig, axes = plt.subplots(1, 4, figsize=(14, 3))
for ax, cost in zip(axes, ["node-count", "flops", "bytes", "latency"]):
    sel = [r for r in rows if r[0] == cost]
    ax.bar([r[1] for r in sel], [r[2] for r in sel])
    ax.set_title(f"cost model: {cost}")
    ax.set_xlabel("extractor")
    ax.set_ylabel("DAG cost (model units)")
fig.suptitle("BERT (small), saturated: DAG cost of each extractor's answer")
fig.tight_layout()"""),
    ("md", "## Published e-graphs (extraction-gym)\n\n`choice.json` is built so that tree-optimal and "
           "DAG-optimal answers differ."),
    ("code", """gym = Path(rg.__file__).resolve().parents[1] / "tests" / "data" / "extraction-gym"
for path in [gym / "data/dummy_examples/choice.json", gym / "data/tensat/vgg_acyclic.json"]:
    g = ex.load_gym(path)
    costs = {n: ex.check(g, f(g).choice) for n, f in [("tree", ex.tree), ("greedy-dag", ex.greedy_dag),
                                                      ("ilp", lambda g: ex.ilp(g, time_limit=30))]}
    print(path.name, g.num_nodes, "nodes:", {k: round(v, 4) for k, v in costs.items()})
    assert costs["ilp"] <= min(costs["tree"], costs["greedy-dag"]) + 1e-9"""),
]

ONNX = [
    ("md", "# ONNX in and out\n\nImport a transformer as `torch.onnx.export` writes it, look at it, "
           "optimize it, export it back to ONNX, and run the result in onnxruntime when it is installed. "
           "Every step is checked against ONNX's own reference evaluator."),
    ("code", """from pathlib import Path

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

import relaygraph as rg

path = Path(rg.__file__).resolve().parents[1] / "tests" / "data" / "onnx" / "bert_encoder.onnx"
model = onnx.load(str(path))
for v in model.graph.input:
    dims = [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
    print("input ", v.name, dims)
print(len(model.graph.node), "nodes:", sorted({n.op_type for n in model.graph.node}))"""),
    ("md", "## Import\n\n`from_onnx` returns the module and its parameters (bound as constants by "
           "default). ONNX's `dim_param`s become symbolic dims, and type inference keeps them."),
    ("code", """mod, params = rg.frontend.from_onnx(path)
typed = rg.infer_type(mod)
main = typed["main"]
for p in main.params:
    print(p.name_hint, typed.type_of(p))
print("result", main.ret_type)
print("\\n".join(rg.astext(mod).splitlines()[:12]))"""),
    ("md", "## Look at it\n\nThe same inputs through relaygraph's evaluator and ONNX's reference evaluator."),
    ("code", """rng = np.random.default_rng(0)
feeds = {"hidden_states": rng.standard_normal((2, 8, 64)).astype(np.float32),
         "attention_mask": np.array([[1] * 8, [1] * 5 + [0] * 3], dtype=np.int64)}
reference = ReferenceEvaluator(model).run(None, feeds)[0]
names = {p.name_hint for p in mod["main"].params}
weights = {k: v for k, v in params.items() if k in names}
ours = rg.evaluate(mod, **feeds, **weights)
assert np.allclose(ours, reference, rtol=1e-4, atol=1e-4)
ops = {}
for n in rg.post_order(mod["main"]):
    if isinstance(n, rg.Call) and isinstance(n.op, rg.Op):
        ops[n.op.name] = ops.get(n.op.name, 0) + 1
print(np.abs(ours - reference).max(), dict(sorted(ops.items())))"""),
    ("md", "## Optimize\n\nWith the shapes fixed at import, equality saturation and extraction rewrite the "
           "encoder; the result is standard Relay with `Primitive=1` groups."),
    ("code", """shape = {k: v.shape for k, v in feeds.items()}
static, static_params = rg.frontend.from_onnx(path, shape=shape)
names = {p.name_hint for p in static["main"].params}
res = rg.optimize(static, params={k: v for k, v in static_params.items() if k in names},
                  node_limit=5000, iter_limit=4, time_limit=30, extractor="greedy-dag")
print(res.summary())
groups = [n for n in rg.post_order(res.module["main"])
          if isinstance(n, rg.Function) and n.attrs.get("Primitive")]
print(len(groups), "fused groups")
optimized = rg.evaluate(res.module, **feeds)
assert np.allclose(optimized, reference, rtol=1e-4, atol=1e-4)"""),
    ("md", "## Export\n\n`to_onnx` expands the fused groups and writes a checked ONNX model."),
    ("code", """exported = rg.frontend.to_onnx(res.module, name="bert_encoder_optimized")
onnx.checker.check_model(exported, full_check=True)
again = ReferenceEvaluator(exported).run(None, feeds)[0]
assert np.allclose(again, reference, rtol=1e-4, atol=1e-4)
print(len(exported.graph.node), "ONNX nodes, opset", exported.opset_import[0].version)"""),
    ("md", "## Run it in onnxruntime\n\n(`pip install 'relaygraph[bench]'` installs it.)"),
    ("code", """try:
    import onnxruntime as ort
except ImportError:
    print("onnxruntime is not installed; the exported model runs in any ONNX runtime")
else:
    session = ort.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    out = session.run(None, feeds)[0]
    assert np.allclose(out, reference, rtol=1e-4, atol=1e-4)
    print("onnxruntime", ort.__version__, "agrees:", np.abs(out - reference).max())"""),
]

SYNTHESIS = [
    ("md", "# Rule synthesis\n\nInfer rewrite rules from enumerated terms (Ruler/Enumo, for tensors): "
           "enumerate well-typed terms over a few ops, fingerprint them on random inputs of several "
           "shapes and dtypes, keep the equalities the soundness checker passes and that the rules "
           "kept before cannot derive. Then compare with the hand-written rules and optimize a model."),
    ("code", """from pathlib import Path
import relaygraph as rg
from relaygraph.egraph.optimize import default_rule_files
from relaygraph.rewrite.rule import Rule
from relaygraph.synth.derive import base_name, format_derivation, rule_derivation

RULES = Path(rg.__file__).resolve().parents[1] / "rules"
result = rg.rules.synthesize(["add", "multiply", "negative"], size=2, literals=(0.0, -1.0), progress=False)
print(result.text)
result.stats"""),
    ("md", "Every synthesized rule passes the soundness checker (`relaygraph rules check`):"),
    ("code", """synth = result.load()
checked = rg.rules.check_rules(synth)
assert all(r.status == "sound" for r in checked)
len(checked)"""),
    ("md", "## Against the hand-written rules\n\nWhich hand-written rules over these ops the "
           "synthesized set derives (within 5 iterations), and how:"),
    ("code", """ops = {"add", "multiply", "negative"}
from relaygraph.rewrite.pattern import PCall, walk
hand = [r for r in rg.load_rules(RULES / "algebraic.rules") if isinstance(r, Rule)
        and {n.op for p in (*r.lhs, *r.rhs) for n in walk(p) if isinstance(n, PCall)} <= ops]
derived = 0
for r in hand:
    d = rule_derivation(r, synth, iterations=5, trials=1)
    ok = d is not None and d.proved
    derived += ok
    print(f"{r.name:18} {'derived: ' + format_derivation(d) if ok else 'not derived'}")
print(f"{derived}/{len(hand)} derived")"""),
    ("md", "And the synthesized rules the hand-written set cannot derive:"),
    ("code", """new = [r for r in synth
       if not rule_derivation(r, [h for h in rg.load_rules(RULES / "algebraic.rules")
                                  if isinstance(h, Rule)], iterations=5, trials=1).proved]
for r in new:
    print(r.text.split(":", 1)[1].strip())"""),
    ("md", "Redundancy in the hand-written file: rules derivable from the others "
           "(`relaygraph rules check --redundant`)."),
    ("code", """hand_all = rg.load_rules(RULES / "algebraic.rules")
for rule, d in rg.rules.redundant(hand_all, iterations=3, trials=1):
    print(f"{rule.name}: {format_derivation(d)}")"""),
    ("md", "## In optimize\n\nThe synthesized rules next to the default ones, on a zoo model; the "
           "optimized program is checked against the original on random inputs."),
    ("code", """model, params = rg.zoo.get("nasrnn", small=True)
options = dict(cost="latency", extractor="greedy-dag", params=params, iter_limit=6, time_limit=None)
base = rg.optimize(model, **options)
more = rg.optimize(model, rules=[*default_rule_files(), *synth], **options)
assert more.check_passed is not False and base.check_passed is not False
print(f"latency cost: default rules {base.cost_after:.6g}, "
      f"with the synthesized rules {more.cost_after:.6g}")"""),
    ("md", "## A rule that pays\n\n`vit-sima` is a vision transformer with SimA's softmax-free "
           "attention, written `(Q K^T) V` as the paper's equation reads. With more tokens than "
           "channels per head, `Q (K^T V)` does less work, and the hand-written rules have no "
           "associativity for `nn.batch_matmul`. Synthesis over two ops finds it in seconds:"),
    ("code", """synthesized = rg.rules.synthesize(["nn.batch_matmul", "transpose"], size=2, progress=False)
products = synthesized.load()
for r in products:
    print(r.text.split(":", 1)[1].strip())"""),
    ("md", "One SimA block, 64 tokens of 16 channels per head, under the FLOPs cost model:"),
    ("code", """model, params = rg.zoo.get("vit-sima", num_layers=1, width=64, heads=4, image_size=64,
                           patch_size=8, num_classes=10)
options = dict(cost="flops", extractor="greedy-dag", params=params, iter_limit=6, time_limit=None)
base = rg.optimize(model, **options)
more = rg.optimize(model, rules=[*default_rule_files(), *products], **options)
assert base.check_passed and more.check_passed and more.cost_after < base.cost_after
print(f"FLOPs: default rules {base.cost_after:.4g}, with the synthesized rules {more.cost_after:.4g} "
      f"({more.cost_after / base.cost_after:.3f}x)")"""),
]

NOTEBOOKS = {"01_tour.ipynb": TOUR, "02_rule_authoring.ipynb": RULES,
             "03_extraction_comparison.ipynb": EXTRACTION, "04_onnx.ipynb": ONNX,
             "05_rule_synthesis.ipynb": SYNTHESIS}


def build(cells) -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.cells = [new_markdown_cell(src) if kind == "md" else new_code_cell(src) for kind, src in cells]
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i}"  # not random: rebuilding an unchanged notebook changes nothing
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def main() -> None:
    for name, cells in NOTEBOOKS.items():
        nbformat.write(build(cells), HERE / name)
        print("wrote", HERE / name)


if __name__ == "__main__":
    main()
