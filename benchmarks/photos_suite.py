"""The photos benchmark (suite `photos`, issue 14): JPEG photographs to 224×224 RGB examples.

    python -m benchmarks.run_all --only photos                                  # 20k and 200k rows, jpeg and raw
    python -m benchmarks.run_all --only photos --photo-rows 20k --photo-storage jpeg
    python -m benchmarks.run_all --only photos --photo-rows 20k --photo-storage jpeg --photo-set mixed

Data (`--photo-set`): `crops`, distinct 300–500 px JPEG crops (q90, RGB 4:2:0) of scikit-learn's
sample photographs (`photo_data.ensure_photos`, under `<work>/photos`), an index repeating them to N
rows; or `mixed` (issue 46), one distinct file per row by default with varied aspect ratios, grayscale,
4:4:4 chroma, EXIF orientation, quality and progressive files (`photo_mixed`, under
`<work>/photos-mixed-<count>`). Per storage
kind (jpeg, raw) and size, one monitored child process per contender (`photos_bench`): (a) the
hand-written loop, (b) the same loop on a 2-process pool, (c) ExampleGen as it runs by default.
Figures as in `example_gen_suite.measure`; targets in `targets.photo_targets`. Whether the machine
was quiet is the run record's (`machine.run_record`: other processes' CPU while the suite ran); the
load average before each run is kept in its figures, but back to back it counts the previous
contender's own work, so it says nothing about the machine.

Hooks, called in this process when their module exists (else a note): ExampleGen's time per stage
(`photos_stages.stage_times`, per storage kind at the smallest size) and the reader comparison
(`photos_reader.reader_figures`) on (c)'s JPEG output at the smallest size, which is kept for it.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable

from testkit.photo_data import NUM_PHOTOS, ensure_photo_index, ensure_photos

from .example_gen_suite import contender_watch, measure
from .photo_mixed import ensure_mixed_photos
from .photos_bench import STORAGES
from .repeats import median_runs, rotations
from .suites import parse_size
from .targets import photo_targets

NAME = "photos"
DEFAULT_ROWS = (20_000, 200_000)
NOTES = ("start-up = process start → first output file; steady = images / (end of work − first record); "
         "memory = peak of the process tree's summed RSS (shared libraries counted per process) and its "
         "anonymous part (heap), sampled every 0.2 s; the memory target is checked on both; CPU s = "
         "user+system of the tree; with several rounds, each line is the contender's median run and `rounds` "
         "lists every round's total")  # how the tables read: rendered from here, also for older results
PHOTO_SETS = ("crops", "mixed")
DESCRIPTIONS = {"a": "(a) Pillow loop, 1 process", "b": "(b) same loop, 2-process pool", "c": "(c) ExampleGen (default)"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("photos")
    group.add_argument("--photo-rows", nargs="+", type=parse_size, default=list(DEFAULT_ROWS),
                       help="sizes in rows, independent of --rows (default 20k 200k)")
    group.add_argument("--photo-storage", nargs="+", choices=STORAGES, default=list(STORAGES),
                       help="how the 224×224 pixels are stored (default: jpeg raw)")
    group.add_argument("--photo-contenders", default="a,b,c", help="comma-separated subset of a,b,c (default a,b,c)")
    group.add_argument("--photo-set", choices=PHOTO_SETS, default="crops",
                       help="crops: the default RGB 4:2:0 crops; mixed: varied traits, one file per row (issue 46)")
    group.add_argument("--photo-count", type=int, default=None,
                       help=f"distinct photo files (default: crops {NUM_PHOTOS:,}, mixed the largest --photo-rows); "
                            "other crops counts go to <work>/photos-<count>")
    group.add_argument("--no-photo-hooks", action="store_true",
                       help="only the contenders: no per-stage times, reader or storage comparison")


def _contenders(text: str) -> list[str]:
    chosen = [c.strip() for c in text.split(",") if c.strip()]
    unknown = set(chosen) - {"a", "b", "c"}
    if unknown or not chosen:
        raise SystemExit(f"--photo-contenders: unknown {sorted(unknown)} or none; choose from a,b,c")
    return chosen


def _data_root(args: argparse.Namespace, work: Path, largest: int) -> tuple[Path, int]:
    """The photo set's folder, written unless already there, and its number of distinct files."""
    if getattr(args, "photo_set", "crops") == "mixed":
        count = args.photo_count or largest
        return ensure_mixed_photos(work / f"photos-mixed-{count}", count).resolve(), count
    count = args.photo_count or NUM_PHOTOS
    folder = "photos" if count == NUM_PHOTOS else f"photos-{count}"
    return ensure_photos(work / folder, count).resolve(), count


