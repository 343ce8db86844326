"""Pass pipelines written as text: ``"FoldConstant,FuseOps(fuse-opt-level=0)"``."""

from __future__ import annotations

import re

from .infra import PassError, Sequential, get_pass

__all__ = ["parse_pipeline", "option_value"]

_ITEM = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\(([^()]*)\))?\s*(?:,|$)")


def option_value(text: str):
    """A literal option value from text: true/false, an int, a float, else the (unquoted) string."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text.strip("\"'")


def parse_pipeline(text: str, opt_level: int = 0) -> Sequential:
    """A Sequential of the named passes, each with optional ``(key=value, ...)`` options."""
    passes, pos, text = [], 0, text.strip()
    while pos < len(text):
        m = _ITEM.match(text, pos)
        if m is None or m.end() == pos:
            raise PassError(f"bad pass pipeline at column {pos + 1}: {text[pos:]!r} "
                            f"(expected Name or Name(option=value, ...))")
        options = {}
        for part in filter(None, (p.strip() for p in (m.group(2) or "").split(","))):
            if "=" not in part:
                raise PassError(f"pass {m.group(1)}: option {part!r} needs a value (name=value)")
            key, val = part.split("=", 1)
            options[key.strip()] = option_value(val.strip())
        passes.append(get_pass(m.group(1), **options))
        pos = m.end()
    if not passes:
        raise PassError("empty pass pipeline")
    return Sequential(passes, opt_level=opt_level, name="pipeline")
