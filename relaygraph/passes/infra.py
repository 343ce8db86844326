"""Pass infrastructure with TVM's semantics: PassInfo, PassContext, module/function passes,
Sequential, and pass instruments.

A pass maps an IRModule to a new IRModule and never changes its input. Which passes run inside a
Sequential follows TVM: a pass runs when it is not disabled and it is either required or the
context's opt_level is at least its own; a pass's ``required`` passes run first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import RelayError
from ..ir.expr import Function
from ..ir.module import IRModule
from ..ir.node import paused_gc

__all__ = [
    "PassInfo", "PassContext", "Pass", "ModulePass", "FunctionPass", "Sequential", "module_pass",
    "function_pass", "PassInstrument", "register_config", "register_pass", "get_pass",
    "list_passes", "PassError",
]


class PassError(RelayError):
    """A pass was misused: unknown config key, unknown pass name, bad option."""


@dataclass(frozen=True)
class PassInfo:
    """A pass's name, the opt_level it needs, and the passes it requires to run first."""

    opt_level: int
    name: str
    required: tuple[str, ...] = ()


# -- configuration keys --------------------------------------------------------------------------
_CONFIG: dict[str, tuple[type, Any]] = {}


def register_config(key: str, kind: type, default: Any = None) -> None:
    """Declare a PassContext config key with its value type and default."""
    _CONFIG[key] = (kind, default)


register_config("relay.FuseOps.max_depth", int, 256)
register_config("relay.FuseOps.link_params", bool, False)
register_config("relay.FoldConstant.fold_qnn", bool, False)


class PassInstrument:
    """Hooks around a PassContext and each pass; override any of them.

    Order (as TVM): ``enter_pass_ctx`` when the context is entered, ``exit_pass_ctx`` when it is
    left; for each pass, every instrument's ``should_run`` is asked first (any False skips the
    pass), then every ``run_before_pass``, the pass, then every ``run_after_pass``.
    """

    name = "PassInstrument"

    def enter_pass_ctx(self) -> None:
        """Called when the owning PassContext is entered."""

    def exit_pass_ctx(self) -> None:
        """Called when the owning PassContext is left."""

    def should_run(self, mod: IRModule, info: PassInfo) -> bool:
        """Return False to skip the pass."""
        return True

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        """Called before a pass runs."""

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        """Called after a pass ran."""


_local = threading.local()


def _stack() -> list[PassContext]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = [PassContext()]
    return stack


class PassContext:
    """The settings passes run under: opt_level, required/disabled passes, config, instruments.

    Use with ``with``; contexts stack per thread and ``PassContext.current()`` is the innermost.
    """

    def __init__(self, opt_level: int = 2, required_pass: Iterable[str] | None = None,
                 disabled_pass: Iterable[str] | None = None, instruments: Sequence | None = None,
                 config: dict[str, Any] | None = None) -> None:
        if not isinstance(opt_level, int) or opt_level < 0:
            raise PassError(f"PassContext: opt_level must be an int >= 0, got {opt_level!r}")
        self.opt_level = opt_level
        self.required_pass = frozenset(required_pass or ())
        self.disabled_pass = frozenset(disabled_pass or ())
        self.instruments = list(instruments or [])
        self.config = self._check_config(dict(config or {}))

    @staticmethod
    def _check_config(config: dict[str, Any]) -> dict[str, Any]:
        for key, value in config.items():
            if key not in _CONFIG:
                valid = ", ".join(sorted(_CONFIG))
                raise PassError(f"PassContext: unknown config key {key!r}; valid keys: {valid}")
            kind = _CONFIG[key][0]
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise PassError(f"PassContext: config {key!r} expects {kind.__name__}, got "
                                f"{type(value).__name__} {value!r}")
        return config

    def get_config(self, key: str) -> Any:
        """The configured value of ``key``, or its registered default."""
        if key not in _CONFIG:
            raise PassError(f"unknown config key {key!r}; valid keys: {', '.join(sorted(_CONFIG))}")
        return self.config.get(key, _CONFIG[key][1])

    @staticmethod
    def current() -> PassContext:
        """The innermost active context of this thread (a default one when none is entered)."""
        return _stack()[-1]

    def pass_enabled(self, info: PassInfo) -> bool:
        """TVM's rule: not disabled, and required or opt_level high enough."""
        if info.name in self.disabled_pass:
            return False
        if info.name in self.required_pass:
            return True
        return self.opt_level >= info.opt_level

    def __enter__(self) -> PassContext:
        entered: list[PassInstrument] = []
        try:
            for inst in self.instruments:
                inst.enter_pass_ctx()
                entered.append(inst)
        except BaseException:
            # Undo the instruments already entered, then drop them all, as TVM does.
            for inst in entered:
                inst.exit_pass_ctx()
            self.instruments = []
            raise
        _stack().append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        stack = _stack()
        if stack and stack[-1] is self:
            stack.pop()
        instruments, errors = self.instruments, []
        for inst in instruments:
            try:
                inst.exit_pass_ctx()
            except BaseException as err:  # exit every instrument, then report the first failure
                errors.append(err)
        if errors:
            self.instruments = []
            raise errors[0]

    # -- instrument hooks ------------------------------------------------------------------
    def _before(self, mod: IRModule, info: PassInfo) -> bool:
        for inst in self.instruments:
            if not inst.should_run(mod, info):
                return False
        for inst in self.instruments:
            inst.run_before_pass(mod, info)
        return True

    def _after(self, mod: IRModule, info: PassInfo) -> None:
        for inst in self.instruments:
            inst.run_after_pass(mod, info)


