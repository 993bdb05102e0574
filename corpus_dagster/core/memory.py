"""Peak resident memory of this process, per step.

ru_maxrss is not per step and, on Linux, a process started by fork + exec inherits its parent's peak
at the fork. The kernel's VmHWM (/proc/self/status) belongs to the process' own address space and can
be reset to the current RSS (/proc/self/clear_refs, "5"), so each step gets its own honest peak.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import resource
from functools import lru_cache


def peak_rss_mb() -> float:
    """Peak RSS in MiB since the last reset_peak_rss() (VmHWM), else ru_maxrss where /proc is absent."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def reset_peak_rss() -> bool:
    """Reset the peak to the current RSS; False where the kernel does not allow it (then peaks accumulate)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


@lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


def release_memory() -> None:
    """Give the memory a finished step freed back to the system: Arrow's pool and glibc's heap keep freed
    pages for reuse, so the steps of one process (a corpus run on the in-process executor) stacked their
    leftovers. At 10x the bench corpus a step ended 0.1 to 0.6 GB above where it started; with this, the
    next step starts near the process's baseline. A few milliseconds; no-op without glibc."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
