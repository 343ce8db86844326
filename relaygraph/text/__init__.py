"""The Relay text format (TVM's version 0.0.5), both ways: ``parse``/``parse_expr`` read it and
``astext`` prints it."""

from .parser import parse, parse_expr, parse_file
from .printer import astext

__all__ = ["parse", "parse_expr", "parse_file", "astext"]
