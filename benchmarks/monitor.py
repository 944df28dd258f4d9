"""Runs one command in a subprocess and watches it from outside: wall time, process-tree memory, files.

    watch = Watch(first_file_globs=["out/*.tfrecord"], done_dir=None)
    m = run_monitored([sys.executable, "-m", "x"], log_prefix=Path("logs/x"), watch=watch)
    m.wall_s, m.peak_rss_mb, m.peak_anon_mb, m.first_file_s

Memory is sampled every `memory_interval` s as the sum over the process and all its descendants
(Beam's worker processes included) of RSS and of its anonymous part (RSS minus file-backed and
shared pages: heap and arrays, what grows with data), from /proc/<pid>/statm (~10 µs a process).
PSS and USS come from /proc/<pid>/smaps_rollup, which walks every page table: ~10 ms of kernel
CPU per TensorFlow process. Read every 0.2 s, as it once was, for ExampleGen's four processes that
took 41 ms per sample, 20 % of one of the 2 cores, charged to the contender with the most
processes; so it is read only every `smaps_interval` s (its peaks are coarser). RSS counts the
libraries (TensorFlow's ~0.3 GB) once per process, so the tree's sum overstates its footprint;
pages a forked child still shares copy-on-write with its parent count in both, in RSS and
anonymous RSS alike. Prefer RSS and anonymous RSS for comparisons: PSS and USS depend on which
*other* processes map the same library files, which on a machine shared with other users moved USS
of identical runs by 300 MB. Peaks shorter than the interval can be missed. Files are polled every
`file_interval` s: the time the first output file appears (its writer opens it right before
writing the first record), and the time the last done-marker appeared in `done_dir`. The
monitor's own CPU is reported (`monitor_cpu_s`) so its share of the machine stays visible.
"""
from __future__ import annotations

import glob
import json
import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from shardflow.core.process_defaults import with_process_defaults

MB = 1024 * 1024


@dataclass
class Watch:
    first_file_globs: list[str] = field(default_factory=list)
    done_dir: str | None = None
    file_interval: float = 0.05
    memory_interval: float = 0.2
    smaps_interval: float = 5.0  # PSS/USS: see the module docstring for why not every memory sample
    timeline_interval: float = 1.0


@dataclass
class Measurement:
    returncode: int
    wall_s: float  # from just before the process was started until it exited
    started_at: float  # epoch seconds, just before the process was started
    peak_rss_mb: float
    peak_anon_mb: float
    peak_main_anon_mb: float  # the started process alone (e.g. Beam's driver without its workers)
    peak_pss_mb: float
    peak_uss_mb: float
    cpu_s: float  # user + system CPU of the process and every descendant it waited for
    first_file_s: float | None  # after start; None when no file matched
    last_done_s: float | None  # after start; None without done markers
    load_before: float  # 1-minute load average when the run began (shared machine)
    samples: int
    max_processes: int  # most processes alive in the tree at one sample (Beam's workers included)
    timeline: list[list[float]]  # about once a second: [s after start, processes, RSS MB, anon MB, main anon MB]
    report: dict  # the JSON object the child printed last on stdout ({} when none)
    monitor_cpu_s: float = 0.0  # this process's CPU while it watched (sampling, polling)


@dataclass
class TreeMemory:
    """Bytes summed over a process and its live descendants; `main_anon` of the process alone."""

    rss: int = 0
    anon: int = 0
    pss: int = 0
    uss: int = 0
    main_anon: int = 0
    processes: int = 0


def _smaps_pss_uss(pid: int) -> tuple[int, int]:
    """PSS and USS bytes of one process from smaps_rollup (the expensive read)."""
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            name, _, rest = line.partition(":")
            if rest.strip().endswith("kB"):
                fields[name] = int(rest.split()[0]) * 1024
    return fields.get("Pss", 0), fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)


