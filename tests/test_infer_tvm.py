"""Real Relay text printed by TVM v0.13: every node infers the type TVM printed for it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import relaygraph as rg

HERE = Path(__file__).parent
DATA = HERE / "data" / "tvm-text"  # checked in with the tests: a missing file fails, never skips
TY = re.compile(r"/\* ty=(.*?) \*/")

OUTPUTS = {
    "resnet18.relay": "Tensor[(1, 1000), float32]",
    "mobilenet.relay": "Tensor[(1, 1000), float32]",
    "vgg11.relay": "Tensor[(1, 1000), float32]",
    "dcgan.relay": "Tensor[(1, 3, 64, 64), float32]",
}


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_output_type_matches_tvm(name):
    mod = rg.infer_type(rg.parse((DATA / name).read_text(), source_name=name))
    assert str(mod["main"].ret_type) == OUTPUTS[name]
    assert str(rg.type_of(mod["main"].body)) == OUTPUTS[name]


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_every_printed_type_matches_tvm(name):
    # TVM annotates every binding with /* ty=... */; printing our typed module the same way
    # must give the same types in the same order
    text = (DATA / name).read_text()
    typed = rg.infer_type(rg.parse(text, source_name=name))
    theirs = TY.findall(text)
    ours = TY.findall(rg.astext(typed, show_types=True))
    assert len(theirs) > 10
    assert ours == theirs
