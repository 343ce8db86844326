"""Checks of what users give, shared by the command line and the API, made before any work.

Limits must be positive, names (cost models, extractors, model options) must be known, and a
user's text file must be a readable, non-empty, UTF-8 file. Each failure is a RelayError with
a one-line message that names the option or the file, so ``rg.optimize(mod, cost="bogus")``
and ``relaygraph optimize --cost bogus`` fail at once, in the same words.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable
from pathlib import Path

from .errors import OptionError, RelayError, Span, UnknownNameError

__all__ = ["positive", "known", "limits", "optimize_options", "call_options", "read_text",
           "EXTRACTORS", "cost_model_names"]

# The extractors ``rg.optimize`` runs, by the names the command line and the API take.
EXTRACTORS = ("tree", "greedy-dag", "greedy-dag+ls", "ilp")


def positive(name: str, value, *, integer: bool = False, allow_none: bool = True):
    """``value`` if it is a positive number (an int when ``integer``), else OptionError naming ``name``."""
    if value is None and allow_none:
        return value
    kind = "a positive integer" if integer else "a positive number of seconds"
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type:
        raise OptionError(f"{name} must be {kind}{' or None' if allow_none else ''}, got {value!r}")
    if not value > 0 or (isinstance(value, float) and math.isnan(value)):
        raise OptionError(f"{name} must be {kind}, got {value!r}")
    return value


def known(kind: str, value, names: Iterable[str]) -> str:
    """``value`` if it is one of ``names``; else UnknownNameError listing them."""
    names = list(names)
    if value not in names:
        raise UnknownNameError(f"unknown {kind} {value!r}; known: {', '.join(names)}")
    return value


def limits(*, node_limit=None, iter_limit=None, time_limit=None, ilp_time_limit=None,
           prefix: str = "") -> None:
    """Check saturation and extraction limits (None is no limit); ``prefix`` names them (``--``)."""
    dash = prefix == "--"

    def label(name: str) -> str:
        return prefix + (name.replace("_", "-") if dash else name)

    positive(label("node_limit"), node_limit, integer=True)
    positive(label("iter_limit"), iter_limit, integer=True)
    positive(label("time_limit"), time_limit)
    positive(label("ilp_time_limit"), ilp_time_limit)


def cost_model_names() -> list[str]:
    """The names of the cost models extraction knows."""
    from .egraph.cost import COST_MODELS

    return list(COST_MODELS)


def optimize_options(*, cost="cpu", extractor: str = "ilp", node_limit=None, iter_limit=None,
                     time_limit=None, ilp_time_limit=None, prefix: str = "") -> None:
    """Check the options of ``rg.optimize`` (and ``relaygraph optimize``) before any work."""
    limits(node_limit=node_limit, iter_limit=iter_limit, time_limit=time_limit,
           ilp_time_limit=ilp_time_limit, prefix=prefix)
    if not callable(cost):
        known("cost model", cost, cost_model_names())
    known("extractor", extractor, EXTRACTORS)


def call_options(owner: str, func: Callable, options: dict, fixed: Iterable[str] = ()) -> None:
    """Check keyword ``options`` against what ``func`` takes: names known, values of the default's
    type, sizes (``batch_size``) positive. OptionError lists the options ``func`` accepts."""
    params = {n: p for n, p in inspect.signature(func).parameters.items()
              if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n not in set(fixed)}
    unknown = sorted(set(options) - set(params))
    if unknown:
        raise OptionError(f"{owner} takes no option {', '.join(unknown)}; it takes: "
                          f"{', '.join(sorted(params))}")
    for name, value in options.items():
        default = params[name].default
        if name == "batch_size":
            positive(f"{owner}: option batch_size", value, integer=True, allow_none=False)
        if default is inspect.Parameter.empty or default is None:
            continue
        if not _same_kind(value, default):
            raise OptionError(f"{owner}: option {name} takes {_kind(default)} "
                              f"(like {default!r}), got {value!r}")
        if isinstance(default, int) and not isinstance(default, bool) and default > 0 and name != "seed":
            positive(f"{owner}: option {name}", value, integer=True)  # a size or a count


def _same_kind(value, default) -> bool:
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, (tuple, list)):
        return isinstance(value, (tuple, list))
    return isinstance(value, type(default))


def _kind(default) -> str:
    for t, word in ((bool, "true or false"), (int, "an integer"), (float, "a number"),
                    (str, "a string"), (tuple, "a tuple"), (list, "a list")):
        if isinstance(default, t):
            return word
    return type(default).__name__


def read_text(path: str | Path, error: type[RelayError] = RelayError, what: str = "file") -> str:
    """The text of a user's file, or ``error`` naming the file: missing, a directory, unreadable,
    empty, or not UTF-8 (then at the line and column of the first undecodable byte)."""
    path = Path(path)
    if path.is_dir():
        raise error(f"{path}: is a directory, not a {what}")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except OSError as exc:
        raise error(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if not data.strip():
        raise error(f"{path}: empty {what}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _binary(error, path, data, exc.start, f"byte 0x{data[exc.start]:02x} is not UTF-8") from None
    nul = data.find(b"\0")
    if nul >= 0:
        raise _binary(error, path, data, nul, "a NUL byte")
    return text


def _binary(error: type[RelayError], path: Path, data: bytes, offset: int, what: str) -> RelayError:
    """The error for a file that is not text, at the line and column of byte ``offset``."""
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    message = f"not a text file: {what} (at byte offset {offset}); is it a binary file?"
    try:
        return error(message, Span(str(path), line, column))
    except TypeError:  # an error class without a span
        return error(f"{path}:{line}:{column}: {message}")
