"""What a benchmark ran on, and whether the machine was quiet: recorded with every suite's result.

Quiet means no one else used the CPU while the suite ran: `OtherCpu` samples, every few seconds,
the CPU time of every process outside the benchmark's own process tree (its contenders, Beam's
workers and kfp's steps are inside it). The load average, also recorded, counts the benchmark's
own earlier work for minutes after it ends, so it is no measure of other users.

A virtual machine's neighbours are not processes here: their share shows as steal, the time the
hypervisor ran someone else while this machine's CPUs wanted to run (/proc/stat's 8th column). It is
recorded as a fraction of the CPU time that passed, beside the suite's own CPU seconds (its process
and the children it waited for), so a wall-time gain made of CPU that was simply free, or a loss
made of steal, shows in the record.

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
import resource

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
            "other_cpu_max": others.peak, "quiet": quiet(others.mean), "steal_fraction": others.steal,
            "steal_max": others.steal_peak, "suite_cpu_seconds": others.own_cpu}


class OtherCpu:
    """CPU used by processes outside this one's tree, in cores, sampled every `interval` s in a thread."""

    def __init__(self, interval: float = 5.0) -> None:
        self.interval, self.samples, self.steal_samples = interval, [], []
        self.steal, self.steal_peak, self.own_cpu = 0.0, 0.0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> "OtherCpu":
        self._stat_before, self._own_before = cpu_stat(), own_cpu_seconds()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.steal = steal_between(self._stat_before, cpu_stat())
        self.steal_peak = round(max(self.steal_samples, default=self.steal), 3)
        self.own_cpu = round(own_cpu_seconds() - self._own_before, 1)

    @property
    def mean(self) -> float:
        return round(sum(self.samples) / len(self.samples), 2) if self.samples else 0.0

    @property
    def peak(self) -> float:
        return round(max(self.samples), 2) if self.samples else 0.0

    def _watch(self) -> None:
        before, at, stat = _outside_cpu(), time.monotonic(), cpu_stat()
        while not self._stop.wait(self.interval):
            now, when, stat_now = _outside_cpu(), time.monotonic(), cpu_stat()
            used = sum(now[pid] - before[pid] for pid in now.keys() & before.keys())
            self.samples.append(max(0.0, used / (when - at)))
            self.steal_samples.append(steal_between(stat, stat_now))
            before, at, stat = now, when, stat_now


def cpu_stat() -> tuple[int, int]:
    """(all CPU ticks, steal ticks) since boot from /proc/stat's `cpu` line; (0, 0) where there is none."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    # guest and guest_nice (9th, 10th) are already counted in user and nice
    return sum(ticks[:8]), ticks[7] if len(ticks) > 7 else 0


def steal_between(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The fraction of CPU time stolen by the hypervisor between two `cpu_stat()` readings.

    >>> steal_between((1000, 10), (1400, 50))
    0.1
    """
    total = after[0] - before[0]
    return round((after[1] - before[1]) / total, 3) if total > 0 else 0.0


def own_cpu_seconds() -> float:
    """User + system CPU of this process and of the children it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


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
