"""`make bench`'s tracking suite: what `--tracking-uri` adds to a `shardflow run` (`tracking`).

    python -m benchmarks.run_all --only tracking --tracking-repeats 5

A real `mlflow server` on loopback (SQLite store, served artifacts). Each round runs `make run`'s pipeline on
the digits (10 epochs, threshold accuracy>=0.9) twice into fresh outputs, with and without `--tracking-uri`,
the order alternating between rounds (after one run not counted, which fills the page cache); then `shardflow track` of a finished run into a fresh experiment (the
send alone, MLflow's import included). Figures: each run's wall, the per-round difference and ratio, medians.

Target: tracking adds at most 3 % or 2 s to the run's wall (median of the rounds).
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

NAME = "tracking"
SHARDFLOW = str(Path(sys.executable).with_name("shardflow"))
MAX_SHARE, MAX_SECONDS = 0.03, 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("tracking")
    group.add_argument("--tracking-repeats", type=int, default=5, help="rounds of a run with and without (default 5)")


def _server(work: Path) -> tuple[subprocess.Popen, str]:
    import socket
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = open(work / "mlflow.log", "wb")  # noqa: SIM115 (the server's lifetime)
    argv = [str(Path(sys.executable).with_name("mlflow")), "server", "--backend-store-uri",
            f"sqlite:///{work / 'mlflow.db'}", "--artifacts-destination", str(work / "artifacts"),
            "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    server = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(1200):
        try:
            urllib.request.urlopen(endpoint + "/health", timeout=1)
            return server, endpoint
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"mlflow server did not start; see {work / 'mlflow.log'}")


def _timed(argv: list[str], fresh: Path | None = None) -> float:
    """Seconds of `argv`; `fresh`: an output folder removed first (a rerun into it would reuse every step)."""
    if fresh is not None and fresh.exists():
        shutil.rmtree(fresh)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:2])} failed: {(done.stderr or done.stdout)[-2000:]}")
    return time.perf_counter() - started


def _run_argv(demo: Path, out: Path) -> list[str]:
    digits = demo / "digits"
    return [SHARDFLOW, "run", "--index", f"train={digits / 'train.csv'}", "--index", f"eval={digits / 'eval.csv'}",
            "--data-root", str(digits), "--output", str(out), "--train-args", "--epochs 10",
            "--threshold", "accuracy>=0.9"]


def run(args: argparse.Namespace, sizes: list[int], work: Path) -> dict[str, Any]:
    del sizes
    import os
    import signal

    from shardflow.demo_data import write_all

    demo = work / "demo"
    write_all(str(demo))
    server, endpoint = _server(work)
    rounds = []
    _timed(_run_argv(demo, work / "warm-up" / "digits"), work / "warm-up")  # not counted: the first run reads everything from disk
    try:
        for index in range(args.tracking_repeats):
            walls = {}
            for tracked in ((False, True) if index % 2 == 0 else (True, False)):
                out = work / f"run-{index}-{'tracked' if tracked else 'plain'}" / "digits"
                extra = ["--tracking-uri", endpoint, "--experiment", f"bench-{index}"] if tracked else []
                walls[tracked] = _timed(_run_argv(demo, out) + extra, out.parent)
            send = _timed([SHARDFLOW, "track", "--output", str(work / f"run-{index}-plain" / "digits"),
                           "--tracking-uri", endpoint, "--experiment", f"send-{index}", "--registered-model", ""])
            rounds.append({"plain_s": round(walls[False], 2), "tracked_s": round(walls[True], 2),
                           "added_s": round(walls[True] - walls[False], 2),
                           "ratio": round(walls[True] / walls[False], 3), "track_command_s": round(send, 2)})
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    added = statistics.median(r["added_s"] for r in rounds)
    ratio = statistics.median(r["ratio"] for r in rounds)
    met = {f"tracking adds <= {MAX_SHARE:.0%} or <= {MAX_SECONDS:g} s (median of rounds)":
           ratio <= 1 + MAX_SHARE or added <= MAX_SECONDS}
    return {"rounds": rounds, "median_added_s": round(added, 2), "median_ratio": ratio, "met": met,
            "failed": not all(met.values())}


def markdown(result: dict[str, Any]) -> str:
    lines = ["| round | run (s) | run with --tracking-uri (s) | added (s) | ratio | `shardflow track` alone (s) |",
             "|---|---|---|---|---|---|"]
    for index, r in enumerate(result["rounds"], 1):
        lines.append(f"| {index} | {r['plain_s']} | {r['tracked_s']} | {r['added_s']} | {r['ratio']} | "
                     f"{r['track_command_s']} |")
    lines += ["", f"Median added: {result['median_added_s']} s; median ratio {result['median_ratio']}.", "",
              *(f"- {target}: {'met' if met else 'NOT met'}" for target, met in result["met"].items())]
    return "\n".join(lines)
