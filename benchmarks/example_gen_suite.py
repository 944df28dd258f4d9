"""The ExampleGen benchmark's orchestration: data, one monitored subprocess per contender and size, figures.

Called by `run_all` (the suite interface: `NAME`, `add_arguments`, `run`, `markdown`). The child
processes are `python -m benchmarks.example_gen_bench`; see that module for the contenders.

Figures per run: total wall time (process start → exit, imports included), records/s overall,
start-up (process start → first output file, which its writer opens right before the first record),
steady-state records/s = records / (end of work − first record), for ExampleGen also the encode
phase's records/s (first record → last chunk done-marker; shards, statistics and schema come after),
and the peak of the process tree's summed RSS and anonymous RSS (see `monitor`).
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from .data import ensure_images, ensure_index
from .example_gen_bench import EG_MODES
from .monitor import Watch, child_env, run_monitored
from .repeats import median_runs, rotations
from .targets import example_gen_targets

NAME = "example_gen"
DESCRIPTIONS = {"a": "(a) TFRecordWriter loop, 1 process", "b": "(b) same loop, {processes}-process pool"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("example_gen")
    group.add_argument("--eg-contenders", default="a,b,c", help="comma-separated subset of a,b,c (default a,b,c)")
    group.add_argument("--eg-mode", action="append", choices=EG_MODES, default=[],
                       help="ExampleGen's FnApiRunner mode; repeat to compare (default: auto = its own default)")
    group.add_argument("--eg-processes", type=int, default=2, help="pool size of contender b (default 2)")
    group.add_argument("--keep-outputs", action="store_true", help="keep each contender's TFRecords")


def _contenders(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(label, mode) per contender; ExampleGen appears once per requested mode."""
    chosen = [c.strip() for c in args.eg_contenders.split(",") if c.strip()]
    unknown = set(chosen) - {"a", "b", "c"}
    if unknown:
        raise SystemExit(f"--eg-contenders: unknown {sorted(unknown)}; choose from a,b,c")
    modes = args.eg_mode or ["auto"]
    out: list[tuple[str, str]] = []
    for contender in chosen:
        if contender == "c":
            out.extend(("c" if modes == ["auto"] else f"c:{mode}", mode) for mode in modes)
        else:
            out.append((contender, ""))
    return out


def contender_watch(label: str, output: Path) -> Watch:
    """ExampleGen (c…): first staged part, chunk done-markers; the loops: their first TFRecord file."""
    if label.startswith("c"):
        staging = output / ".staging"
        return Watch([str(staging / "parts" / "*" / "*")], done_dir=str(staging / "done"))
    return Watch([str(output / "*.tfrecord")])


def measure(suite: str, label: str, rows: int, cmd: list[str], log_prefix: Path, watch: Watch) -> dict[str, Any]:
    """Runs one contender's command in a monitored subprocess; its figures (keys shared by every suite)."""
    print(f"[{suite}] {label} at {rows:,} rows ...", file=sys.stderr, flush=True)
    m = run_monitored(cmd, log_prefix, watch, child_env())
    report = m.report
    figures: dict[str, Any] = {
        "returncode": m.returncode,
        "records": report.get("records"), "total_s": m.wall_s, "records_per_s": rows / m.wall_s,
        "startup_s": m.first_file_s, "peak_rss_mb": m.peak_rss_mb, "peak_anon_mb": m.peak_anon_mb,
        "peak_main_anon_mb": m.peak_main_anon_mb, "peak_uss_mb": m.peak_uss_mb,
        "cpu_s": m.cpu_s, "monitor_cpu_s": m.monitor_cpu_s, "load_before": m.load_before, "memory_samples": m.samples, "max_processes": m.max_processes,
        "imports_s": report["imported_at"] - m.started_at if "imported_at" in report else None,
        "runner": report.get("runner", ""),
    }
    if "ended_at" in report and m.first_file_s is not None:
        figures["work_end_s"] = report["ended_at"] - m.started_at
        figures["steady_records_per_s"] = rows / (figures["work_end_s"] - m.first_file_s)
    if m.last_done_s is not None and m.first_file_s is not None and m.last_done_s > m.first_file_s:
        figures["encode_records_per_s"] = rows / (m.last_done_s - m.first_file_s)
    figures["memory_timeline"] = m.timeline  # [s, processes, RSS MB, anon MB, main anon MB]
    figures["ok"] = m.returncode == 0 and report.get("records") == rows
    if not figures["ok"]:
        print(f"[{suite}] {label} at {rows:,} rows FAILED (rc={m.returncode}, records={report.get('records')}); "
              f"see {log_prefix.parent}", file=sys.stderr, flush=True)
    return figures


