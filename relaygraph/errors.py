"""The errors relaygraph raises to its users, and the one format for source diagnostics.

A diagnostic names ``file:line:column``, shows the source line and puts a caret under the
column, so every error about text (programs, rule files) reads the same:

    model.relay:3:14: error: unbound variable %y
      %1 = add(%x, %y);
                   ^
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .ir.node import NodeError

__all__ = [
    "RelayError", "NodeError", "Span", "ParseError", "RelayTypeError", "RuleError", "EvalError",
    "UnknownNameError", "OptionError", "OptionValueError", "RelayWarning", "format_diagnostic",
    "register_source", "source_text",
]

# Spans made by a parser carry their own text (``Span.text``). For a span built by hand, the
# text registered last under its name is the fallback. Bounded: old texts are forgotten first;
# locked, since parses in several threads register at once.
_SOURCES: dict[str, str] = {}
_SOURCES_LOCK = threading.Lock()
_MAX_SOURCES = 64


def register_source(name: str, text: str) -> None:
    """Remember the text of a source, for diagnostics on spans that do not carry their text."""
    with _SOURCES_LOCK:
        _SOURCES.pop(name, None)
        _SOURCES[name] = text
        while len(_SOURCES) > _MAX_SOURCES:
            del _SOURCES[next(iter(_SOURCES))]


def source_text(name: str) -> str | None:
    """The remembered text of a source, if any."""
    with _SOURCES_LOCK:
        return _SOURCES.get(name)


@dataclass(frozen=True, slots=True)
class Span:
    """A position in a source text (1-based line and column)."""

    source_name: str
    line: int
    column: int
    end_line: int | None = None
    end_column: int | None = None
    # the text the span points into (parsers fill it in), so that two parses under one name
    # each show their own line; not part of the span's identity
    text: str | None = field(default=None, compare=False, repr=False)


def format_diagnostic(message: str, source: str | None, span: Span | None,
                      severity: str = "error") -> str:
    """``file:line:col: error: message`` followed by the source line and a caret."""
    if span is None:
        return f"{severity}: {message}"
    head = f"{span.source_name}:{span.line}:{span.column}: {severity}: {message}"
    if source is None:
        source = span.text if span.text is not None else source_text(span.source_name)
    if source is None:
        return head
    lines = source.splitlines()
    if not 1 <= span.line <= len(lines):
        return head
    text = lines[span.line - 1].expandtabs(1)
    width = 1
    if span.end_line == span.line and span.end_column and span.end_column > span.column:
        width = span.end_column - span.column
    caret = " " * (span.column - 1) + "^" * max(1, min(width, max(1, len(text) - span.column + 1)))
    return f"{head}\n  {text}\n  {caret}"


class RelayError(Exception):
    """Base of relaygraph's user-facing errors (parse, type, rule and evaluation errors)."""


class UnknownNameError(RelayError, KeyError):
    """A name the user gave (a model, an operator) that names nothing; a KeyError too."""

    def __str__(self) -> str:
        # KeyError's own str() quotes its argument; the message reads better plain.
        return str(self.args[0]) if self.args else ""


class OptionError(RelayError, TypeError):
    """An option the user gave that the named thing does not take, or a value it refuses (a
    limit that is not positive); a TypeError too."""


class OptionValueError(RelayError, ValueError):
    """A value of an option the named thing takes but refuses (a zoo model's width that its heads
    do not divide); a ValueError too."""


class RelayWarning(UserWarning):
    """A warning for the user (not a bug): the command line prints it as ``relaygraph: warning:
    ...``, whichever command raised it."""


class _Diagnostic(RelayError):
    """An error that may point into source text."""

    def __init__(self, message: str, span: Span | None = None, source: str | None = None) -> None:
        self.message = message
        self.span = span
        self.source = source
        super().__init__(format_diagnostic(message, source, span))


class ParseError(_Diagnostic):
    """Malformed Relay text: names file:line:column, shows the line and a caret."""


class RelayTypeError(_Diagnostic):
    """A program that does not type-check: names the node, both types and (if parsed) where."""


class RuleError(_Diagnostic):
    """A malformed or refused rewrite rule: names the rule and, for rule files, where."""


class EvalError(RelayError):
    """A run-time failure of a Relay program (failed match, wrong arity, bad input)."""
