"""The Trainer's input-pipeline benchmark (suite `trainer`): readers side by side, then LeNet training.

    python -m benchmarks.trainer_suite                        # 20k examples
    python -m benchmarks.trainer_suite --trainer-rows 100k --trainer-shards 4
    python -m benchmarks.run_all --only trainer --rows 200k   # run_all's sizes: smallest, within [20k, 100k]

Data: 28×28 grayscale PNG files (`data.ensure_images`, an index repeating them to N rows), ingested
once by ExampleGen in-process (raw storage, every row in split "train"; kept under
`<work>/trainer/examples-<N>…`, not measured). Then two child processes (`trainer_bench`), each
fresh: one times the readers (a)–(e), (r) the previous reader and the diagnostics that split
(c)'s cost (see `trainer_readers`) taking turns pass by pass, one times LeNet epochs fed by (c) and
by (e) in-memory float32 tensors. Every contender
has one warm-up pass/epoch (not timed); figures are medians over the timed ones.
`--trainer-isolate` runs every contender in its own process instead (no turns: more sensitive to
a shared machine's changing load).

Targets (issue 4): c/a ≥ 50, c/b ≥ 5, c/d ≥ 0.9 where d is the faster of the two bytes-only
ceilings (shards interleaved or one after another), and training with (c) ≥ 0.95 × in memory.
(c)/(r), the gain over the previous reader, is printed for reference; every ratio is also given
from CPU µs/example, which moves far less than examples/s when other processes share the cores.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from .data import ensure_images, ensure_index
from .monitor import Watch, child_env, run_monitored
from .transform_bench import parse_rows

NAME = "trainer"
MIN_ROWS, MAX_ROWS = 20_000, 100_000
READERS = ("a", "b", "c", "d", "d1", "e", "r", "c_rd", "c_u8")
TRAINING = ("c", "e")
DESCRIPTIONS = {
    "a": "(a) `from_generator` + PIL decode per file (seed tutorials)",
    "b": "(b) per-file tf.data: `read_file` + `decode_png`, AUTOTUNE",
    "c": "(c) shardflow `build_stream` + cast to float32/255",
    "d": "(d) TFRecord bytes only, shards interleaved, batch",
    "d1": "(d1) TFRecord bytes only, shards in turn, batch",
    "e": "(e) in memory `from_tensor_slices(uint8).batch`",
    "r": "(r) previous shardflow reader (record-by-record interleave, shuffle, batch) + cast",
    "c_rd": "diagnostic: (c)'s read step alone (record chunks → batches), bytes only",
    "c_u8": "diagnostic: (c) without the cast",
}
TRAIN_DESCRIPTIONS = {"c": "LeNet fed by (c) shardflow's reader", "e": "LeNet fed by in-memory float32 tensors"}
TARGETS = (("c", "a", 50.0), ("c", "b", 5.0), ("c", "d", 0.9))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("trainer")
    group.add_argument("--trainer-rows", type=parse_rows,
                       help=f"examples (env BENCH_TRAINER_ROWS; default: run_all's smallest size within "
                            f"[{MIN_ROWS:,}, {MAX_ROWS:,}], {MIN_ROWS:,} alone)")
    group.add_argument("--trainer-batch-size", type=int, default=128, help="every contender's batch size")
    group.add_argument("--trainer-shuffle-buffer", type=int, default=10_000, help="shuffle buffer of (c) and (r)")
    group.add_argument("--trainer-shards", type=int, help="ExampleGen --num-shards (default: ExampleGen's choice)")
    group.add_argument("--trainer-passes", type=int, default=5, help="timed passes per reader (after 1 warm-up)")
    group.add_argument("--trainer-epochs", type=int, default=7, help="timed epochs per model (after 1 warm-up)")
    group.add_argument("--trainer-isolate", action="store_true", help="one process per contender, no turns")


def choose_rows(args: argparse.Namespace, sizes: list[int] | None) -> int:
    """--trainer-rows, else BENCH_TRAINER_ROWS, else run_all's smallest size clamped to [20k, 100k]."""
    if args.trainer_rows:
        return args.trainer_rows
    if os.environ.get("BENCH_TRAINER_ROWS"):
        return parse_rows(os.environ["BENCH_TRAINER_ROWS"])
    return min(max(min(sizes), MIN_ROWS), MAX_ROWS) if sizes else MIN_ROWS


