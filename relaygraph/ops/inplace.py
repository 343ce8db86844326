"""In-place epilogue steps the fused kernels share, written the way numpy runs them fastest.

``np.maximum(y, 0)`` with a scalar runs numpy's scalar-operand loop, which is not vectorised for
maximum: measured here on float32, 0.5-1 ns per value against 0.2-0.25 ns when the second
operand is a row of zeros broadcast over ``y`` seen as rows (the same loop ``np.add`` takes), and
about 2x ``np.add`` either way. The result is the same ``np.maximum`` (NaN stays NaN).
"""

from __future__ import annotations

import numpy as np

__all__ = ["relu", "relu_in_place"]

# Values per row: long enough for the vector loop; the zero row (32 KB) fits in L1. With rows of
# 1024-4096 values, a relu on 32x112x112 float32 took 0.9-1.1 ms instead of 0.10-0.13 in some
# processes (after a batch norm had run a while) whenever the zero row began where its allocation
# does, as it always did: MobileNet's original relus measured 0.65-1.05 ms in its program. Rows
# of 8192 took 0.07-0.09 ms at each of 64 offsets of the row and two placements of the output.
# Why the shorter rows stalled is not known.
_ROW = 8192
_ZERO_ROWS: dict = {}


def _zero_row(dtype: np.dtype) -> np.ndarray:
    row = _ZERO_ROWS.get(dtype)
    if row is None:
        row = np.zeros(_ROW, dtype)
        row.setflags(write=False)
        _ZERO_ROWS[dtype] = row
    return row


def relu_in_place(y: np.ndarray) -> np.ndarray:
    """``max(y, 0)`` written into the writeable array ``y``, which is returned."""
    return _relu_into(y, y)


def relu(x: np.ndarray) -> np.ndarray:
    """``max(x, 0)`` in a new array (``nn.relu``'s kernel: the original program's relus run the
    same loop as the fused kernels' epilogues)."""
    x = np.asarray(x)
    if x.dtype.kind != "f" or not x.flags.c_contiguous or x.size < _ROW:
        return np.maximum(x, x.dtype.type(0))
    return _relu_into(x, np.empty_like(x))


def _relu_into(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    if x.size < _ROW or x.dtype.kind != "f" or not x.flags.c_contiguous or not out.flags.c_contiguous:
        return np.maximum(x, x.dtype.type(0), out=out)  # (size first: flags cost more than a small max)
    flat, dest = x.reshape(-1), out.reshape(-1)
    zeros = _zero_row(x.dtype)
    head = flat.size - flat.size % _ROW
    np.maximum(flat[:head].reshape(-1, _ROW), zeros, out=dest[:head].reshape(-1, _ROW))
    if head < flat.size:
        np.maximum(flat[head:], zeros[:flat.size - head], out=dest[head:])
    return out
