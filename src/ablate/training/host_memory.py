"""Keep freed host memory in the process for the next step instead of handing it back to the OS.

glibc's malloc serves a large block with a fresh `mmap` and returns it on free, and trims the heap whenever its free
top passes a threshold; the next step then takes the same memory back one page fault at a time, each page zeroed by
the kernel. A member model's activations are K times a run's, past the sizes glibc's adaptive threshold keeps: on the
project's CPU, 8 members of table3-small took about 20,000 page faults a step (none for the 8 runs on their own), and
their step was about 5% slower. Fixing the thresholds (what the MALLOC_*_ environment variables do at start-up, and
what PyTorch's CPU tuning guide gets from jemalloc or tcmalloc) makes a step reuse the memory the step before freed.
The price is that the process keeps its peak heap until it exits, which a training process reaches every step anyway.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3  # mallopt's parameters (malloc.h)
MMAP_THRESHOLD = 32 << 20  # glibc's largest: blocks up to 32 MiB come from the heap and stay there
TRIM_THRESHOLD = 1 << 30  # hand the heap's free top back only past 1 GiB
TOP_PAD = 64 << 20  # grow the heap 64 MiB at a time (address space; pages cost nothing until touched)
_SETTINGS = ((_M_MMAP_THRESHOLD, MMAP_THRESHOLD), (_M_TRIM_THRESHOLD, TRIM_THRESHOLD), (_M_TOP_PAD, TOP_PAD))


def keep_freed_memory() -> bool:
    """Set glibc's thresholds for this process; False (and nothing done) where the C library is not glibc."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and other C libraries have no mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return all([mallopt(param, value) == 1 for param, value in _SETTINGS])  # every setting, even past a refused one
