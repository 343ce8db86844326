"""ONNX import and export (the onnx package reads and writes the protobuf)."""

from .onnx_export import to_onnx  # noqa: F401 - the public API
