"""The C allocator's thresholds, pinned so that a kernel's time does not depend on what the process
allocated before it.

By default glibc's malloc moves two thresholds as a process runs: blocks above the *mmap
threshold* are mapped fresh from the OS and given back when freed, and the *trim threshold*
(twice the other) says how much free memory at the top of the heap it gives back. Both start at
128 KB and grow as the process frees large blocks, up to 32 MB. A kernel whose temporaries are a
few MB then either reuses memory or page-faults all of it again on every call, depending on the
process's history: Winograd on 16 to 64 channels at 56x56 took 3.1 to 4.5 ms in one loop and
0.86 to 1.1 ms in another, and ResNet-50's 64-channel layer 7.0 to 8.4 ms looped first in a
process against 2.1 to 2.5 ms pinned, while its parts timed apart sum to 2.0 ms
(``benchmarks/bench_allocator.py``, processes of each setting alternated).

``pin_allocator`` fixes both where the dynamic ones end up in a long run (mmap at 32 MB, glibc's
own maximum on 64-bit; trim at twice that). Whole programs, which free blocks of several MB
early and so raise the dynamic thresholds themselves, measured the same speedups either way
(ResNet-50, MobileNet, SqueezeNet-1.0: within 0.03, processes alternated; bench_allocator's
``--models``). The executor pins them
when it first compiles a program, and the calibration before it measures, so looped kernels and
programs are timed under the same allocator. The cost: up to 64 MB of freed memory stays with the
process. ``RELAYGRAPH_MALLOC=default`` leaves the allocator alone (``pinned``, the default, pins
it; another value is warned about and pins it), as do ``MALLOC_MMAP_THRESHOLD_``
or ``MALLOC_TRIM_THRESHOLD_`` set in the environment (glibc's own way to choose them); on a C
library other than glibc nothing is changed.
"""

from __future__ import annotations

import ctypes
import os
import sys
import warnings

from ..errors import RelayWarning

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "pin_allocator", "allocator_pinned"]

MMAP_THRESHOLD = 32 << 20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # what glibc sets with a new mmap threshold
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (malloc.h)
_GLIBC_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")

_pinned: bool | None = None  # None until pin_allocator has run in this process


def _glibc():
    """The process's C library when it is glibc, else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - only glibc has it
        return libc
    except (OSError, AttributeError):
        return None


def pin_allocator() -> bool:
    """Fix glibc malloc's mmap and trim thresholds for this process (once; see the module's
    documentation). True when they are pinned, False when left alone (opted out, set in the
    environment, or not glibc)."""
    global _pinned
    if _pinned is not None:
        return _pinned
    _pinned = False
    choice = os.environ.get("RELAYGRAPH_MALLOC", "").strip().lower()
    if choice == "default":
        return False
    if choice not in ("", "pinned"):
        warnings.warn(f"RELAYGRAPH_MALLOC={os.environ['RELAYGRAPH_MALLOC']!r} is not understood: use "
                      "'default' to leave malloc's thresholds alone or 'pinned' (the default) to pin "
                      "them; pinning them", RelayWarning, stacklevel=2)
    if any(os.environ.get(v) for v in _GLIBC_VARIABLES):
        return False
    libc = _glibc()
    if libc is None:
        return False
    mallopt = libc.mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _pinned = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    _pinned = _pinned and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _pinned


def allocator_pinned() -> bool:
    """Whether ``pin_allocator`` has pinned the thresholds in this process."""
    return bool(_pinned)
