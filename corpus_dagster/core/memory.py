"""Peak resident memory of this process, per step.

ru_maxrss is not per step and, on Linux, a process started by fork + exec inherits its parent's peak
at the fork. The kernel's VmHWM (/proc/self/status) belongs to the process' own address space and can
be reset to the current RSS (/proc/self/clear_refs, "5"), so each step gets its own honest peak.
"""

from __future__ import annotations

import resource


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
