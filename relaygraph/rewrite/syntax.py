"""Reading ``.rules`` files: statements, rule headers, sides, conditions, with exact positions.

A rule file is a sequence of statements; a statement starts at the beginning of a line and
continues on the indented lines that follow::

    # comments run to the end of the line (so do // comments)
    ruleset algebraic                      # optional: the ruleset of the rules that follow
    rule add-commute : add(?a, ?b) => add(?b, ?a)
    rule merge-dense : concatenate((nn.dense(?x, ?w1), nn.dense(?x, ?w2)), axis=-1)
                       <=> nn.dense(?x, concatenate((?w1, ?w2), axis=0))
    rule fold-rank4  : reshape(?x) => ?x if rank(?x) == 4 and shape(?x) == shape(?root)

Each side is Relay expression text in which ``?name`` is a pattern variable. This module only
cuts the text into pieces and keeps every piece's offset in the file, so the pattern and
condition parsers can report errors at the right line and column.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from ..errors import RuleError, Span, register_source

__all__ = ["Statement", "RuleText", "read_statements", "Located", "NAME_RE"]

NAME_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')


@dataclass(frozen=True)
class Located:
    """A piece of a rule file: its text and the file offset of its first character."""

    text: str
    offset: int


@dataclass(frozen=True)
class RuleText:
    """One ``rule NAME : LHS => RHS [if COND]`` statement, cut into located pieces."""

    name: str
    ruleset: str
    lhs: Located
    arrow: str  # "=>" or "<=>"
    rhs: Located
    cond: Located | None
    offset: int  # where the statement starts (the `rule` keyword)


@dataclass(frozen=True)
class Statement:
    """A statement's text with comments blanked out, and where it starts."""

    text: str
    offset: int


class SourceFile:
    """A rule file's text with offset -> line/column mapping and diagnostics."""

    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.text = text
        self.code = blank_comments(text)
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]
        register_source(name, text)  # so later errors about a rule can show its line

    def span(self, offset: int) -> Span:
        """The span (1-based line and column) of a file offset."""
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self._starts, offset)
        return Span(self.name, line, offset - self._starts[line - 1] + 1, text=self.text)

    def error(self, message: str, offset: int, rule: str | None = None) -> RuleError:
        """A RuleError at a file offset, naming the rule when known."""
        if rule is not None:
            message = f"rule {rule}: {message}"
        return RuleError(message, self.span(offset), self.text)


