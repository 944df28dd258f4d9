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

A suite is a module `benchmarks.<name>_suite` with `NAME`, `add_arguments(parser)`,
`run(args, sizes, work) -> dict` (JSON-able; key "failed" when something went wrong) and
`markdown(result) -> str`, listed in `SUITES`.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
from pathlib import Path
from types import ModuleType

SUITES = ("example_gen", "transform", "trainer", "evaluator", "photos", "photos_e2e", "rerun_cache",
          "near_duplicates", "predict")
MODULES = {"predict": "predict_bench"}  # suites whose module is not benchmarks.<name>_suite
DEFAULT_ROWS = "200000 1000000"
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([kKmM]?)$")


def parse_size(text: str) -> int:
    """`5000`, `200_000`, `200k`, `1M`, `1.5m` → a row count."""
    match = _SIZE.match(text.replace("_", "").strip())
    if not match:
        raise argparse.ArgumentTypeError(f"not a row count: {text!r} (e.g. 5000, 200k, 1M)")
    number, unit = float(match.group(1)), match.group(2).lower()
    rows = int(number * {"": 1, "k": 1_000, "m": 1_000_000}[unit])
    if rows < 1:
        raise argparse.ArgumentTypeError(f"row count must be >= 1, got {text!r}")
    return rows


def load_suites(names: tuple[str, ...] = SUITES) -> list[ModuleType]:
    return [importlib.import_module(f"benchmarks.{MODULES.get(name, name + '_suite')}") for name in names]


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
    for suite in suites:
        suite.add_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    suites = load_suites()
    parser = build_parser(suites)
    args = parser.parse_args(argv)
    if not args.only and os.environ.get("BENCH_ONLY"):
        args.only = os.environ["BENCH_ONLY"].split()
    args.work.mkdir(parents=True, exist_ok=True)
    failed = False
    for suite in suites:
        if args.only and suite.NAME not in args.only:
            continue
        result = suite.run(args, sorted(set(args.rows)), args.work)
        path = args.work / f"{suite.NAME}.json"
        path.write_text(json.dumps(result, indent=2) + "\n")
        print(f"\n## {suite.NAME} (sizes {', '.join(f'{n:,}' for n in result.get('sizes', []))})\n")
        print(suite.markdown(result))
        print(f"\nall figures: {path}", flush=True)
        failed = failed or bool(result.get("failed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