def tree_memory(proc: psutil.Process, with_smaps: bool = True) -> TreeMemory:
    """The tree's RSS and anonymous RSS; PSS and USS too when `with_smaps` (costly: see the docstring)."""
    total = TreeMemory()
    try:
        members = [proc] + proc.children(recursive=True)
    except psutil.NoSuchProcess:
        return total
    for member in members:
        try:
            info = member.memory_info()
            pss, uss = _smaps_pss_uss(member.pid) if with_smaps else (0, 0)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, FileNotFoundError,
                ProcessLookupError, PermissionError):
            continue  # exited between listing and reading
        anon = info.rss - info.shared  # "shared" (statm) = resident file-backed + shmem pages
        total.rss += info.rss
        total.anon += anon
        total.pss += pss
        total.uss += uss
        total.processes += 1
        if member is proc:
            total.main_anon = anon
    return total


def _first_match(globs: list[str]) -> bool:
    return any(next(iter(glob.iglob(pattern)), None) is not None for pattern in globs)


def _count_files(directory: str | None) -> int:
    try:
        return len(os.listdir(directory)) if directory else 0
    except FileNotFoundError:
        return 0


def _last_json_line(path: Path) -> dict:
    """The child's report: the last stdout line that parses as a JSON object."""
    for line in reversed(path.read_text(errors="replace").splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return {}


def _point(seconds: float, memory: TreeMemory) -> list[float]:
    return [round(seconds, 2), memory.processes, round(memory.rss / MB, 1), round(memory.anon / MB, 1),
            round(memory.main_anon / MB, 1)]


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_monitored(cmd: list[str], log_prefix: Path, watch: Watch, env: dict[str, str] | None = None) -> Measurement:
    """Runs `cmd` to completion while sampling; stdout/stderr go to `<log_prefix>.out/.err`."""
    log_prefix.parent.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    cpu_before = _cpu_seconds()
    peak = TreeMemory()
    samples = done_count = 0
    timeline: list[list[float]] = []
    first_file = last_done = None
    next_memory = next_smaps = 0.0
    monitor_cpu = time.process_time()
    with open(f"{log_prefix}.out", "wb") as out, open(f"{log_prefix}.err", "wb") as err:
        started = time.time()
        proc = psutil.Popen(cmd, stdout=out, stderr=err, env=env)
        while proc.poll() is None:
            now = time.time()
            if now >= next_memory:
                with_smaps = now >= next_smaps
                now_memory = tree_memory(proc, with_smaps)
                if with_smaps:
                    next_smaps = now + watch.smaps_interval
                for name in ("rss", "anon", "pss", "uss", "main_anon", "processes"):
                    setattr(peak, name, max(getattr(peak, name), getattr(now_memory, name)))
                if not timeline or now - started - timeline[-1][0] >= watch.timeline_interval:
                    timeline.append(_point(now - started, now_memory))
                samples += 1
                next_memory = now + watch.memory_interval
                count = _count_files(watch.done_dir)
                if count > done_count:  # only increases: the staging dir is removed at the end
                    done_count, last_done = count, now - started
            if first_file is None and _first_match(watch.first_file_globs):
                first_file = now - started
            time.sleep(watch.file_interval)
        wall = time.time() - started
    return Measurement(
        returncode=proc.returncode, wall_s=wall, started_at=started,
        peak_rss_mb=peak.rss / MB, peak_anon_mb=peak.anon / MB, peak_main_anon_mb=peak.main_anon / MB,
        peak_pss_mb=peak.pss / MB, peak_uss_mb=peak.uss / MB, cpu_s=_cpu_seconds() - cpu_before,
        first_file_s=first_file, last_done_s=last_done, load_before=load_before, samples=samples,
        max_processes=peak.processes, timeline=timeline,
        report=_last_json_line(Path(f"{log_prefix}.out")), monitor_cpu_s=time.process_time() - monitor_cpu,
    )


def child_env() -> dict[str, str]:
    """The environment of a benchmark child: quiet TensorFlow, tf-keras, the repo importable."""
    env = with_process_defaults(os.environ)
    repo_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (repo_root, env.get("PYTHONPATH", "")) if p)
    return env
