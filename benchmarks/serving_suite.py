"""`make bench`'s serving suite: what TF Serving would serve while pushes race, and what a push costs (`serving`).

    python -m benchmarks.run_all --only serving --serving-trials 20

1. The race (serving_race.py): two pusher processes, `--serving-trials` pairs of models gated against the same
   served one, on a local disk and on S3 (a moto server on loopback, conditional requests as S3 decides them:
   tests/moto_serialized.py); two pollers read the serving directory every 3 ms, as TF Serving does with
   `--model_config_file` (what Push writes) and with `--model_base_path` (the newest version folder). Counted per
   poller: versions it would have loaded that were a loser's copy, or not a whole model.
2. A push's cost: `shardflow push` of a SavedModel-sized tree (one 32 MB variables file and 40 small files)
   against a plain copy of the same tree to the same place (storage.copy_tree): the difference is the claim,
   the compare-and-swap, the clean-up, the store's probe and TF Serving's config. Median of `--serving-repeats`.

Targets: with the model config, 0 losers and 0 incomplete versions loaded on both schemes.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from testkit.serving_oracle import POLICIES, SPREAD

from .s3_loopback import new_bucket, start_moto, stop_moto
from .serving_race import race

NAME = "serving"
MODEL_BYTES, SMALL_FILES = 32 << 20, 40


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("serving")
    group.add_argument("--serving-trials", type=int, default=20, help="racing pairs of pushes per scheme (default 20)")
    group.add_argument("--serving-repeats", type=int, default=5, help="pushes timed per scheme (default 5)")


def _race_figures(root: str, scheme: str, trials: int) -> dict[str, Any]:
    outcome = race(root, trials, SPREAD[scheme])
    winners = set(outcome["winners"])
    figures: dict[str, Any] = {"trials": trials, "winners": len(winners)}
    for policy in POLICIES:
        seen = outcome["seen"][policy]
        figures[policy] = {"versions_loaded": sum(1 for o in seen if o[0] != "incomplete"),
                           "losers_loaded": len({o for o in seen if o[0] != "incomplete" and o not in winners}),
                           "incomplete_loaded": sum(1 for o in seen if o[0] == "incomplete")}
    return figures


def _model(root: str) -> str:
    from shardflow.core import storage

    model = storage.join(root, "model")
    storage.write_bytes(storage.join(model, "variables", "variables.data-00000-of-00001"), os.urandom(MODEL_BYTES))
    for index in range(SMALL_FILES):
        storage.write_bytes(storage.join(model, "assets", f"vocabulary-{index}.txt"), os.urandom(2048))
    for name in ("saved_model.pb", "fingerprint.pb", "variables/variables.index", "shardflow_model.json"):
        storage.write_bytes(storage.join(model, *name.split("/")), os.urandom(4096))
    return model


def _push_cost(root: str, repeats: int) -> dict[str, Any]:
    """Seconds of a plain copy and of a push of the same tree, each its median over `repeats` rounds."""
    from shardflow.core import storage
    from shardflow.pusher import push_model

    model, copies, pushes = _model(root), [], []
    for round_ in range(repeats):
        started = time.perf_counter()
        storage.copy_tree(model, storage.join(root, "copies", str(round_)))
        copies.append(time.perf_counter() - started)
        storage.write_bytes(storage.join(model, "fingerprint.pb"), os.urandom(4096))  # another model each round
        started = time.perf_counter()
        push_model(model, storage.join(root, "serving"), gated_against=None)
        pushes.append(time.perf_counter() - started)
    copy, pushed = statistics.median(copies), statistics.median(pushes)
    return {"copy_s": round(copy, 3), "push_s": round(pushed, 3),  # the ratio within each round: drift cancels
            "overhead_ms": round(1000 * statistics.median(p - c for p, c in zip(pushes, copies)), 1),
            "ratio": round(statistics.median(p / c for p, c in zip(pushes, copies)), 2)}


def run(args: argparse.Namespace, sizes: list[int], work: Path) -> dict[str, Any]:
    del sizes
    server, _ = start_moto(work)
    try:
        roots = {"local": str(work / f"serving-race-{uuid.uuid4().hex[:8]}"), "s3": new_bucket() + "/bench"}
        result: dict[str, Any] = {"race": {}, "push_cost": {}}
        for scheme, root in roots.items():
            result["race"][scheme] = _race_figures(root + "/race", scheme, args.serving_trials)
            result["push_cost"][scheme] = _push_cost(root + "/cost", args.serving_repeats)
    finally:
        stop_moto(server)
    result["met"] = {f"{scheme}: config loads no loser and no half copy":
                     figures["config"]["losers_loaded"] == 0 == figures["config"]["incomplete_loaded"]
                     for scheme, figures in result["race"].items()}
    return {**result, "failed": not all(result["met"].values())}


def markdown(result: dict[str, Any]) -> str:
    lines = ["| scheme | TF Serving pointed at | versions loaded | a loser's | not whole |", "|---|---|---|---|---|"]
    for scheme, figures in result["race"].items():
        for policy, label in (("config", "`models.config` (Push writes it)"), ("newest", "the newest folder")):
            shown = figures[policy]
            lines.append(f"| {scheme} ({figures['trials']} racing pairs) | {label} | {shown['versions_loaded']} | "
                         f"{shown['losers_loaded']} | {shown['incomplete_loaded']} |")
    lines += ["", "| scheme | plain copy (s) | push (s) | push − copy (ms, median of rounds) | push / copy (median of "
              "rounds) |", "|---|---|---|---|---|"]
    for scheme, cost in result["push_cost"].items():
        lines.append(f"| {scheme} | {cost['copy_s']} | {cost['push_s']} | {cost['overhead_ms']} | {cost['ratio']} |")
    lines += ["", *(f"- {target}: {'met' if met else 'NOT met'}" for target, met in result["met"].items())]
    return "\n".join(lines)
