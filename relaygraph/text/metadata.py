"""The ``#[metadata]`` section: TVM's JSON object graph holding tensor constants.

A tensor constant prints as ``meta[relay.Constant][k]`` and its value lives in the section,
in the form TVM's ``SaveJSON`` writes and ``LoadJSON`` reads: a node list whose root is a Map
from type key to an Array of nodes, with ``relay.Constant`` nodes pointing into
``b64ndarrays``, base64 NDArrays in DLPack's layout (magic, reserved, device, ndim, dtype,
shape, byte size, little-endian data). Dtype, shape and bytes round-trip exactly.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct

import numpy as np

from ..ir.expr import Constant

__all__ = ["MetadataError", "read_metadata", "write_metadata", "encode_ndarray", "decode_ndarray"]

_MAGIC = 0xDD5E40F096B4A13F
_HEADER = struct.Struct("<QQiii")  # magic, reserved, device type, device id, ndim
_DTYPE = struct.Struct("<BBH")  # DLPack type code, bits, lanes
_CODES = {0: "int", 1: "uint", 2: "float"}
_TVM_VERSION = "0.13.0"


class MetadataError(ValueError):
    """A metadata section that cannot be read; the message says what is wrong."""


def decode_ndarray(data: bytes) -> np.ndarray:
    """A numpy array from TVM's binary NDArray format."""
    try:
        magic, _, device_type, _, ndim = _HEADER.unpack_from(data, 0)
        if magic != _MAGIC:
            raise MetadataError("an NDArray in the metadata has a bad magic number")
        if device_type != 1:
            raise MetadataError(f"an NDArray in the metadata is on device type {device_type}, not CPU")
        code, bits, lanes = _DTYPE.unpack_from(data, _HEADER.size)
        offset = _HEADER.size + _DTYPE.size
        shape = struct.unpack_from(f"<{ndim}q", data, offset)
        offset += 8 * ndim
        (nbytes,) = struct.unpack_from("<q", data, offset)
        offset += 8
    except struct.error:
        raise MetadataError("an NDArray in the metadata is truncated") from None
    if lanes != 1 or code not in _CODES:
        raise MetadataError(f"unsupported NDArray dtype (code {code}, {bits} bits, {lanes} lanes)")
    dtype = "bool" if (code, bits) == (1, 1) else f"{_CODES[code]}{bits}"
    try:
        np_dtype = np.dtype(dtype)
    except TypeError:
        raise MetadataError(f"unsupported NDArray dtype {dtype}") from None
    count = int(np.prod(shape, dtype=np.int64))
    if nbytes != count * np_dtype.itemsize or len(data) < offset + nbytes:
        raise MetadataError(f"an NDArray in the metadata has {nbytes} data bytes for shape "
                            f"{tuple(shape)} of {dtype}")
    flat = np.frombuffer(data, dtype=np_dtype.newbyteorder("<"), count=count, offset=offset)
    return flat.astype(np_dtype).reshape(shape)


def encode_ndarray(array: np.ndarray) -> bytes:
    """TVM's binary NDArray format of a numpy array."""
    dtype = str(array.dtype)
    if dtype == "bool":
        code, bits = 1, 1
    else:
        kind = {"i": 0, "u": 1, "f": 2}[array.dtype.kind]
        code, bits = kind, array.dtype.itemsize * 8
    data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
    return b"".join([
        _HEADER.pack(_MAGIC, 0, 1, 0, array.ndim),
        _DTYPE.pack(code, bits, 1),
        struct.pack(f"<{array.ndim}q", *array.shape),
        struct.pack("<q", len(data)),
        data,
    ])


def read_metadata(text: str) -> dict[str, list]:
    """The metadata table: type key -> list of entries (Constants, or None for other kinds)."""
    try:
        graph = json.loads(text)
        nodes = graph["nodes"]
        arrays = graph.get("b64ndarrays", [])
        root = nodes[graph["root"]]
    except json.JSONDecodeError as exc:
        raise MetadataError(f"the metadata section is not valid JSON: {exc.msg} "
                            f"(line {exc.lineno}, column {exc.colno} of the section)") from None
    except (KeyError, IndexError, TypeError):
        raise MetadataError("the metadata section is not a TVM object graph (root, nodes)") from None
    if root.get("type_key") != "Map":
        raise MetadataError("the metadata section's root is not a Map")
    table: dict[str, list] = {}
    decoded: dict[int, Constant] = {}
    try:
        for key, array_index in zip(root["keys"], root["data"], strict=True):
            entries = []
            for index in nodes[array_index].get("data", []):
                node = nodes[index]
                if node.get("type_key") != "relay.Constant":
                    entries.append(None)
                    continue
                i = int(node["attrs"]["data"])
                if i not in decoded:
                    raw = base64.b64decode(arrays[i], validate=True)
                    decoded[i] = Constant(decode_ndarray(raw))
                entries.append(decoded[i])
            table[key] = entries
    except (KeyError, IndexError, TypeError, ValueError, binascii.Error) as exc:
        if isinstance(exc, MetadataError):
            raise
        raise MetadataError(f"the metadata section is malformed ({type(exc).__name__}: {exc})") from None
    return table


def write_metadata(constants: list[Constant]) -> str:
    """The ``#[metadata]`` JSON for the given constants, as TVM writes it."""
    n = len(constants)
    nodes = [
        '{\n      "type_key": ""\n    }',
        '{\n      "type_key": "Map",\n      "keys": [\n        "relay.Constant"\n      ],\n'
        '      "data": [2]\n    }',
        '{\n      "type_key": "Array",\n      "data": [' + ", ".join(str(5 + i) for i in range(n))
        + ']\n    }',
        '{\n      "type_key": "VirtualDevice",\n      "attrs": {\n        "device_type_int": "-1",\n'
        '        "memory_scope": "4",\n        "target": "0",\n        "virtual_device_id": "-1"\n'
        '      }\n    }',
        '{\n      "type_key": "runtime.String"\n    }',
    ]
    for i in range(n):
        nodes.append('{\n      "type_key": "relay.Constant",\n      "attrs": {\n'
                     '        "_checked_type_": "0",\n        "data": "' + str(i) + '",\n'
                     '        "span": "0",\n        "virtual_device_": "3"\n      }\n    }')
    blobs = [base64.b64encode(encode_ndarray(c.data)).decode("ascii") for c in constants]
    arrays = ("[\n    " + ",\n    ".join(f'"{b}"' for b in blobs) + "\n  ]") if blobs else "[]"
    return ('{\n  "root": 1,\n  "nodes": [\n    ' + ",\n    ".join(nodes) + "\n  ],\n"
            f'  "b64ndarrays": {arrays},\n  "attrs": {{"tvm_version": "{_TVM_VERSION}"}}\n}}')