def blank_comments(text: str) -> str:
    """The text with ``#`` and ``//`` comments replaced by spaces (strings are respected)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            m = _STRING.match(text, i)
            end = m.end() if m else text.find("\n", i) if "\n" in text[i:] else n
            out.append(text[i:end])
            i = end
        elif c == "#" or text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
        else:
            out.append(c)
            i += 1
    return "".join(out)


def read_statements(src: SourceFile) -> list[Statement]:
    """Split a rule file into statements (a statement continues on indented lines)."""
    code = src.code
    statements: list[Statement] = []
    start = None
    pos = 0
    for line in code.splitlines(keepends=True):
        stripped = line.strip()
        if stripped:
            if line[0] in " \t":
                if start is None:
                    raise src.error("an indented line continues a statement, but no statement "
                                    "started before it", pos + len(line) - len(line.lstrip()))
            else:
                if start is not None:
                    statements.append(Statement(code[start:pos], start))
                start = pos
        pos += len(line)
    if start is not None:
        statements.append(Statement(code[start:pos], start))
    return statements


def parse_statement(src: SourceFile, stmt: Statement, ruleset: str) -> RuleText | str:
    """A rule statement as RuleText, or the new ruleset name for a ``ruleset NAME`` statement."""
    text, base = stmt.text, stmt.offset
    m = re.match(r"(\S+)\s*", text)
    keyword = m.group(1) if m else ""
    if keyword == "ruleset":
        rest = text[m.end():].strip()
        if not NAME_RE.fullmatch(rest):
            raise src.error(f"a ruleset name is kebab-case (like `algebraic`), got `{rest}`",
                            base + m.end())
        return rest
    if keyword != "rule":
        raise src.error(f"expected `rule NAME : LEFT => RIGHT` or `ruleset NAME`, got `{keyword}`",
                        base)
    head = re.match(r"rule\s+([^\s:]*)\s*", text)
    if head is None or not head.group(1):
        raise src.error("expected a rule name after `rule`", base + len(keyword))
    name = head.group(1)
    if not NAME_RE.fullmatch(name):
        raise src.error(f"a rule name is kebab-case (like `add-commute`), got `{name}`",
                        base + head.start(1))
    colon = head.end()
    if colon >= len(text) or text[colon] != ":":
        raise src.error("expected `:` after the rule name", base + colon, name)
    body_start = colon + 1
    arrow_at, arrow = _find_arrow(text, body_start)
    if arrow_at < 0:
        message, at = _unbalanced(text, body_start, lambda o: src.span(base + o))
        raise src.error(message or "expected `=>` or `<=>` between the two sides",
                        base + (body_start if at is None else at), name)
    rhs_start = arrow_at + len(arrow)
    cond_at = _find_condition(text, rhs_start)
    rhs_end = cond_at if cond_at >= 0 else len(text)
    lhs = _located(text, body_start, arrow_at, base)
    rhs = _located(text, rhs_start, rhs_end, base)
    if not lhs.text:
        raise src.error("the left side is empty", base + arrow_at, name)
    if not rhs.text:
        raise src.error("the right side is empty", base + rhs_start, name)
    cond = None
    if cond_at >= 0:
        cond = _located(text, cond_at + 2, len(text), base)
        if not cond.text:
            raise src.error("the condition after `if` is empty", base + cond_at, name)
    return RuleText(name, ruleset, lhs, arrow, rhs, cond, base)


def _located(text: str, start: int, end: int, base: int) -> Located:
    piece = text[start:end]
    lead = len(piece) - len(piece.lstrip())
    return Located(piece.strip(), base + start + lead)


def _scan(text: str, start: int):
    """Yield (offset, char, depth) outside string literals, from ``start``."""
    depth = 0
    i, n = start, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            m = _STRING.match(text, i)
            i = m.end() if m else n
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        yield i, c, depth
        i += 1


def _find_arrow(text: str, start: int) -> tuple[int, str]:
    for i, _, depth in _scan(text, start):
        if depth != 0:
            continue
        if text.startswith("<=>", i):
            return i, "<=>"
        if text.startswith("=>", i) and (i == 0 or text[i - 1] not in "<=>!"):
            return i, "=>"
    return -1, ""


_CLOSE = {"(": ")", "[": "]", "{": "}"}


def _unbalanced(text: str, start: int, span_of) -> tuple[str | None, int | None]:
    """Why no arrow was found when brackets are to blame, and where reading stopped: at a
    closing bracket with nothing open, at an arrow inside an open bracket, or at the end."""
    opened: list[int] = []

    def still_open() -> str:
        o = opened[-1]
        where = span_of(o)
        return f"missing `{_CLOSE[text[o]]}`: the `{text[o]}` at line {where.line}, column {where.column}"

    for i, c, _ in _scan(text, start):
        if c in _CLOSE:
            opened.append(i)
        elif c in ")]}":
            if not opened:
                return f"`{c}` closes nothing (one `{c}` too many?)", i
            opened.pop()
        elif opened and (text.startswith("<=>", i) or text.startswith("=>", i)):
            return f"{still_open()} is still open at the arrow", i
    if opened:
        return f"{still_open()} is never closed", len(text.rstrip())
    return None, None


_WORD_IF = re.compile(r"\bif\b")


def _find_condition(text: str, start: int) -> int:
    """Offset of the `if` that starts the condition, or -1.

    A Relay ``if (c) { .. } else { .. }`` also starts with `if` at depth 0; it is told apart by
    the `{` that follows its parenthesised condition.
    """
    depth_at = {i: d for i, _, d in _scan(text, start)}
    for m in _WORD_IF.finditer(text, start):
        i = m.start()
        if i not in depth_at or depth_at[i] != 0:
            continue
        j = m.end()
        while j < len(text) and text[j].isspace():
            j += 1
        if j < len(text) and text[j] == "(":
            close = _matching(text, j)
            k = close + 1
            while k < len(text) and text[k].isspace():
                k += 1
            if close > 0 and k < len(text) and text[k] == "{":
                continue  # a Relay if-expression
        return i
    return -1


def _matching(text: str, open_at: int) -> int:
    depth = 0
    for i, c, _ in _scan(text, open_at):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i
    return -1
