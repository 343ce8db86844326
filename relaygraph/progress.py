"""Progress of long phases (load, saturate, extract, check, time): a tqdm bar on a terminal, plain
lines in a log, or nothing.

``progress`` arguments take ``True`` or ``"auto"`` (a bar when stderr is a terminal or a notebook,
plain lines otherwise), ``"bar"``, ``"lines"``, or ``False`` / ``None`` / ``"off"``. A plain line
is one step of a phase, written whole (no ``\\r`` frames), e.g.
``saturate: iteration 3/30, 873 e-nodes, 441 e-classes, 3.1 s``. The command line's ``--quiet``
turns ``True`` and ``"auto"`` off for the command it runs (``quiet()``).
"""

from __future__ import annotations

import contextlib
import sys
import time
from contextvars import ContextVar

from .errors import RelayError

__all__ = ["Phase", "phase", "resolve", "quiet", "MODES"]

MODES = ("auto", "bar", "lines", "off")
_QUIET: ContextVar[bool] = ContextVar("relaygraph_quiet", default=False)


def resolve(progress) -> str:
    """The progress mode a ``progress`` argument asks for here: ``"bar"``, ``"lines"`` or ``"off"``."""
    if progress is None or progress is False:
        return "off"
    if progress is True:
        progress = "auto"
    if not isinstance(progress, str) or progress not in MODES:
        raise RelayError(f"progress must be True, False or one of {', '.join(map(repr, MODES))}; "
                         f"got {progress!r}")
    if progress != "auto":
        return progress
    if _QUIET.get():
        return "off"
    return "bar" if _on_terminal() or _in_notebook() else "lines"


def _on_terminal() -> bool:
    isatty = getattr(sys.stderr, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def _in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (tqdm draws a widget there, not ``\\r`` frames)."""
    shell = sys.modules.get("IPython")
    if shell is None or "ipykernel" not in sys.modules:
        return False
    get = getattr(shell, "get_ipython", None)
    return get is not None and getattr(get(), "kernel", None) is not None


@contextlib.contextmanager
def quiet(enabled: bool = True):
    """While the block runs (in this thread), ``True`` and ``"auto"`` progress is off."""
    token = _QUIET.set(enabled or _QUIET.get())
    try:
        yield
    finally:
        _QUIET.reset(token)


class Phase:
    """The progress of one phase: ``step()`` per unit of work, ``done()`` at the end.

    In ``lines`` mode a phase writes a line when it starts (if told ``what`` it does), one per
    step (at most one per ``every`` seconds, when steps are many and quick) and one when done.
    """

    def __init__(self, name: str, what: str = "", total: int | None = None, unit: str = "step",
                 progress="auto", every: float = 0.0) -> None:
        self.name, self.total, self.unit, self.every = name, total, unit, every
        self.mode = resolve(progress)
        self.count = 0
        self.start = self._last = time.perf_counter()
        self._bar = None
        self._pending = ""  # the latest step not yet written (lines mode, throttled)
        if self.mode == "bar":
            self._bar = _tqdm(name, what, total, unit)
        elif self.mode == "lines" and what:
            self._write(what)

    @property
    def elapsed(self) -> float:
        """Seconds since the phase started."""
        return time.perf_counter() - self.start

    def step(self, info: str = "", n: int = 1) -> None:
        """``n`` more units done; ``info`` says where things stand (sizes, the file done)."""
        self.count += n
        if self._bar is not None:
            self._bar.update(n)
            if info:
                self._bar.set_postfix_str(info, refresh=True)
            return
        if self.mode != "lines":
            return
        counted = f"{self.unit} {self.count}" + (f"/{self.total}" if self.total is not None else "")
        line = ", ".join(p for p in (counted, info, f"{self.elapsed:.1f} s") if p)
        now = time.perf_counter()
        if now - self._last < self.every:
            self._pending = line
            return
        self._write(line)
        self._last, self._pending = now, ""

    def done(self, info: str = "") -> None:
        """The phase is over: a last line (``lines``) or the bar cleared (``bar``)."""
        if self.mode == "lines":
            if self._pending:
                self._write(self._pending)
            self._write(", ".join(p for p in ("done", info, f"{self.elapsed:.1f} s") if p))
            self.mode = "off"
        self.close()

    def close(self) -> None:
        """Stop showing the phase without a last line (it failed, or ``done`` ran already)."""
        self.mode = "off" if self.mode == "lines" else self.mode
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def print(self, text: str) -> None:
        """Print a result on stdout now (flushed), around the bar if one is showing."""
        if self._bar is not None:
            self._bar.write(text, file=sys.stdout)
            sys.stdout.flush()
        else:
            print(text, flush=True)

    def _write(self, text: str) -> None:
        print(f"{self.name}: {text}", file=sys.stderr, flush=True)

    def __enter__(self) -> Phase:
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is None:
            self.done()
        else:
            self.close()


def phase(name: str, what: str = "", total: int | None = None, unit: str = "step", progress="auto",
          every: float = 0.0) -> Phase:
    """A new Phase (see its docstring); ``progress`` as ``resolve`` takes it."""
    return Phase(name, what, total, unit, progress, every)


def _tqdm(name: str, what: str, total: int | None, unit: str):
    from tqdm.auto import tqdm

    if total is None and what:
        # one long step: the bar says what runs and for how long
        return tqdm(total=None, desc=f"{name}: {what}", unit=unit, file=sys.stderr, leave=False,
                    bar_format="{desc} [{elapsed}]{postfix}")
    return tqdm(total=total, desc=name, unit=unit, file=sys.stderr, leave=False)