def run_one(label: str, mode: str, rows: int, index: Path, data_root: Path, work: Path,
            args: argparse.Namespace, round_: int = 0) -> dict[str, Any]:
    """Runs one contender at one size in a monitored subprocess; returns its figures."""
    name = f"{label.replace(':', '-')}-{rows}" + (f"-r{round_}" if round_ else "")
    output = work / "out" / name
    shutil.rmtree(output, ignore_errors=True)
    cmd = [sys.executable, "-m", "benchmarks.example_gen_bench", "--contender", label[0], "--index", str(index),
           "--data-root", str(data_root), "--output", str(output), "--processes", str(args.eg_processes)]
    if mode:
        cmd += ["--eg-mode", mode]
    log_prefix = work / "logs" / f"{NAME}-{name}"
    figures = measure(NAME, label, rows, cmd, log_prefix, contender_watch(label, output))
    if not args.keep_outputs:
        shutil.rmtree(output, ignore_errors=True)  # 1M records are ~0.9 GB per contender
    return {"contender": label, "mode": mode, "rows": rows, "round": round_, **figures}


def run(args: argparse.Namespace, sizes: list[int], work: Path) -> dict[str, Any]:
    """Every contender at every size, sizes ascending; `--repeats` rounds a size, the order rotated each round."""
    data_root = ensure_images(work / "data").resolve()
    contenders = _contenders(args)
    runs = []
    for rows in sorted(sizes):
        index = ensure_index(data_root, rows)
        for round_, order in enumerate(rotations(contenders, getattr(args, "repeats", 1))):
            for label, mode in order:
                runs.append(run_one(label, mode, rows, index, data_root, work.resolve(), args, round_))
    return {
        "benchmark": NAME,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "sizes": sorted(sizes),
        "repeats": getattr(args, "repeats", 1),
        "runs": runs,
        "targets": example_gen_targets(runs),
        "failed": not all(r["ok"] for r in runs),
        "notes": ("start-up = process start → first output file; steady = records / (end of work − first record); "
                  "memory = peak of the process tree's summed RSS (shared libraries counted per process) and its anonymous part "
                  "(heap, without library pages), sampled every 0.2 s; "
                  "procs = most processes alive at once; CPU s = user+system of the tree; with several rounds, "
                  "each line is the contender's median run and `rounds` lists every round's total"),
        "descriptions": {**DESCRIPTIONS, "b": DESCRIPTIONS["b"].format(processes=args.eg_processes)},
    }


def _fmt(value: Any, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def markdown(result: dict[str, Any]) -> str:
    """The README table: one line per contender and size, then the targets."""
    descriptions = result["descriptions"]
    lines = [
        "| rows | contender | total s | rec/s overall | imports s | start-up s | steady rec/s | peak RSS MB | peak anon MB | procs | CPU s | rounds (total s) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in median_runs(result["runs"], ("rows", "contender")):
        name = descriptions.get(r["contender"]) or f"ExampleGen {r['runner'] or r['mode']}"
        if not r["ok"]:
            name += " **FAILED**"
        lines.append(
            f"| {r['rows']:,} | {name} | {r['total_s']:.1f} | {r['records_per_s']:,.0f} | {_fmt(r['imports_s'], '.1f')} "
            f"| {_fmt(r['startup_s'], '.1f')} "
            f"| {_fmt(r.get('steady_records_per_s'), ',.0f')} | {r['peak_rss_mb']:,.0f} | {r['peak_anon_mb']:,.0f} "
            f"| {r['max_processes']} | {r['cpu_s']:.0f} | {', '.join(f'{t:.1f}' for t in r['totals'])} |"
        )
    lines += ["", "| target | measured | met |", "|---|---:|:---:|"]
    for t in result["targets"]:
        met = "–" if t["met"] is None else ("yes" if t["met"] else "**no**")
        lines.append(f"| {t['target']} | {t['measured']} | {met} |")
    lines += ["", "_" + result["notes"] + "_"]
    return "\n".join(lines)
