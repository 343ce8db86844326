"""Numeric literals in TVM's rules, both ways.

Reading: integers without a suffix are int32 (int64 when they do not fit), ``i16``/``i32``/
``i64`` pick the width; floats need a suffix (``1.5f`` is float32, ``3f16``, ``2f64``); a minus
glued to the digits is part of the literal; ``inff`` is infinity. Printing: TVM's shortest
readable form (``1f``, ``2i64``, ``1e-05f``), with more digits only when the short form would
not read back to the same value.
"""

from __future__ import annotations

import math
import re

import numpy as np

__all__ = ["LiteralError", "parse_number", "parse_attr_number", "format_float", "scalar_literal"]

_NUMBER = re.compile(r"(-?)(?:(inf|nan)|([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?))(?:([fi])([0-9]*))?")
_INT_WIDTHS = {"16": "int16", "32": "int32", "64": "int64", "": "int32"}
_FLOAT_WIDTHS = {"16": "float16", "32": "float32", "64": "float64", "": "float32"}
_NP_FLOAT = {"float16": np.float16, "float32": np.float32, "float64": np.float64}
_INT_RANGE = {"int16": 2**15, "int32": 2**31, "int64": 2**63}


class LiteralError(ValueError):
    """A literal that TVM's rules reject; the message says why."""


def _split(text: str):
    m = _NUMBER.fullmatch(text)
    if m is None:
        raise LiteralError(f"invalid number `{text}`")
    sign, special, digits, suffix, width = m.groups()
    return sign == "-", special, digits, suffix, width


def parse_number(text: str) -> tuple[object, str]:
    """The value and dtype of a numeric literal in an expression."""
    negative, special, digits, suffix, width = _split(text)
    if suffix == "f" or special:
        if suffix != "f":
            raise LiteralError(f"invalid number `{text}` (infinity is written inff)")
        dtype = _FLOAT_WIDTHS.get(width)
        if dtype is None:
            raise LiteralError(f"invalid float suffix `f{width}` in `{text}` (use f16, f32 or f64)")
        value = float(special or digits)
        value = -value if negative else value
        with np.errstate(over="ignore"):
            overflows = math.isfinite(value) and not np.isfinite(_NP_FLOAT[dtype](value))
        if overflows:
            raise LiteralError(f"`{text}` does not fit in {dtype}")
        return value, dtype
    if suffix is None and not digits.isdigit():
        raise LiteralError(f"the floating-point literal `{text}` needs a dtype suffix: write "
                           f"`{text}f` (float32), `{text}f16` or `{text}f64`")
    if not digits.isdigit():
        raise LiteralError(f"invalid integer `{text}`")
    value = -int(digits) if negative else int(digits)
    if suffix is None:
        dtype = "int32" if -(2**31) <= value < 2**31 else "int64"
    else:
        dtype = _INT_WIDTHS.get(width)
        if dtype is None:
            raise LiteralError(f"invalid integer suffix `i{width}` in `{text}` (use i16, i32 or i64)")
    bound = _INT_RANGE[dtype]
    if not -bound <= value < bound:
        raise LiteralError(f"the integer `{text}` does not fit in {dtype}")
    return value, dtype


def parse_attr_number(text: str) -> int | float:
    """An attribute value: a Python int, or a float (kept in double precision, as TVM does)."""
    value, dtype = parse_number(text)
    return float(value) if dtype.startswith("float") else int(value)


def format_float(value: float, dtype: str = "float64") -> str:
    """The shortest ``%g`` text (TVM prints with 6 digits) that reads back to ``value``."""
    if math.isinf(value):
        return "-inf" if value < 0 else "inf"
    cast = _NP_FLOAT[dtype]
    target = cast(value)
    for digits in range(6, 18):
        text = f"{value:.{digits}g}"
        back = cast(np.float32(float(text))) if dtype == "float16" else cast(float(text))
        if back == target and math.copysign(1.0, float(back)) == math.copysign(1.0, float(target)):
            return text
    return repr(float(value))


def scalar_literal(array: np.ndarray) -> str | None:
    """A rank-0 constant as TVM prints it (``1``, ``2i64``, ``1.5f``, ``True``), or None when
    TVM's text has no literal for it (other dtypes, NaN, infinities other than float32)."""
    dtype = str(array.dtype)
    value = array.item()
    if dtype == "bool":
        return "True" if value else "False"
    if dtype == "int32":
        return str(value)
    if dtype in ("int64", "int16"):
        return f"{value}i{dtype[3:]}"
    if dtype not in _NP_FLOAT or math.isnan(value):
        return None
    if math.isinf(value):
        return ("-inff" if value < 0 else "inff") if dtype == "float32" else None
    suffix = {"float32": "f", "float16": "f16", "float64": "f64"}[dtype]
    return format_float(value, dtype) + suffix