def run_one(label: str, storage: str, rows: int, index: Path, data_root: Path, work: Path,
            keep: bool, round_: int = 0) -> dict[str, Any]:
    """One contender at one size and storage kind; its output is deleted unless `keep`."""
    name = f"{label}-{storage}-{rows}" + (f"-r{round_}" if round_ else "")
    output = work / "photos-out" / name
    shutil.rmtree(output, ignore_errors=True)
    cmd = [sys.executable, "-m", "benchmarks.photos_bench", "--contender", label, "--storage", storage,
           "--index", str(index), "--data-root", str(data_root), "--output", str(output)]
    log_prefix = work / "logs" / f"{NAME}-{name}"
    figures = measure(NAME, f"{label} {storage}", rows, cmd, log_prefix, contender_watch(label, output))
    if not keep:
        shutil.rmtree(output, ignore_errors=True)
    return {"contender": label, "storage": storage, "rows": rows, "round": round_,
            "output": str(output) if keep else None, **figures}


def _hook(module: str, function: str) -> tuple[Callable[..., Any] | None, str]:
    """`benchmarks.<module>.<function>` and the module's `markdown`, or None and why not."""
    try:
        found = importlib.import_module(f"benchmarks.{module}")
    except ModuleNotFoundError as err:
        if err.name != f"benchmarks.{module}":
            raise  # the module exists but one of its imports is missing: a real error
        return None, f"skipped: benchmarks/{module}.py does not exist yet"
    if not hasattr(found, function):
        return None, f"skipped: benchmarks/{module}.py has no {function}()"
    return getattr(found, function), ""


def _call_hook(module: str, function: str, *args: Any) -> dict[str, Any]:
    call, note = _hook(module, function)
    if call is None:
        print(f"[{NAME}] {module}.{function}: {note}", file=sys.stderr, flush=True)
        return {"skipped": note}
    print(f"[{NAME}] {module}.{function} ...", file=sys.stderr, flush=True)
    try:
        return {"result": call(*args)}
    except Exception as err:  # noqa: BLE001  (a hook's failure is reported, the contenders' figures kept)
        return {"error": f"{type(err).__name__}: {err}"}


def _hooks(data_root: Path, storages: list[str], rows: int, examples: Path | None, work: Path) -> dict[str, Any]:
    index = ensure_photo_index(data_root, rows)
    stages = {storage: _call_hook("photos_stages", "stage_times", data_root, index, storage, rows)
              for storage in storages}
    if examples is None:
        reader = {"skipped": f"no ExampleGen (c) JPEG output at {rows:,} rows in this run"}
    else:
        reader = _call_hook("photos_reader", "reader_figures", examples, work)
    return {"stage_rows": rows, "stages": stages, "reader": reader}


def _hook_results(hooks: dict[str, Any]) -> list[dict[str, Any]]:
    return [*hooks["stages"].values(), hooks["reader"], hooks.get("storage", {})]


def run(args: argparse.Namespace, sizes: list[int], work: Path) -> dict[str, Any]:
    """Every storage kind, size (ascending) and contender; `sizes` (the 28×28 --rows) is not used."""
    del sizes
    work = work.resolve()
    contenders, rows_list = _contenders(args.photo_contenders), sorted(set(args.photo_rows))
    data_root, count = _data_root(args, work, rows_list[-1])
    keep_all = bool(getattr(args, "keep_outputs", False))
    runs = []
    for storage in args.photo_storage:
        for rows in rows_list:
            index = ensure_photo_index(data_root, rows)
            for round_, order in enumerate(rotations(contenders, getattr(args, "repeats", 1))):
                for label in order:  # the reader and storage comparisons read round 0's (c) at the smallest size
                    for_reader = label == "c" and rows == rows_list[0] and round_ == 0
                    runs.append(run_one(label, storage, rows, index, data_root, work, keep_all or for_reader, round_))
    firsts = [r for r in runs if r["contender"] == "c" and r["rows"] == rows_list[0] and r["round"] == 0 and r["ok"]]
    examples = next((Path(r["output"]) for r in firsts if r["storage"] == "jpeg"), None)
    outputs = {r["storage"]: Path(r["output"]) for r in firsts}
    if getattr(args, "no_photo_hooks", False):
        skipped = {"skipped": "--no-photo-hooks"}
        hooks = {"stage_rows": rows_list[0], "stages": {}, "reader": skipped, "storage": skipped}
    else:
        hooks = _hooks(data_root, list(args.photo_storage), rows_list[0], examples, work)
        hooks["storage"] = (_call_hook("photos_storage", "storage_figures", outputs) if len(outputs) > 1
                            else {"skipped": "needs ExampleGen (c) outputs of two storage kinds"})
    if not keep_all:
        for output in outputs.values():
            shutil.rmtree(output, ignore_errors=True)
    return {
        "benchmark": NAME,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "sizes": rows_list, "storages": list(args.photo_storage), "photos": count,
        "photo_set": getattr(args, "photo_set", "crops"),
        "repeats": getattr(args, "repeats", 1), "runs": runs,
        "targets": photo_targets(runs),
        "hooks": hooks,
        "failed": not all(r["ok"] for r in runs) or any("error" in h for h in _hook_results(hooks)),
        "notes": NOTES,
    }


