"""What machine a benchmark ran on, read from the system: CPU model, cores, memory, Python, torch, and the
load average (other processes' work on the same cores inflates every timing)."""

from __future__ import annotations

import os
import platform
import time


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what ``platform`` reports."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def load_average() -> list[float]:
    """1-, 5- and 15-minute load averages."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def utc_now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())


def machine() -> dict:
    """The machine's description as stored in ``bench-results.json``."""
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "memory_gib": memory_gib(), "os": platform.system(),
            "python": platform.python_version(), "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
            "gpu": gpu}
