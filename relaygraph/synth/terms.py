"""Terms to enumerate: pattern variables, scalar literals and op calls with attribute choices.

A term is a plain tuple (hashable, so equal terms are one key): ``("v", name)`` a pattern
variable, ``("l", value)`` a float32 scalar literal, ``("o", op, attrs, args)`` a call, where
``attrs`` is a sorted tuple of (name, value) and a value may be an attribute variable
(``AttrVar("p")``) or ``compose_axes(?p, ?q)`` (``AttrFun``). Each op's attribute choices come
from small domains (``attr_choices``). ``count_terms`` bounds what an enumeration would make,
before anything is built.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import RelayError
from ..ops.registry import REQUIRED, lookup

__all__ = ["AttrVar", "AttrFun", "var", "lit", "call", "size", "variables", "attr_variables", "render",
           "generalizable", "GENERALIZABLE", "attr_choices", "check_ops", "count_terms", "ops_of", "LITERALS"]

LITERALS = (0.0, 1.0, -1.0, 0.5)


@dataclass(frozen=True)
class AttrVar:
    """An attribute variable (``axes=?p``): a value drawn per sample, matched by the rule."""

    name: str


@dataclass(frozen=True)
class AttrFun:
    """A computed attribute of the rule language (``compose_axes(?p, ?q)``), right sides only."""

    name: str
    args: tuple[str, ...]


def var(name: str) -> tuple:
    """The pattern variable ``?name``."""
    return ("v", name)


def lit(value: float) -> tuple:
    """A float32 scalar literal."""
    return ("l", float(value))


def call(op: str, args, attrs=()) -> tuple:
    """A call of ``op`` on terms, with (name, value) attribute pairs."""
    return ("o", op, tuple(sorted(attrs)), tuple(args))


def size(t: tuple) -> int:
    """Number of op calls."""
    if t[0] != "o":
        return 0
    return 1 + sum(size(a) for a in t[3])


def variables(t: tuple, out: list | None = None) -> list[str]:
    """Pattern variables in order of first occurrence."""
    out = [] if out is None else out
    if t[0] == "v":
        if t[1] not in out:
            out.append(t[1])
    elif t[0] == "o":
        for a in t[3]:
            variables(a, out)
    return out


def attr_variables(t: tuple, out: list | None = None, computed: bool = True) -> list[str]:
    """Attribute variables in order of first occurrence, innermost calls first (those inside
    computed values too, except ``shape(?root)``)."""
    out = [] if out is None else out
    if t[0] == "o":
        for a in t[3]:
            attr_variables(a, out, computed)
        for _, v in t[2]:
            names = [v.name] if isinstance(v, AttrVar) else [n for n in v.args if n != "root"] if (
                computed and isinstance(v, AttrFun)) else []
            out += [n for n in names if n not in out]
    return out


def has_computed(t: tuple) -> bool:
    """Whether an attribute of the term is computed (it may only be a right side)."""
    if t[0] != "o":
        return False
    return any(isinstance(v, AttrFun) for _, v in t[2]) or any(has_computed(a) for a in t[3])


def ops_of(t: tuple, out: set | None = None) -> set[str]:
    """The ops a term calls."""
    out = set() if out is None else out
    if t[0] == "o":
        out.add(t[1])
        for a in t[3]:
            ops_of(a, out)
    return out


def _value_text(v, rename: dict[str, str]) -> str:
    if isinstance(v, AttrVar):
        return "?" + rename.get(v.name, v.name)
    if isinstance(v, AttrFun):
        return f"{v.name}({', '.join('?' + rename.get(a, a) for a in v.args)})"
    if v is None or isinstance(v, bool):
        return repr(v)
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, tuple):
        return "[" + ", ".join(_value_text(x, rename) for x in v) + "]"
    return repr(v)


def _lit_text(x: float) -> str:
    return f"{int(x)}f" if x == int(x) else f"{x}f"


def render(t: tuple, rename: dict[str, str] | None = None, rest: dict | None = None) -> str:
    """The term in the rule language (Relay syntax with ``?`` variables); ``rest``: per op, the
    attributes left to its rest variable (``**?m``) instead of written out."""
    rename = rename or {}
    if t[0] == "v":
        return "?" + rename.get(t[1], t[1])
    if t[0] == "l":
        return _lit_text(t[1])
    parts = [render(a, rename, rest) for a in t[3]]
    free = (rest or {}).get(t[1], ())
    parts += [f"{k}={_value_text(v, rename)}" for k, v in t[2] if k not in free]
    if free:
        parts.append(f"**?{_REST_VARIABLE[t[1]]}")
    return f"{t[1]}({', '.join(parts)})"


# Attributes a rule may leave to a rest variable when every call of the op in it has the same
# value for them (the synthesizer then asks the checker whether the rule holds for every
# value). Not nn.dense: its rest would carry ``units`` to a call whose weight differs.
# Pools: their window (size, strides, dilation, padding, ceil mode), never their layout.
# Convolutions: their output channels and kernel size (which the weight's shape gives), as the
# zoo's models write them out.
_WINDOW = ("ceil_mode", "dilation", "padding", "pool_size", "strides")
GENERALIZABLE = {"nn.batch_matmul": ("out_dtype", "transpose_a", "transpose_b"), "sum": ("keepdims",),
                 "nn.max_pool2d": _WINDOW, "nn.avg_pool2d": (*_WINDOW, "count_include_pad"),
                 "nn.conv2d": ("channels", "kernel_size")}
_REST_VARIABLE = {"nn.batch_matmul": "m", "sum": "k", "nn.max_pool2d": "w", "nn.avg_pool2d": "g",
                  "nn.conv2d": "c"}


def generalizable(lhs: tuple, rhs: tuple) -> dict[str, tuple[str, ...]]:
    """Per op called on the left side: the attributes of ``GENERALIZABLE`` that have one value
    in all its calls on both sides (one rest variable then stands for them in every call)."""
    calls: dict[str, list[dict]] = {}
    left: dict[str, int] = {}
    for side, t0 in (("l", lhs), ("r", rhs)):
        stack = [t0]
        while stack:
            t = stack.pop()
            if t[0] != "o":
                continue
            calls.setdefault(t[1], []).append(dict(t[2]))
            if side == "l":
                left[t[1]] = left.get(t[1], 0) + 1
            stack.extend(t[3])
    out = {}
    for op, names in GENERALIZABLE.items():
        if not left.get(op):
            continue
        same = tuple(n for n in names if len({repr(c.get(n)) for c in calls[op]}) == 1)
        if same:
            out[op] = same
    return out


# Attributes a left side must pin (their other values change the result or its type); the rest
# of an op's attributes are written when the choice sets them.
_PINNED = {
    "nn.dense": (("out_dtype", ""),),
    "nn.batch_matmul": (("out_dtype", ""), ("transpose_a", False), ("transpose_b", True)),
    "sum": (("exclude", False), ("keepdims", False)),
    "reshape": (("allowzero", False),),
    # NCHW images, as the zoo's convolutional models have them: a bias per channel (axis 1)
    "nn.bias_add": (("axis", 1),),
    "nn.global_avg_pool2d": (("layout", "NCHW"), ("out_layout", "")),
    # a convolution that acts per position (stride 1, unpadded: with a 1x1 kernel, a channel
    # mix at each pixel), NCHW/OIHW as the zoo's models have them; its kernel size is the
    # weight's, which a condition on the weight's shape says
    "nn.conv2d": (("data_layout", "NCHW"), ("dilation", (1, 1)), ("groups", 1), ("kernel_layout", "OIHW"),
                  ("out_dtype", ""), ("out_layout", ""), ("padding", (0, 0, 0, 0)), ("strides", (1, 1))),
}

# The windows pools are tried with, as the zoo's models use them: 2x2 stride 2 (VGG, DenseNet),
# 3x3 stride 2 padded by 1 (ResNet's stem), 3x3 stride 1 padded by 1 counting the padding in
# the average (Inception's pool branches).
_POOL_WINDOWS = (((2, 2), (2, 2), (0, 0, 0, 0), False), ((3, 3), (2, 2), (1, 1, 1, 1), False),
                 ((3, 3), (1, 1), (1, 1, 1, 1), True))
_POOL_CHOICES = {"nn.max_pool2d": _POOL_WINDOWS[:2], "nn.avg_pool2d": _POOL_WINDOWS[::2]}


def attr_choices(op: str, attr_vars: bool = True) -> list[tuple]:
    """The attribute tuples tried for ``op``: small domains (permutations by variable, their
    composition, the reduction axes None and [-1], a reshape to a drawn shape)."""
    pinned = _PINNED.get(op, ())
    if op == "transpose":
        if not attr_vars:
            return [()]
        # by variables, their composition, and the two layout swaps programs write out (a
        # matrix's transpose, a batch of matrices' transposes)
        return [(("axes", AttrVar("p")),), (("axes", AttrVar("q")),),
                (("axes", AttrFun("compose_axes", ("p", "q"))),), (("axes", (1, 0)),), (("axes", (0, 2, 1)),)]
    if op == "reshape":
        if not attr_vars:
            return []
        return [(*pinned, ("newshape", AttrVar("s"))), (*pinned, ("newshape", AttrVar("t")))]
    if op == "nn.batch_matmul":  # the right operand transposed or not
        return [pinned, (("out_dtype", ""), ("transpose_a", False), ("transpose_b", False))]
    if op == "sum":
        return [(*pinned, ("axis", None)), (*pinned, ("axis", (-1,)))]
    if op in _POOL_CHOICES:  # every attribute written: one omitted would match any value
        fixed = (("ceil_mode", False), ("dilation", (1, 1)), ("layout", "NCHW"), ("out_layout", ""))
        return [tuple(sorted((*fixed, ("padding", pad), ("pool_size", size_), ("strides", stride),
                              *((("count_include_pad", counted),) if op == "nn.avg_pool2d" else ()))))
                for size_, stride, pad, counted in _POOL_CHOICES[op]]
    opdef = lookup(op)
    required = [k for k, v in opdef.attrs.items() if v is REQUIRED and k not in ("units",)]
    if required:
        raise RelayError(f"op {op}: no attribute domain for its required attribute(s) "
                         f"{', '.join(required)}; synthesis cannot enumerate its calls")
    return [pinned]


def check_ops(ops) -> list[str]:
    """The ops, checked: each must exist with a kernel and a type relation (RelayError naming it)."""
    out = []
    for name in ops:
        name = name.strip()
        if not name:
            continue
        opdef = lookup(name)
        if opdef is None:
            raise RelayError(f"unknown op {name!r}: synthesis needs ops of the op table")
        if opdef.kernel is None:
            raise RelayError(f"op {name} has no kernel: its terms cannot be evaluated, so rules "
                             "over it cannot be synthesized")
        if opdef.type_relation is None:
            raise RelayError(f"op {name} has no type relation: its terms cannot be typed, so rules "
                             "over it cannot be synthesized")
        if opdef.num_inputs is None or opdef.num_inputs < 1:
            raise RelayError(f"op {name} takes a variable number of inputs (or none); synthesis "
                             "enumerates fixed-arity ops only")
        attr_choices(name)
        if name not in out:
            out.append(name)
    if not out:
        raise RelayError("no ops to synthesize rules over")
    return out


def count_terms(ops, size_limit: int, n_vars: int, literals, wide: int) -> int:
    """An upper bound on the terms an enumeration makes (before equal terms are merged)."""
    ops = list(ops)
    leaves = n_vars + len(literals)
    arity = {o: lookup(o).num_inputs for o in ops}
    choices = {o: len(attr_choices(o)) for o in ops}
    counts, plain = [leaves], [n_vars]  # terms with k ops; those without literals
    by_root: list[dict[str, int]] = [{}]  # by_root[k][op]: those without literals, op at the root
    for k in range(1, size_limit + 1):
        row: dict[str, int] = {}
        total = 0
        for o in ops:
            if k <= wide:
                total += choices[o] * _ways(arity[o], k - 1, counts)
                row[o] = choices[o] * _ways(arity[o], k - 1, plain)
            elif arity[o] == 2:  # the deep layer: a binary op over two terms with one root op
                row[o] = choices[o] * sum(by_root[s].get(r, 0) * by_root[k - 1 - s].get(r, 0)
                                          for s in range(1, k - 1) for r in ops)
                total += row[o]
        by_root.append(row)
        counts.append(total)
        plain.append(sum(row.values()))
    return sum(counts[1:])


def _ways(arity: int, budget: int, counts: list[int]) -> int:
    """Ways to fill ``arity`` argument slots whose op counts sum to ``budget``."""
    if arity == 0:
        return 1 if budget == 0 else 0
    if arity == 1:
        return counts[budget] if budget < len(counts) else 0
    return sum(counts[k] * _ways(arity - 1, budget - k, counts) for k in range(budget + 1)
               if k < len(counts))
