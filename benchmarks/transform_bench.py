"""Transform benchmark: throughput (examples/s) and peak memory of `shardflow transform` at two sizes.

    python -m benchmarks.transform_bench                              # 20k and 100k 28×28 examples
    python -m benchmarks.transform_bench --transform-rows 2k 5k       # a quick smoke run
    python -m benchmarks.transform_bench --transform-mode in_memory --transform-mode multi_processing

Per size, the ExampleGen output is made once and kept (`<work>/transform/examples-<rows>`, not
measured), from the same 28×28 PNG files as the ExampleGen benchmark. Then `python -m shardflow
transform` (default preprocessing: per-channel standardization with full-pass analyzers on train)
runs in a monitored subprocess (see `monitor`). Figures: total wall time (process start → exit,
imports included), examples/s overall (examples of every split / total), time to the first
transformed part file (imports + pipeline start + the analysis pass), the transform phase's
examples/s (examples / (last batch done − first part)), and the peak of the process tree's summed
RSS and USS. Results: `<work>/transform.json` and a markdown table on stdout.

The module is also a `run_all` suite (`NAME`, `add_arguments`, `run`, `markdown`).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from .data import ensure_examples
from .monitor import Watch, child_env, run_monitored

NAME = "transform"
DEFAULT_ROWS = "20000 100000"
MODES = ("auto", "in_memory", "multi_processing")
_UNITS = {"": 1, "k": 1_000, "m": 1_000_000}


def parse_rows(text: str) -> int:
    """`5000`, `20k`, `1M` → a row count."""
    text = text.strip().lower().replace("_", "")
    unit = text[-1] if text and text[-1] in "km" else ""
    try:
        rows = int(float(text[: len(text) - len(unit)]) * _UNITS[unit])
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a row count: {text!r} (e.g. 5000, 20k, 1M)") from None
    if rows < 1:
        raise argparse.ArgumentTypeError(f"row count must be >= 1, got {text!r}")
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("transform")
    group.add_argument("--transform-rows", nargs="+", type=parse_rows,
                       help=f"sizes for Transform (env BENCH_TRANSFORM_ROWS, default {DEFAULT_ROWS!r})")
    group.add_argument("--transform-mode", action="append", choices=MODES, default=[],
                       help="FnApiRunner mode; repeat to compare (default: auto = shardflow's own choice)")
    group.add_argument("--transform-keep-outputs", action="store_true", help="keep the transformed shards")


def _mode_flags(mode: str) -> list[str]:
    if mode == "in_memory":
        return ["--direct_running_mode=in_memory"]
    if mode == "multi_processing":
        return ["--direct_running_mode=multi_processing", f"--direct_num_workers={os.cpu_count() or 2}"]
    return []


def run_one(rows: int, mode: str, work: Path, keep: bool) -> dict[str, Any]:
    """One monitored Transform run; returns its figures."""
    examples = ensure_examples(work, "transform", rows)
    output = work / "transform" / f"out-{mode}-{rows}"
    shutil.rmtree(output, ignore_errors=True)
    staging = output / ".staging"
    watch = Watch([str(staging / "parts" / "*" / "*")], done_dir=str(staging / "done"))
    cmd = [sys.executable, "-m", "shardflow", "transform", "--examples", str(examples), "--output", str(output),
           *_mode_flags(mode)]
    print(f"[{NAME}] {mode} at {rows:,} rows ...", file=sys.stderr, flush=True)
    m = run_monitored(cmd, work / "logs" / f"{NAME}-{mode}-{rows}", watch, child_env())
    manifest = json.loads((output / "manifest.json").read_text()) if m.returncode == 0 else {}
    count = sum(s["num_examples"] for s in manifest.get("splits", {}).values())
    figures: dict[str, Any] = {
        "rows": rows, "mode": mode, "returncode": m.returncode, "examples": count, "ok": m.returncode == 0 and count == rows,
        "total_s": m.wall_s, "examples_per_s": count / m.wall_s, "first_part_s": m.first_file_s,
        "peak_rss_mb": m.peak_rss_mb, "peak_uss_mb": m.peak_uss_mb, "cpu_s": m.cpu_s, "load_before": m.load_before,
        "runner": manifest.get("runner", ""), "run_seconds": manifest.get("seconds"),
        "bytes": sum(s["bytes"] for split in manifest.get("splits", {}).values() for s in split["shards"]),
    }
    if m.first_file_s is not None and m.last_done_s is not None and m.last_done_s > m.first_file_s:
        figures["transform_examples_per_s"] = count / (m.last_done_s - m.first_file_s)
    if not figures["ok"]:
        print(f"[{NAME}] {mode} at {rows:,} rows FAILED (rc={m.returncode}); see {work / 'logs'}", file=sys.stderr)
    if not keep:
        shutil.rmtree(output, ignore_errors=True)
    return figures


def _growth(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Peak memory at the largest size minus that at the smallest, per mode."""
    out = []
    for mode in dict.fromkeys(r["mode"] for r in runs):
        done = sorted((r for r in runs if r["mode"] == mode and r["ok"]), key=lambda r: r["rows"])
        if len(done) >= 2:
            small, large = done[0], done[-1]
            out.append({"mode": mode, "from_rows": small["rows"], "to_rows": large["rows"],
                        "rss_growth_mb": large["peak_rss_mb"] - small["peak_rss_mb"],
                        "uss_growth_mb": large["peak_uss_mb"] - small["peak_uss_mb"]})
    return out


