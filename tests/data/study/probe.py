"""Cells for the study tests (``[[call]] function = "probe.py:NAME"``): each records that it ran."""

import os
import signal
import time


def _log(log: str, tag: str) -> None:
    with open(log, "a") as f:
        f.write(f"{tag} {os.getpid()} {time.time()}\n")


def work(n: int, seconds: float = 0.0, log: str = "", fail: bool = False) -> dict:
    """Sleep ``seconds``, log the run, and give n squared (or fail, when told to)."""
    if log:
        _log(log, f"n={n}")
    time.sleep(seconds)
    if fail:
        raise ValueError(f"cell {n} was told to fail")
    return {"square": n * n, "pid": os.getpid()}


def hang(n: int = 0) -> dict:
    """Never ends on its own."""
    while True:
        time.sleep(1)


def hog(mb: int) -> dict:
    """Allocate ``mb`` megabytes (and touch them)."""
    block = bytearray(mb * 2**20)
    return {"bytes": len(block)}


def crash(n: int = 0) -> dict:
    """Die by a segmentation fault, as a broken native library would."""
    import faulthandler

    faulthandler.disable()  # no traceback on the test's stderr: the row says what happened
    os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(5)
    return {}