def _fmt(value: Any, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def _runs_table(runs: list[dict[str, Any]]) -> list[str]:
    lines = ["| rows | contender | total s | start-up s | steady img/s | peak RSS MB | peak anon MB | CPU s "
             "| c/b steady | rounds (total s) |", "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    medians = median_runs(runs, ("rows", "contender"))
    for r in medians:
        name = DESCRIPTIONS[r["contender"]] + ("" if r["ok"] else " **FAILED**")
        b = next((o for o in medians if o["contender"] == "b" and o["rows"] == r["rows"] and o["ok"]), None)
        ratio = None
        if r["contender"] == "c" and b and r.get("steady_records_per_s") and b.get("steady_records_per_s"):
            ratio = r["steady_records_per_s"] / b["steady_records_per_s"]
        lines.append(f"| {r['rows']:,} | {name} | {r['total_s']:.1f} | {_fmt(r['startup_s'], '.1f')} "
                     f"| {_fmt(r.get('steady_records_per_s'), ',.0f')} | {r['peak_rss_mb']:,.0f} "
                     f"| {r['peak_anon_mb']:,.0f} | {r['cpu_s']:.0f} | {_fmt(ratio, '.2f')} "
                     f"| {', '.join(f'{t:.1f}' for t in r['totals'])} |")
    return lines


def _hook_markdown(module: str, entry: dict[str, Any]) -> str:
    """The hook module's own `markdown(result)` when it has one, else a stage → value table."""
    if "result" not in entry:
        return f"_{entry.get('skipped') or entry.get('error')}_"
    result = entry["result"]
    render = getattr(sys.modules.get(f"benchmarks.{module}"), "markdown", None)
    if callable(render):
        return render(result)
    if isinstance(result, dict) and all(isinstance(v, (int, float)) for v in result.values()):
        return "\n".join(["| stage | µs/row |", "|---|---:|"] + [f"| {k} | {v:,.1f} |" for k, v in result.items()])
    return f"```\n{json.dumps(result, indent=2, default=str)}\n```"


def markdown(result: dict[str, Any]) -> str:
    """Per storage kind: the contenders' table; then the targets; then the hooks' tables."""
    lines: list[str] = []
    if "photo_set" in result:  # older results (the default set) render as they were published
        lines += [f"Photo set `{result['photo_set']}`, {result['photos']:,} distinct files.", ""]
    for storage in result["storages"]:
        lines += [f"### storage {storage}", ""] + _runs_table([r for r in result["runs"] if r["storage"] == storage])
        lines.append("")
    lines += ["| target | measured | met |", "|---|---:|:---:|"]
    for t in result["targets"]:
        met = "–" if t["met"] is None else ("yes" if t["met"] else "**no**")
        lines.append(f"| {t['target']} | {t['measured']} | {met} |")
    hooks = result["hooks"]
    for storage, entry in hooks["stages"].items():
        lines += ["", f"### ExampleGen per stage, storage {storage}, {hooks['stage_rows']:,} rows", "",
                  _hook_markdown("photos_stages", entry)]
    lines += ["", f"### reader on ExampleGen's JPEG output ({hooks['stage_rows']:,} rows)", "",
              _hook_markdown("photos_reader", hooks["reader"])]
    if "storage" in hooks:
        lines += ["", f"### raw or JPEG storage: shardflow's reader on ExampleGen's outputs ({hooks['stage_rows']:,} rows)",
                  "", _hook_markdown("photos_storage", hooks["storage"])]
    lines += ["", f"_{NOTES}_"]
    return "\n".join(lines)
