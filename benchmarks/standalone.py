"""Running one benchmark suite on its own: `python -m benchmarks.<suite>` shares this `main`."""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from types import ModuleType


def main(suite: ModuleType, argv: list[str] | None = None) -> int:
    """Parses the suite's options (+ --work), runs it, writes `<work>/<NAME>.json`, prints its table."""
    parser = argparse.ArgumentParser(prog=f"python -m {getattr(suite.__spec__, 'name', suite.__name__)}", description=suite.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("BENCH_WORK", "bench_out")))
    suite.add_arguments(parser)
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    result = suite.run(args, work=args.work)
    path = args.work / f"{suite.NAME}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(suite.markdown(result))
    print(f"\nall figures: {path}", flush=True)
    return 1 if result["failed"] else 0