class Pass:
    """Base of every pass: ``pass_(mod) -> new module`` under the current PassContext."""

    info: PassInfo

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise PassError(f"{self.info.name}: expected an IRModule, got {type(mod).__name__}")
        ctx = PassContext.current()
        if not ctx._before(mod, self.info):
            return mod
        with paused_gc():
            out = self.transform(mod.copy(), ctx)
        if not isinstance(out, IRModule):
            raise PassError(f"pass {self.info.name} returned {type(out).__name__}, not an IRModule")
        ctx._after(out, self.info)
        return out

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        """The work: receives a private copy of the module."""
        raise NotImplementedError(f"{type(self).__name__}.transform")

    @property
    def name(self) -> str:
        return self.info.name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.info.name} opt_level={self.info.opt_level}>"


class ModulePass(Pass):
    """A pass over the whole module, from a function ``(mod, ctx) -> mod``."""

    def __init__(self, fn: Callable[[IRModule, PassContext], IRModule], info: PassInfo) -> None:
        self.fn = fn
        self.info = info

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return self.fn(mod, ctx)


class FunctionPass(Pass):
    """A pass applied to every global function, from ``(func, mod, ctx) -> func``.

    Functions marked with a ``Compiler`` or ``SkipOptimization`` attribute are left alone, as in
    TVM.
    """

    def __init__(self, fn: Callable[[Function, IRModule, PassContext], Function],
                 info: PassInfo) -> None:
        self.fn = fn
        self.info = info

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        for gv, func in list(mod.functions.items()):
            if func.attrs.get("Compiler") or func.attrs.get("SkipOptimization"):
                continue
            new = self.fn(func, mod, ctx)
            if not isinstance(new, Function):
                raise PassError(f"function pass {self.info.name} returned {type(new).__name__} for "
                                f"@{gv.name_hint}, not a Function")
            mod.functions[gv] = new
        return mod


class Sequential(Pass):
    """Runs passes in order under TVM's enabling rule; required passes run first."""

    def __init__(self, passes: Sequence[Pass] = (), opt_level: int = 0, name: str = "sequential",
                 required: Sequence[str] = ()) -> None:
        for i, p in enumerate(passes):
            if not isinstance(p, Pass):
                raise PassError(f"Sequential: item {i} is {type(p).__name__}, not a Pass")
        self.passes = list(passes)
        self.info = PassInfo(opt_level, name, tuple(required))

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        for p in self.passes:
            if not ctx.pass_enabled(p.info):
                continue
            for req in p.info.required:
                mod = get_pass(req)(mod)
            mod = p(mod)
        return mod


def _decorate(kind: str, opt_level: int | None, name: str | None, required: Sequence[str],
              fn: Any):
    if opt_level is None:
        raise PassError(f"{kind}: opt_level is required")

    def wrap(target: Any):
        pass_name = name or getattr(target, "__name__", kind)
        info = PassInfo(opt_level, pass_name, tuple(required))
        method = "transform_module" if kind == "module_pass" else "transform_function"
        maker = ModulePass if kind == "module_pass" else FunctionPass
        if isinstance(target, type):
            if not hasattr(target, method):
                raise PassError(f"{kind}: class {target.__name__} must define {method}")

            class Wrapped(maker):
                def __init__(self, *args: Any, **kwargs: Any) -> None:
                    inst = target(*args, **kwargs)
                    super().__init__(getattr(inst, method), info)
                    self.instance = inst

            Wrapped.__name__ = Wrapped.__qualname__ = target.__name__
            Wrapped.__doc__ = target.__doc__
            return Wrapped
        if callable(target):
            return maker(target, info)
        raise PassError(f"{kind} decorates a function or a class, not {type(target).__name__}")

    return wrap(fn) if fn is not None else wrap


def module_pass(fn: Any = None, *, opt_level: int | None = None, name: str | None = None,
                required: Sequence[str] = ()):
    """Make a ModulePass from ``f(mod, ctx) -> mod`` or a class with ``transform_module``."""
    return _decorate("module_pass", opt_level, name, required, fn)


def function_pass(fn: Any = None, *, opt_level: int | None = None, name: str | None = None,
                  required: Sequence[str] = ()):
    """Make a FunctionPass from ``f(func, mod, ctx) -> func`` or a class with
    ``transform_function``."""
    return _decorate("function_pass", opt_level, name, required, fn)


# -- named passes (for `required`, pipelines in text, and the command line) ---------------------
@dataclass
class _Registered:
    factory: Callable[..., Pass]
    options: dict[str, Any] = field(default_factory=dict)


_PASSES: dict[str, _Registered] = {}


def register_pass(name: str, factory: Callable[..., Pass], **options: Any) -> None:
    """Make a pass constructible by name; ``options`` maps kebab-case option names to defaults."""
    _PASSES[name] = _Registered(factory, options)


def list_passes() -> list[str]:
    """Names of the registered passes."""
    return sorted(_PASSES)


def get_pass(name: str, **options: Any) -> Pass:
    """A new pass by name, with options given in kebab-case or snake_case."""
    try:
        reg = _PASSES[name]
    except KeyError:
        raise PassError(f"unknown pass {name!r}; known: {', '.join(list_passes())}") from None
    kwargs = {}
    for key, value in options.items():
        kebab = key.replace("_", "-")
        if kebab not in reg.options:
            valid = ", ".join(reg.options) or "none"
            raise PassError(f"pass {name} has no option {kebab!r} (options: {valid})")
        kwargs[kebab.replace("-", "_")] = value
    return reg.factory(**kwargs)