def ensure_examples(work: Path, index: Path, data_root: Path, rows: int, shards: int | None) -> Path:
    """ExampleGen output of the index, made once (in a child: ExampleGen in-process); its manifest marks it done."""
    out = work / "trainer" / (f"examples-{rows}" + (f"-{shards}shards" if shards else ""))
    if (out / "manifest.json").is_file():
        return out
    print(f"[{NAME}] ExampleGen for {rows:,} rows (not measured) ...", file=sys.stderr, flush=True)
    cmd = [sys.executable, "-m", "benchmarks.trainer_bench", "ingest", "--index", str(index),
           "--data-root", str(data_root), "--output", str(out)] + (["--num-shards", str(shards)] if shards else [])
    m = run_monitored(cmd, work / "logs" / f"{NAME}-example-gen-{out.name}", Watch(), child_env())
    if m.returncode != 0:
        raise RuntimeError(f"ExampleGen failed (rc={m.returncode}); see {work / 'logs'}")
    return out


def _child(command: str, contenders: tuple[str, ...], common: list[str], extra: list[str], log: Path) -> dict[str, Any]:
    """One fresh child process timing `contenders`; returns its report plus the machine's load."""
    cmd = [sys.executable, "-m", "benchmarks.trainer_bench", command, *common, *extra]
    for name in contenders:
        cmd += ["-c", name]
    print(f"[{NAME}] {command}: {', '.join(contenders)} ...", file=sys.stderr, flush=True)
    m = run_monitored(cmd, log, Watch(), child_env())
    if m.returncode != 0 or not m.report:
        return {"failed": True, "returncode": m.returncode, "log": f"{log}.err"}
    load = {"load_before": m.load_before, "load_after": os.getloadavg()[0], "peak_rss_mb": m.peak_rss_mb}
    return {name: {**figures, **load} for name, figures in m.report.items()}


def _measure(command: str, contenders: tuple[str, ...], common: list[str], extra: list[str], work: Path,
             isolate: bool) -> dict[str, Any]:
    logs = work / "logs"
    groups = [(c,) for c in contenders] if isolate else [contenders]
    out: dict[str, Any] = {}
    for group in groups:
        report = _child(command, group, common, extra, logs / f"{NAME}-{command}-{'-'.join(group)}")
        out.update({name: report for name in group} if report.get("failed") else report)
    return out


def _ratio(runs: dict[str, Any], top: str, bottom: str, key: str = "median_per_s") -> float | None:
    """top/bottom of a rate, or bottom/top of a cost (`median_cpu_us_per_example`): > 1 means top is better."""
    a, b = runs.get(top, {}), runs.get(bottom, {})
    if key not in a or key not in b:
        return None
    return a[key] / b[key] if key == "median_per_s" else b[key] / a[key]


def _ceilings(readers: dict[str, Any]) -> dict[str, Any]:
    """(d) for the ratios: the faster of the two bytes-only readers, and (in CPU cost) the cheaper one."""
    runs = [readers[n] for n in ("d", "d1") if "median_per_s" in readers.get(n, {})]
    if not runs:
        return {}
    return {"median_per_s": max(r["median_per_s"] for r in runs),
            "median_cpu_us_per_example": min(r["median_cpu_us_per_example"] for r in runs)}


def _target(label: str, target: float | None, runs: dict[str, Any], top: str, bottom: str) -> dict[str, Any]:
    """A ratio and whether it meets its target; `target=None` is a reference line (met is None)."""
    value = _ratio(runs, top, bottom)
    met = None if value is None or target is None else value >= target
    return {"ratio": label, "target": target, "value": value, "met": met,
            "cpu_value": _ratio(runs, top, bottom, "median_cpu_us_per_example"), "official": target is not None}


def _targets(readers: dict[str, Any], training: dict[str, Any]) -> list[dict[str, Any]]:
    ratios = {**readers, "d": _ceilings(readers)}
    out = [_target(f"c/{bottom}", target, ratios, "c", bottom) for _, bottom, target in TARGETS]
    return out + [_target("train c/e", 0.95, training, "c", "e"), _target("c/r", None, ratios, "c", "r")]


