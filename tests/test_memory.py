"""The allocator's thresholds pinned by the executor (relaygraph.eval.memory): a block of a few MB
then comes from the heap and stays with the process, where glibc's default maps it fresh from the
OS on every allocation."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from relaygraph.eval.memory import _glibc

_CHILD = r"""
import ctypes, json, sys, warnings
import numpy as np
import relaygraph as rg
from relaygraph.eval.memory import allocator_pinned

class Info(ctypes.Structure):
    _fields_ = [(f, ctypes.c_size_t) for f in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
before = allocator_pinned()
x = rg.var("x", shape=(2, 2))
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    rg.evaluate(rg.Function([x], rg.op.add(x, x)), np.ones((2, 2), "float32"))  # compiles a plan
mapped = libc.mallinfo2().hblkhd
block = np.ones(16 << 20, dtype=np.uint8)  # 16 MB
print(json.dumps({"warned": [str(w.message) for w in seen], "before": before, "pinned": allocator_pinned(),
                  "mapped": libc.mallinfo2().hblkhd - mapped}))
"""


def _child(**env) -> dict:
    import json

    environ = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "RELAYGRAPH_MALLOC"))}
    done = subprocess.run([sys.executable, "-c", _CHILD], env={**environ, **env}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


glibc = pytest.mark.skipif(_glibc() is None or not hasattr(_glibc(), "mallinfo2"),
                           reason="needs glibc 2.33 or later (mallinfo2)")


@glibc
def test_the_executor_pins_the_thresholds():
    got = _child()
    assert got["before"] is False and got["pinned"] is True and got["warned"] == []
    assert got["mapped"] < 1 << 20  # the 16 MB block is on the heap


@glibc
@pytest.mark.parametrize("env", [{"RELAYGRAPH_MALLOC": "default"}, {"MALLOC_MMAP_THRESHOLD_": "131072"}])
def test_the_allocator_is_left_alone_when_asked(env):
    got = _child(**env)
    assert got["pinned"] is False
    assert got["mapped"] >= 16 << 20  # glibc's default maps it fresh


@glibc
def test_an_unknown_choice_is_warned_about_and_pins():
    got = _child(RELAYGRAPH_MALLOC="pinnned")
    assert got["pinned"] is True and got["mapped"] < 1 << 20
    assert any("RELAYGRAPH_MALLOC='pinnned' is not understood" in w for w in got["warned"])
    named = _child(RELAYGRAPH_MALLOC="pinned")
    assert named["pinned"] is True and named["warned"] == []
