"""What a benchmark ran on, and whether the machine was quiet: recorded with every suite's result.

Quiet means no one else used the CPU while the suite ran: `OtherCpu` samples, every few seconds,
the CPU time of every process outside the benchmark's own process tree (its contenders, Beam's
workers and kfp's steps are inside it). The load average, also recorded, counts the benchmark's
own earlier work for minutes after it ends, so it is no measure of other users.

>>> facts = machine_facts()
>>> sorted(facts) == ["cores", "cpu", "memory_gb", "platform"]
True
>>> quiet(0.2), quiet(1.7)
(True, False)
"""
from __future__ import annotations

import os
import platform
import threading
import time
from typing import Any

import psutil

# Cores' worth of CPU used by other processes, on average over the suite, under which it ran quiet.
QUIET_LOAD = 0.25


def machine_facts() -> dict[str, Any]:
    """Cores, CPU model, memory and OS: what the figures depend on."""
    return {"cores": os.cpu_count() or 0, "cpu": _cpu_model(), "memory_gb": round(_memory_bytes() / 2**30, 1),
            "platform": f"{platform.system()} {platform.machine()}, Python {platform.python_version()}"}


def quiet(load: float) -> bool:
    return load < QUIET_LOAD


def load_now() -> float:
    return round(os.getloadavg()[0], 2)


def run_record(command: str, started: float, load_before: float, others: "OtherCpu") -> dict[str, Any]:
    """The `run` entry of a result: when, how, on what, and how busy the machine was."""
    return {"command": command, "date": time.strftime("%Y-%m-%d", time.gmtime(started)),
            "seconds": round(time.time() - started, 1), "machine": machine_facts(),
            "load_before": load_before, "load_after": load_now(), "other_cpu_mean": others.mean,
            "other_cpu_max": others.peak, "quiet": quiet(others.mean)}


class OtherCpu:
    """CPU used by processes outside this one's tree, in cores, sampled every `interval` s in a thread."""

    def __init__(self, interval: float = 5.0) -> None:
        self.interval, self.samples = interval, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> "OtherCpu":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def mean(self) -> float:
        return round(sum(self.samples) / len(self.samples), 2) if self.samples else 0.0

    @property
    def peak(self) -> float:
        return round(max(self.samples), 2) if self.samples else 0.0

    def _watch(self) -> None:
        before, at = _outside_cpu(), time.monotonic()
        while not self._stop.wait(self.interval):
            now, when = _outside_cpu(), time.monotonic()
            used = sum(now[pid] - before[pid] for pid in now.keys() & before.keys())
            self.samples.append(max(0.0, used / (when - at)))
            before, at = now, when


def _outside_cpu() -> dict[tuple[int, float], float]:
    """User + system CPU seconds of each process outside this one's tree, keyed by (pid, start time)."""
    me = psutil.Process()
    mine = {me.pid, *(child.pid for child in me.children(recursive=True))}
    found = {}
    for process in psutil.process_iter(["pid", "create_time", "cpu_times"]):
        info = process.info
        if info["pid"] in mine or info["cpu_times"] is None:
            continue
        found[(info["pid"], info["create_time"])] = info["cpu_times"].user + info["cpu_times"].system
    return found


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
