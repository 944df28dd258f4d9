"""`make bench`: runs every benchmark suite, prints markdown tables, writes `<work>/<suite>.json`.

    python -m benchmarks.run_all                              # sizes 200k and 1M, all suites
    python -m benchmarks.run_all --rows 5k 20k                # a quick smoke run
    BENCH_ROWS="5000 20000" make bench                        # the same through make
    python -m benchmarks.run_all --only example_gen --eg-mode auto --eg-mode in_memory
    python -m benchmarks.run_all --only photos --photo-rows 20k --photo-storage jpeg   # its own sizes
    python -m benchmarks.run_all --only photos_e2e --e2e-rows 5k 20k                  # shardflow run vs Keras
    python -m benchmarks.run_all --only rerun_cache --rerun-rows 5k                   # reruns: what caching saves
    python -m benchmarks.run_all --only predict --predict-rows 5k 50k                  # shardflow predict vs a loop
    python -m benchmarks.run_all --only near_duplicates --nd-hashes 100k 1M           # perceptual hashes and search
    python -m benchmarks.run_all --only gate --gate-trials 1000                      # the regression gate, simulated
    python -m benchmarks.run_all --only label_issues --li-eval 5k                    # label issues against cleanlab
    python -m benchmarks.run_all --only detection_yolo --dy-images 300 --dy-epochs 3  # detection against YOLOv8n
    python -m benchmarks.run_all --publish ...     # also benchmarks/results/<suite>.json and docs/benchmarks.md

`make bench` passes `--publish`: each result, with when, how and on what machine it was measured
(`machine.run_record`), is kept in `benchmarks/results/` and docs/benchmarks.md is generated from
them (`docs_page`).

The suites and their interface: `suites.py`.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path
from types import ModuleType

from shardflow.core.process_defaults import apply_process_defaults

apply_process_defaults()  # `make bench`'s entry point: its suites and their children as the command runs

from .docs_page import RESULTS  # noqa: E402
from .docs_page import write as write_page  # noqa: E402
from .machine import OtherCpu, load_now, run_record  # noqa: E402
from .suites import SUITES, load_suites, parse_size  # noqa: E402,F401  (parse_size: the suites' flags)

DEFAULT_ROWS = "200000 1000000"


def build_parser(suites: list[ModuleType]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run_all", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", nargs="+", type=parse_size,
                        default=[parse_size(s) for s in os.environ.get("BENCH_ROWS", DEFAULT_ROWS).split()],
                        help=f"sizes in rows (env BENCH_ROWS, default {DEFAULT_ROWS!r})")
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("BENCH_WORK", "bench_out")),
                        help="work directory for data, outputs, logs and JSON (env BENCH_WORK, default bench_out)")
    parser.add_argument("--only", action="append", choices=[s.NAME for s in suites],
                        help="run only this suite; repeatable")
    parser.add_argument("--repeats", type=int, default=int(os.environ.get("BENCH_REPEATS", "1")),
                        help="rounds per size, the contenders' order rotated each round; targets take the median of "
                             "the per-round ratios (example_gen, photos and photos_e2e; env BENCH_REPEATS, default 1)")
    parser.add_argument("--publish", action="store_true",
                        help="keep each result in benchmarks/results/ and regenerate docs/benchmarks.md")
    for suite in suites:
        suite.add_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    suites = load_suites()
    parser = build_parser(suites)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if not args.only and os.environ.get("BENCH_ONLY"):
        args.only = os.environ["BENCH_ONLY"].split()
    args.work.mkdir(parents=True, exist_ok=True)
    failed = False
    command = shlex.join(["python", "-m", "benchmarks.run_all", *(sys.argv[1:] if argv is None else argv)])
    for suite in suites:
        if args.only and suite.NAME not in args.only:
            continue
        started, load_before = time.time(), load_now()
        with OtherCpu() as others:
            result = suite.run(args, sorted(set(args.rows)), args.work)
        result["run"] = run_record(command, started, load_before, others)
        path = args.work / f"{suite.NAME}.json"
        path.write_text(json.dumps(result, indent=2) + "\n")
        if args.publish:
            RESULTS.mkdir(parents=True, exist_ok=True)
            (RESULTS / path.name).write_text(path.read_text())
            print(f"published: {write_page()}", flush=True)
        print(f"\n## {suite.NAME} (sizes {', '.join(f'{n:,}' for n in result.get('sizes', []))})\n")
        print(suite.markdown(result))
        print(f"\nall figures: {path}", flush=True)
        failed = failed or bool(result.get("failed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
