"""Reruns on photos: what caching saves when `shardflow run` is repeated into the same run directory.

    python -m benchmarks.rerun_cache --rows 5000 --epochs 3     # figures → <work>/rerun_cache.json
    python -m benchmarks.run_all --only rerun_cache --rerun-rows 5k

Data: `photos_e2e`'s N JPEG photos (224×224 RGB, stored as JPEG). Three runs into one run directory,
one after the other: (1) the first run; (2) the identical rerun; (3) a rerun after one CSV row's
label changed. Measured for each: wall, peak RSS of the process tree, each step's state (ok or
cached) and the bytes the run directory gained (symbolic links to reused outputs count as
nothing: they copy nothing). Targets: the identical rerun < 20 % of the first run's wall and < 1 %
of its bytes; the edited rerun runs every step again.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from .monitor import Watch, child_env, run_monitored
from .photos_e2e import make_data

STEP_LINE = re.compile(r"^([a-z-]+)\s+(ok|cached|FAILED)\b")
TARGETS = {"rerun_wall_ratio": 0.20, "rerun_disk_ratio": 0.01}
CACHEABLE = ("example-gen", "validate", "transform", "train")


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def one_run(root: Path, out: Path, epochs: int, label: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "shardflow", "run", "--index", f"train={root / 'train.csv'}",
               "--index", f"eval={root / 'eval.csv'}", "--data-root", str(root), "--output", str(out),
               "--example-gen-args", "--resize 224x224 --channels rgb --storage jpeg",
               "--train-args", f"--epochs {epochs} --batch-size 64", "--threshold", "accuracy>=0"]
    log = out.parent / f"{out.name}-{label}"
    measured = run_monitored(command, log, Watch(), env=child_env())
    if measured.returncode:
        raise RuntimeError(f"shardflow run ({label}) failed (exit {measured.returncode}); see {log}.err")
    states = {m[1]: m[2] for m in map(STEP_LINE.match, Path(f"{log}.out").read_text().splitlines()) if m}
    return {"wall_s": measured.wall_s, "peak_rss_mb": measured.peak_rss_mb, "load_before": measured.load_before,
            "steps": states, "bytes": _bytes(out)}


def _edit_one_row(root: Path) -> None:
    lines = (root / "train.csv").read_text().splitlines()
    name, label = lines[1].rsplit(",", 1)
    lines[1] = f"{name},{1 - int(label)}"
    (root / "train.csv").write_text("\n".join(lines) + "\n")


def measure(rows: int, epochs: int, work: Path) -> dict[str, Any]:
    source = make_data(work, rows)
    root = work / f"rerun-data-{rows}"  # a copy: the edit must not touch the shared photos' CSVs
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(source, root, symlinks=True, copy_function=os.link)
    for name in ("train.csv", "eval.csv"):  # hard links share bytes: the CSVs are copied for real
        (root / name).unlink()
        shutil.copyfile(source / name, root / name)
    out = work / f"rerun-run-{rows}"
    shutil.rmtree(out, ignore_errors=True)
    first = one_run(root, out, epochs, "first")
    again = one_run(root, out, epochs, "again")
    again["bytes_added"] = again["bytes"] - first["bytes"]
    _edit_one_row(root)
    edited = one_run(root, out, epochs, "edited")
    checks = {"rerun_wall_ratio": again["wall_s"] / first["wall_s"],
              "rerun_disk_ratio": again["bytes_added"] / first["bytes"]}
    met = {name: checks[name] < TARGETS[name] for name in TARGETS}
    met["rerun_reuses_cacheable_steps"] = all(again["steps"].get(s) == "cached" for s in CACHEABLE)
    met["edited_reruns_every_step"] = all(edited["steps"].get(s) == "ok" for s in CACHEABLE)
    return {"rows": rows, "epochs": epochs, "first": first, "again": again, "edited": edited, "checks": checks,
            "targets": TARGETS, "met": met}


def markdown(result: dict[str, Any]) -> str:
    lines = [f"Reruns on {result['rows']:,} photos, {result['epochs']} epochs (load before each run: "
             + ", ".join(f"{result[k]['load_before']:.1f}" for k in ("first", "again", "edited")) + ")", "",
             "| run | wall s | peak RSS MB | run dir MB | steps cached |", "|---|---:|---:|---:|---|"]
    for key, title in (("first", "first"), ("again", "identical rerun"), ("edited", "one CSV row edited")):
        run = result[key]
        cached = ", ".join(s for s, state in run["steps"].items() if state == "cached") or "none"
        lines.append(f"| {title} | {run['wall_s']:.1f} | {run['peak_rss_mb']:,.0f} | {run['bytes'] / 1e6:,.1f} | "
                     f"{cached} |")
    checks = result["checks"]
    lines += ["", f"Identical rerun: {checks['rerun_wall_ratio']:.1%} of the first run's wall, "
              f"{checks['rerun_disk_ratio']:.2%} of its bytes added. Targets met: "
              + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in result["met"].items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rerun_cache", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=5_000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("BENCH_WORK", "bench_out")))
    args = parser.parse_args(argv)
    result = measure(args.rows, args.epochs, args.work)
    (args.work / "rerun_cache.json").write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result), flush=True)
    return 0 if all(result["met"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
