"""Model formats in and out: ONNX import (``from_onnx``) and export (``to_onnx``); the onnx
package reads and writes the protobuf."""

from __future__ import annotations

__all__ = ["from_onnx", "to_onnx"]


def __getattr__(name: str):
    # onnx is a heavy import: load it on first use, not with ``import relaygraph``
    if name == "from_onnx":
        from .onnx_import import from_onnx

        return from_onnx
    if name == "to_onnx":
        from .onnx_export import to_onnx

        return to_onnx
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
