"""Source text before tokenizing: comments, the version header and the metadata section.

TVM's format has nested block comments (``/* a /* b */ c */``), which a regular lexer cannot
skip, so comments are blanked out here (newlines kept, so positions stay valid). The
``#[version = "0.0.5"]`` header and the ``#[metadata]`` section (JSON up to the end of the
text) are taken out the same way. ``Source`` also turns character offsets into spans and
errors into ``ParseError`` diagnostics.
"""

from __future__ import annotations

import bisect
import re

from ..errors import ParseError, Span, register_source

__all__ = ["Source", "VERSION"]

VERSION = "0.0.5"

# The places where the pre-pass has something to do; everything between them is copied as is.
_SPECIAL = re.compile(r'//|/\*|\*/|"|#')
_BLOCK_EDGE = re.compile(r"/\*|\*/")
_ATTRIBUTE = re.compile(r"#\[\s*([^\]\n]*?)\s*\]")
_VERSION_ATTR = re.compile(r'version\s*=\s*"([^"]*)"')
_NOT_NEWLINE = re.compile(r"[^\n]")


class Source:
    """A named text prepared for the tokenizer, with offset -> line/column mapping."""

    __slots__ = ("name", "text", "code", "version", "version_pos", "metadata", "metadata_pos",
                 "_line_starts")

    def __init__(self, name: str, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"Relay text must be a str, got {type(text).__name__}")
        self.name = name
        self.text = text
        self.version: str | None = None
        self.version_pos = 0
        self.metadata: str | None = None
        self.metadata_pos = 0
        self._line_starts: list[int] | None = None
        register_source(name, text)
        self.code = self._strip(text)

    # -- positions ------------------------------------------------------------------------
    def line_col(self, pos: int) -> tuple[int, int]:
        """1-based line and column of a character offset."""
        starts = self._line_starts
        if starts is None:
            starts = self._line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        line = bisect.bisect_right(starts, pos)
        return line, pos - starts[line - 1] + 1

    def span(self, pos: int, end: int | None = None) -> Span:
        """The span starting at offset ``pos`` (and ending at ``end`` on the same line)."""
        line, col = self.line_col(pos)
        if end is not None and end > pos:
            end_line, end_col = self.line_col(end)
            return Span(self.name, line, col, end_line, end_col, self.text)
        return Span(self.name, line, col, text=self.text)

    def error(self, message: str, pos: int, end: int | None = None) -> ParseError:
        """A ParseError pointing at offset ``pos``."""
        pos = max(0, min(pos, len(self.text)))
        return ParseError(message, self.span(pos, end), self.text)

    # -- the pre-pass -----------------------------------------------------------------------
    def _strip(self, text: str) -> str:
        """The text with comments blanked and the header and metadata section cut out."""
        if "/" not in text and "#" not in text:
            return text
        out: list[str] = []
        i = 0
        n = len(text)
        while i < n:
            m = _SPECIAL.search(text, i)
            if m is None:
                out.append(text[i:])
                break
            start, tok = m.start(), m.group()
            out.append(text[i:start])
            if tok == '"':
                end = _string_end(text, start)
                if end < 0:
                    raise self.error("unterminated string literal", start)
                out.append(text[start:end])
                i = end
            elif tok == "//":
                end = text.find("\n", start)
                end = n if end < 0 else end
                out.append(" " * (end - start))
                i = end
            elif tok == "/*":
                end = self._block_comment_end(text, start)
                out.append(_NOT_NEWLINE.sub(" ", text[start:end]))
                i = end
            elif tok == "*/":
                # Not inside a comment: a `*` operator followed by `/` is never valid Relay.
                raise self.error("`*/` closes a comment that was never opened", start)
            else:
                i = self._attribute(text, start, out)
        return "".join(out)

    def _block_comment_end(self, text: str, start: int) -> int:
        depth = 0
        i = start
        while True:
            m = _BLOCK_EDGE.search(text, i)
            if m is None:
                raise self.error("unterminated comment: `/*` is never closed", start)
            depth += 1 if m.group() == "/*" else -1
            i = m.end()
            if depth == 0:
                return i

    def _attribute(self, text: str, start: int, out: list[str]) -> int:
        """Handle ``#[version = "..."]`` and ``#[metadata]``; returns where to continue."""
        m = _ATTRIBUTE.match(text, start)
        if m is None:
            raise self.error("`#` must start an attribute such as #[version = \"0.0.5\"]", start)
        body = m.group(1)
        if body == "metadata":
            self.metadata = text[m.end():]
            self.metadata_pos = m.end()
            out.append(_NOT_NEWLINE.sub(" ", text[start:]))
            return len(text)
        version = _VERSION_ATTR.fullmatch(body)
        if version is None:
            raise self.error(f"unsupported attribute #[{body}]", start)
        if self.version is not None:
            raise self.error("the version header appears twice", start)
        if version.group(1) != VERSION:
            raise self.error(f"unsupported text format version \"{version.group(1)}\" "
                             f"(this parser reads \"{VERSION}\")", start)
        self.version = version.group(1)
        self.version_pos = start
        out.append(" " * (m.end() - start))
        return m.end()


def _string_end(text: str, start: int) -> int:
    """Offset just past the string literal opening at ``start``, or -1 if unterminated."""
    i = start + 1
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            return i + 1
        if c == "\\":
            i += 2
            continue
        if c == "\n":
            return -1
        i += 1
    return -1