def run(args: argparse.Namespace, sizes: list[int] | None = None, work: Path | None = None) -> dict[str, Any]:
    work = (work or Path("bench_out")).resolve()
    rows = choose_rows(args, sizes)
    data_root = ensure_images(work / "data").resolve()
    index = ensure_index(data_root, rows)
    examples = ensure_examples(work, index, data_root, rows, args.trainer_shards)
    manifest = json.loads((examples / "manifest.json").read_text())
    common = ["--examples", str(examples), "--index", str(index), "--data-root", str(data_root),
              "--batch-size", str(args.trainer_batch_size), "--shuffle-buffer", str(args.trainer_shuffle_buffer)]
    readers = _measure("readers", READERS, common, ["--passes", str(args.trainer_passes)], work, args.trainer_isolate)
    training = _measure("train", TRAINING, common, ["--epochs", str(args.trainer_epochs)], work, args.trainer_isolate)
    targets = _targets(readers, training)
    failed = any(r.get("failed") for r in (*readers.values(), *training.values()))
    return {
        "benchmark": NAME, "date": time.strftime("%Y-%m-%d %H:%M:%S"), "sizes": [rows], "rows": rows,
        "shards": len(manifest["splits"]["train"]["shards"]), "batch_size": args.trainer_batch_size,
        "shuffle_buffer": args.trainer_shuffle_buffer, "passes": args.trainer_passes, "epochs": args.trainer_epochs,
        "isolated": args.trainer_isolate,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "readers": readers, "training": training, "targets": targets, "failed": failed,
        "notes": ("rates = medians of per-pass (per-epoch) examples/s after one warm-up; contenders of one table "
                  "take turns in one fresh process unless isolated; CPU µs/example = process CPU (all threads) "
                  "per example, the cost, less sensitive to other users than the wall-clock rate; 'in CPU cost' = "
                  "the same ratio from CPU µs/example (cost of bottom / cost of top): the ratio when both are "
                  "limited by CPU, as on a fully loaded machine; d for the ratios = the faster (cheaper) of d "
                  "and d1; c/r = the gain over the previous reader (reference, no target)"),
    }


def _num(value: float | None, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def _rate(figures: dict[str, Any]) -> str:
    if "median_per_s" not in figures:
        return "**FAILED**"
    return f"{figures['median_per_s']:,.0f}"


def _spread(figures: dict[str, Any]) -> str:
    return f"{figures['worst_per_s']:,.0f}–{figures['best_per_s']:,.0f}" if "worst_per_s" in figures else "–"


def _loads(result: dict[str, Any]) -> str:
    figures = [f for table in ("readers", "training") for f in result[table].values() if "load_before" in f]
    values = [f[k] for f in figures for k in ("load_before", "load_after")]
    return f"{min(values):.1f}–{max(values):.1f}" if values else "–"


def markdown(result: dict[str, Any]) -> str:
    lines = [f"{result['rows']:,} examples of 28×28×1 uint8 in {result['shards']} shard(s), batch "
             f"{result['batch_size']}, shuffle buffer {result['shuffle_buffer']:,}; {result['passes']} timed passes, "
             f"{result['epochs']} timed epochs; {result['machine']['cpus']} CPUs, 1-min load average "
             f"{_loads(result)} during the runs"
             + ("" if result["rows"] >= MIN_ROWS else f" (**below the issue's {MIN_ROWS:,}: a smoke run**)"), "",
             "| reader | examples/s (median) | min–max | CPU µs/example |", "|---|---:|---:|---:|"]
    for name, figures in result["readers"].items():
        cpu = figures.get("median_cpu_us_per_example")
        lines.append(f"| {DESCRIPTIONS[name]} | {_rate(figures)} | {_spread(figures)} | {_num(cpu, '.1f')} |")
    lines += ["", "| training (LeNet, Adam) | examples/s (median) | min–max | CPU µs/example | final loss |",
              "|---|---:|---:|---:|---:|"]
    for name, figures in result["training"].items():
        loss, cpu = figures.get("final_loss"), figures.get("median_cpu_us_per_example")
        lines.append(f"| {TRAIN_DESCRIPTIONS[name]} | {_rate(figures)} | {_spread(figures)} | "
                     f"{_num(cpu, '.1f')} | {_num(loss, '.3f')} |")
    lines += ["", "| ratio | target | measured (examples/s) | met | in CPU cost |", "|---|---:|---:|---|---:|"]
    for t in result["targets"]:
        met = "–" if t["met"] is None else ("met" if t["met"] else "**not met**")
        label = t["ratio"] + ("" if t["official"] else " (reference)")
        target = "–" if t["target"] is None else f"≥ {t['target']:g}"
        lines.append(f"| {label} | {target} | {_num(t['value'], '.3g')} | {met} "
                     f"| {_num(t.get('cpu_value'), '.3g')} |")
    return "\n".join(lines + ["", "_" + result["notes"] + "_"])


def main(argv: list[str] | None = None) -> int:
    from . import standalone

    return standalone.main(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