def run(args: argparse.Namespace, sizes: list[int] | None = None, work: Path | None = None) -> dict[str, Any]:
    """Every mode at every Transform size (`--transform-rows`, else BENCH_TRANSFORM_ROWS, else the default)."""
    work = (work or Path("bench_out")).resolve()
    rows = args.transform_rows or [parse_rows(s) for s in os.environ.get("BENCH_TRANSFORM_ROWS", DEFAULT_ROWS).split()]
    runs = [run_one(n, mode, work, args.transform_keep_outputs)
            for n in sorted(set(rows)) for mode in (args.transform_mode or ["auto"])]
    return {
        "benchmark": NAME, "date": time.strftime("%Y-%m-%d %H:%M:%S"), "sizes": sorted(set(rows)),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "runs": runs, "memory_growth": _growth(runs), "failed": not all(r["ok"] for r in runs),
        "notes": ("total = process start → exit (imports included); first part = start → first transformed part "
                  "(imports, pipeline start, analysis pass); transform phase = examples / (last batch done − first "
                  "part); memory = peak of the process tree's summed RSS and USS, sampled every 0.2 s"),
    }


def _fmt(value: Any, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def markdown(result: dict[str, Any]) -> str:
    lines = ["| examples | runner | total s | ex/s overall | first part s | transform phase ex/s | peak RSS MB "
             "| peak USS MB | output MB |", "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in result["runs"]:
        name = (r["runner"] or r["mode"]) + ("" if r["ok"] else " **FAILED**")
        lines.append(f"| {r['rows']:,} | {name} | {r['total_s']:.1f} | {r['examples_per_s']:,.0f} "
                     f"| {_fmt(r['first_part_s'], '.1f')} | {_fmt(r.get('transform_examples_per_s'), ',.0f')} "
                     f"| {r['peak_rss_mb']:,.0f} | {r['peak_uss_mb']:,.0f} | {r['bytes'] / 1e6:,.1f} |")
    for g in result["memory_growth"]:
        lines.append(f"\nPeak memory growth {g['from_rows']:,} → {g['to_rows']:,} examples ({g['mode']}): "
                     f"RSS {g['rss_growth_mb']:+.0f} MB, USS {g['uss_growth_mb']:+.0f} MB")
    return "\n".join(lines + ["", "_" + result["notes"] + "_"])


def main(argv: list[str] | None = None) -> int:
    from . import standalone

    return standalone.main(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
