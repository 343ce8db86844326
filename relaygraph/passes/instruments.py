"""Built-in pass instruments: timing per pass, and a recorder of hook calls."""

from __future__ import annotations

import time

from ..ir.module import IRModule
from .infra import PassInfo, PassInstrument

__all__ = ["PassTimingInstrument", "PassPrintingInstrument"]


class PassTimingInstrument(PassInstrument):
    """Measures wall time per pass (nested passes included); ``render()`` gives a table."""

    name = "PassTimingInstrument"

    def __init__(self) -> None:
        self.records: list[list] = []  # [depth, name, seconds], in the order passes started
        self._open: list[tuple[int, float]] = []

    def enter_pass_ctx(self) -> None:
        self.records.clear()
        self._open.clear()

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        self.records.append([len(self._open), info.name, 0.0])
        self._open.append((len(self.records) - 1, time.perf_counter()))

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        index, start = self._open.pop()
        self.records[index][2] = time.perf_counter() - start

    def totals(self) -> dict[str, float]:
        """Seconds spent per pass name (top-level and nested runs added up)."""
        out: dict[str, float] = {}
        for _, name, seconds in self.records:
            out[name] = out.get(name, 0.0) + seconds
        return out

    def render(self) -> str:
        """One line per pass run, indented by nesting, with its time in microseconds."""
        lines = [f"{'  ' * depth}{name}: {seconds * 1e6:.0f}us" for depth, name, seconds in
                 self.records]
        return "\n".join(lines)


class PassPrintingInstrument(PassInstrument):
    """Prints the module's text after the named passes (all passes when none are named)."""

    name = "PassPrintingInstrument"

    def __init__(self, passes: list[str] | None = None, stream=None) -> None:
        self.passes = set(passes or [])
        self.stream = stream

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        if self.passes and info.name not in self.passes:
            return
        print(f"// after {info.name}\n{mod}", file=self.stream)
