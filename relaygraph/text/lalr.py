"""An LALR(1) driver over the parse table lark builds from ``relay.lark``.

lark compiles the grammar and computes the LALR(1) table; this module runs it. Running it here
rather than through lark's tree builder lets every reduction see where its first token started
(so nodes get exact source spans) and keeps the per-token cost low: the tokenizer is one
compiled regular expression, and single-symbol pass-through rules only swap a state.

The driver is a loop over explicit stacks, so nesting in the input never becomes Python
recursion.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable
from pathlib import Path

from ..errors import ParseError
from .source import Source

__all__ = ["Grammar", "grammar", "run"]

_GRAMMAR_FILE = Path(__file__).with_name("relay.lark")

# How tokens are named in "expected ..." messages.
_DESCRIBE = {
    "LOCAL": "a local variable (%x)", "GRAPH": "a graph variable (%0)", "GLOBAL": "a global (@f)",
    "NAME": "a name", "DOTTED": "an operator name", "NUMBER": "a number", "STRING": "a string",
    "META": "a meta[...] reference", "$END": "the end of the text",
}


class Grammar:
    """The compiled grammar: token regex, keywords and the LALR table in a compact form."""

    def __init__(self) -> None:
        import lark  # imported here: the grammar is compiled once, on the first parse
        from lark.parsers.lalr_analysis import Shift

        text = _GRAMMAR_FILE.read_text()
        compiled = lark.Lark(text, parser="lalr", lexer="basic", start=["module", "expression"])
        try:
            table = compiled.parser.parser._parse_table
        except AttributeError as exc:  # an internal of lark; fail loudly if it ever moves
            raise RuntimeError("this lark version keeps its LALR table elsewhere; relaygraph "
                               "needs lark 1.x") from exc
        self.keywords: dict[str, str] = {}
        self.literals: dict[str, str] = {}
        parts = []
        terminals = sorted(compiled.terminals, key=lambda t: (-t.priority, -t.pattern.max_width,
                                                               -len(t.pattern.value), t.name))
        for term in terminals:
            pattern = term.pattern
            if pattern.type == "str":
                self.literals[term.name] = pattern.value
                if re.fullmatch(r"[A-Za-z_]\w*", pattern.value):
                    self.keywords[pattern.value] = term.name  # matched as NAME, then renamed
                    continue
            if term.name != "WS":
                parts.append(f"(?P<{term.name}>{pattern.to_regexp()})")
        parts.append(r"(?P<_BAD>\S)")
        # Each match swallows the whitespace before its token, so whitespace costs no
        # iteration of the parse loop; trailing whitespace simply matches nothing.
        self.token_re = re.compile(r"[ \t\r\n]*(?:" + "|".join(parts) + ")", re.S)
        # Group number -> token type, so the loop reads ``m.lastindex`` (an int) per token.
        self.group_names = [""] * (self.token_re.groups + 1)
        for name, number in self.token_re.groupindex.items():
            self.group_names[number] = name

        rules: list = []
        index: dict = {}
        # states[i] maps a symbol to the next state (a shift or a goto) or, negative, ~rule.
        self.states: list[dict[str, int]] = [{} for _ in range(max(table.states) + 1)]
        for state, actions in table.states.items():
            row = self.states[state]
            for symbol, (action, arg) in actions.items():
                if action is Shift:
                    row[str(symbol)] = arg
                else:
                    if arg not in index:
                        index[arg] = len(rules)
                        rules.append(arg)
                    row[str(symbol)] = ~index[arg]
        # (length, handler name, left-hand side) per rule; the handler is the rule's alias. Names
        # become plain str: lark's own str subclasses compare slowly as dict keys.
        self.rules = [(len(r.expansion), str(r.alias or r.origin.name), str(r.origin.name))
                      for r in rules]
        self.start_states = dict(table.start_states)
        self.end_states = dict(table.end_states)

    def describe(self, token_type: str) -> str:
        """A token type as a user reads it."""
        if token_type in self.literals:
            return f"`{self.literals[token_type]}`"
        return _DESCRIBE.get(token_type, token_type)


@functools.cache
def grammar() -> Grammar:
    """The grammar, compiled on first use."""
    return Grammar()


def run(source: Source, start: str, handlers: dict[str, Callable]) -> object:
    """Parse ``source.code`` from the start symbol ``start``.

    ``handlers[name](values, positions)`` builds the value of a rule named ``name`` from the
    values of its symbols (tokens are their text) and their start offsets; a rule without a
    handler passes its single value through.
    """
    g = grammar()
    text = source.code
    states = g.states
    keywords = g.keywords
    rules = [(n, handlers.get(name), lhs) for n, name, lhs in g.rules]
    for n, h, lhs in rules:
        if h is None and n != 1:
            raise RuntimeError(f"no handler for the grammar rule {lhs} of length {n}")
    end_state = g.end_states[start]
    names = g.group_names
    state = g.start_states[start]
    stack: list[int] = []  # the states below the current one
    values: list = []
    positions: list[int] = []
    length = len(text.rstrip())
    # Tokenize up to the last non-blank character only: the pattern starts with optional
    # whitespace, so a long blank tail (a blanked metadata section) would be rescanned from every
    # position in it, which is quadratic.
    for m in itertools.chain(g.token_re.finditer(text, 0, length), (None,)):
        if m is None:  # the end, placed just after the last token for diagnostics
            kind, value, pos = "$END", "", length
        else:
            group = m.lastindex
            kind = names[group]
            value = m.group(group)
            pos = m.start(group)
            if kind == "NAME":
                kind = keywords.get(value, "NAME")
            elif kind == "_BAD":
                raise source.error(f"unexpected character {value!r}", pos)
        while True:
            action = states[state].get(kind)
            if action is None:
                raise _syntax_error(source, g, state, kind, value, pos)
            if action >= 0:  # shift
                stack.append(state)
                state = action
                values.append(value)
                positions.append(pos)
                break
            n, handler, lhs = rules[~action]
            if handler is None:  # A -> B: same value, new state
                state = states[stack[-1]][lhs]
                continue
            if n:
                kids = values[-n:]
                where = positions[-n:]
                del values[-n:], positions[-n:]
                below = stack[-n]
                if n > 1:
                    del stack[1 - n:]
            else:
                kids = []
                where = [pos]
                stack.append(state)
                below = state
            try:
                value_out = handler(kids, where)
            except ParseError:
                raise
            except Exception as exc:  # a node constructor refusing the input, say
                raise _wrapped(source, exc, where[0]) from None
            state = states[below][lhs]
            if state == end_state and kind == "$END":
                return value_out
            values.append(value_out)
            positions.append(where[0])
    raise AssertionError("the LALR table accepts only at the end of the text")


def _wrapped(source: Source, exc: Exception, pos: int) -> ParseError:
    from ..ir.node import NodeError

    message = str(exc) if isinstance(exc, NodeError) else f"{type(exc).__name__}: {exc}"
    return source.error(message, pos)


def _syntax_error(source: Source, g: Grammar, state: int, kind: str, value: str,
                  pos: int) -> ParseError:
    expected = sorted({g.describe(t) for t in g.states[state] if t.isupper() or t == "$END"})
    if len(expected) > 8:
        hint = ""
    elif len(expected) == 1:
        hint = f"; expected {expected[0]}"
    else:
        hint = f"; expected one of {', '.join(expected)}"
    if kind == "$END":
        return source.error(f"syntax error: the text ends early{hint}", pos)
    return source.error(f"syntax error: unexpected `{value}`{hint}", pos)
