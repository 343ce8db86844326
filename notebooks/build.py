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
           "structure is the same object and sharing is free."),
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
]

NOTEBOOKS = {"01_tour.ipynb": TOUR}


def build(cells) -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.cells = [new_markdown_cell(src) if kind == "md" else new_code_cell(src) for kind, src in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def main() -> None:
    for name, cells in NOTEBOOKS.items():
        nbformat.write(build(cells), HERE / name)
        print("wrote", HERE / name)


if __name__ == "__main__":
    main()
