"""What a benchmark ran on, and whether the machine was quiet: recorded with every suite's result.

>>> facts = machine_facts()
>>> sorted(facts) == ["cores", "cpu", "memory_gb", "platform"]
True
>>> quiet(0.2), quiet(1.7)
(True, False)
"""
from __future__ import annotations

import os
import platform
import time
from typing import Any

# A 1-minute load average under this when a suite starts: nothing else was using a core.
QUIET_LOAD = 0.5


def machine_facts() -> dict[str, Any]:
    """Cores, CPU model, memory and OS: what the figures depend on."""
    return {"cores": os.cpu_count() or 0, "cpu": _cpu_model(), "memory_gb": round(_memory_bytes() / 2**30, 1),
            "platform": f"{platform.system()} {platform.machine()}, Python {platform.python_version()}"}


def quiet(load: float) -> bool:
    return load < QUIET_LOAD


def load_now() -> float:
    return round(os.getloadavg()[0], 2)


def run_record(command: str, started: float, load_before: float) -> dict[str, Any]:
    """The `run` entry of a result: when, how, on what, and how busy the machine was."""
    load_after = load_now()
    return {"command": command, "date": time.strftime("%Y-%m-%d", time.gmtime(started)),
            "seconds": round(time.time() - started, 1), "machine": machine_facts(),
            "load_before": load_before, "load_after": load_after, "quiet": quiet(load_before)}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0
