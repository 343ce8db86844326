"""Loading ``.egg`` rule files: rules written in egglog's own language over the Relay encoding.

A file holds declarations (``ruleset``, ``sort``, ``function``, ``relation``, ``constructor``,
``datatype``) and rule commands (``rule``, ``rewrite``, ``birewrite``). Each rule command must
name its ruleset and itself (``:ruleset anf :name "drop-dead-let"``) and becomes one EggRule
object whose ``decls`` are the file's declarations. Commands that act on an e-graph
(``run``, ``check``, ``let``, ...) do not belong in a rule file and are refused.
"""

from __future__ import annotations

import re

from .rule import EggRule
from .syntax import NAME_RE, SourceFile

__all__ = ["parse_egg", "read_sexprs"]

_DECLS = {"ruleset", "sort", "function", "relation", "constructor", "datatype", "datatype*"}
_RULES = {"rule", "rewrite", "birewrite"}
_TOKEN = re.compile(r'\s+|;[^\n]*|"(?:\\.|[^"\\])*"|[()]|[^\s()";]+')


def read_sexprs(src: SourceFile) -> list[tuple[str, int, list]]:
    """Top-level s-expressions: (text, offset, tokens of the top level (head first))."""
    out = []
    depth = 0
    start = 0
    top: list[str] = []
    pos = 0
    text = src.text
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise src.error("unterminated string", pos)
        tok = m.group()
        if tok[0].isspace() or tok[0] == ";":
            pos = m.end()
            continue
        if tok == "(":
            if depth == 0:
                start, top = pos, []
            depth += 1
        elif tok == ")":
            depth -= 1
            if depth < 0:
                raise src.error("`)` without a matching `(`", pos)
            if depth == 0:
                out.append((text[start:m.end()], start, top))
        elif depth == 0:
            raise src.error(f"expected `(` at the top level, got `{tok}`", pos)
        if depth == 1 and tok not in "()":
            top.append(tok)
        elif depth == 2 and tok == "(":
            top.append("(")
        pos = m.end()
    if depth > 0:
        raise src.error("`(` is never closed", start)
    return out


def _option(tokens: list[str], key: str) -> str | None:
    for i, tok in enumerate(tokens[:-1]):
        if tok == key:
            return tokens[i + 1]
    return None


def parse_egg(text: str, source_name: str = "<string>", ruleset: str | None = None) -> list[EggRule]:
    """The rules of an ``.egg`` file, each with the file's declarations."""
    src = SourceFile(source_name, text)
    decls: list[str] = []
    rules: list[EggRule] = []
    for body, offset, tokens in read_sexprs(src):
        head = tokens[0] if tokens else ""
        if head in _DECLS:
            decls.append(body)
            continue
        if head not in _RULES:
            raise src.error(f"`({head} ...)` does not belong in a rule file (declarations and "
                            "rule/rewrite/birewrite commands only)", offset)
        name = _option(tokens, ":name")
        rs = _option(tokens, ":ruleset")
        if name is None or not (name.startswith('"') and name.endswith('"')):
            raise src.error(f"a {head} command in a rule file needs :name \"rule-name\"", offset)
        name = name[1:-1]
        if not NAME_RE.fullmatch(name):
            raise src.error(f"a rule name is kebab-case (like `dead-let`), got `{name}`", offset)
        if rs is None:
            raise src.error(f"a {head} command in a rule file needs :ruleset", offset, name)
        rules.append(EggRule(name, rs, body, list(decls), src.span(offset), body))
    return rules
