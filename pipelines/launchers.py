"""What each pipeline step does, on plain paths and lists: no kfp here, so it is testable alone.

The KFP components in `components.py` are thin: they take their artifacts' paths, call one function
here and copy the results into KFP artifacts. Each step runs a shardflow command through the same
argument translation as the CLI, so a pipeline option string is exactly a CLI flag
(`example_gen_options=["--resize", "28x28"]`, `beam_args=["--runner=DataflowRunner", ...]`).

    launchers.example_gen(["train=/data/train.csv"], "/data", [], [], "/artifacts/examples")
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from ..core.atomic import atomic_write_json
from ..core.hashing import sha256_of
from ..core.manifest import read_manifest
from ..example_gen.spans import has_span_pattern, pattern_matches

SERVING_POINTER = "CURRENT.json"
LATEST = "latest"


class StepFailed(RuntimeError):
    """A shardflow command ended with a non-zero exit code."""


def _shardflow(argv: list[str]) -> None:
    from ..cli import main

    code = main(argv)
    if code != 0:
        raise StepFailed(f"shardflow {argv[0]} exited with code {code} (arguments: {' '.join(argv[1:])})")


def data_fingerprint(index: list[str], data_root: str) -> str:
    """SHA-256 over the index arguments and every index file's bytes: changes whenever a CSV does.

    A span pattern ({SPAN}, {YYYY}{MM}{DD}) covers every file it matches, so a new span changes it too.
    """
    digest = hashlib.sha256(json.dumps([sorted(index), data_root]).encode())
    for spec in sorted(index):
        pattern = spec.split("=", 1)[-1]
        paths = pattern_matches(pattern) if has_span_pattern(pattern) else [pattern]
        for path in paths:
            digest.update(f"{path}:{sha256_of(path)}".encode())
    return digest.hexdigest()


def example_gen(index: list[str], data_root: str, options: list[str], beam_args: list[str], output: str) -> dict:
    argv = ["example-gen", "--data-root", data_root, "--output", output]
    for spec in index:
        argv += ["--index", spec]
    _shardflow(argv + list(options) + list(beam_args))
    manifest = read_manifest(output)
    return {"examples": {s: i.num_examples for s, i in manifest.splits.items()},
            "rejected": manifest.extra.get("rejected", 0), "rejected_by_reason": manifest.extra.get("rejected_by_reason", {})}


def validate(examples: str, output: str, drift_threshold: float, warn_only: bool, schema: str = "") -> dict:
    """Runs the data validation; raises (failing the step) on anomalies unless `warn_only`.

    `schema`: a curated schema.pbtxt (e.g. kept from an earlier data version); '' = the one inferred on train.
    """
    # A window of spans is validated where its statistics are: the newest span, the data that is new.
    newest = read_manifest(examples).extra.get("newest_span")
    target = newest["dir"] if newest else examples
    argv = ["validate", "--examples", target, "--output", output, "--drift-threshold", str(drift_threshold)]
    argv += ["--schema", schema] if schema else []
    _shardflow(argv + (["--warn-only"] if warn_only else []))
    return json.loads((Path(output) / "anomalies.json").read_text())


def transform(examples: str, options: list[str], beam_args: list[str], output: str) -> dict:
    _shardflow(["transform", "--examples", examples, "--output", output] + list(options) + list(beam_args))
    manifest = read_manifest(output)
    return {"examples": {s: i.num_examples for s, i in manifest.splits.items()}}


def resolve_model_reference(reference: str, serving_dir: str) -> str:
    """`latest` → the model the serving pointer names ('' when nothing was pushed yet); a path as is."""
    if reference != LATEST:
        return reference
    pointer = Path(serving_dir) / SERVING_POINTER
    return json.loads(pointer.read_text())["model"] if pointer.is_file() else ""


def train(examples: str, options: list[str], warm_start: str, output: str) -> dict:
    argv = ["train", "--examples", examples, "--output", output] + list(options)
    _shardflow(argv + (["--warm-start", warm_start] if warm_start else []))
    return json.loads((Path(output) / "training.json").read_text())


def evaluate(model_dir: str, examples: str, baseline: str, thresholds: list[str], max_regressions: list[str],
             slice_by: list[str], output: str) -> dict:
    argv = ["evaluate", "--model", model_dir, "--examples", examples, "--output", output]
    if baseline:
        argv += ["--baseline", baseline]
    for flag, values in (("--threshold", thresholds), ("--max-regression", max_regressions), ("--slice-by", slice_by)):
        for value in values:
            argv += [flag, value]
    _shardflow(argv)
    return {"metrics": json.loads((Path(output) / "metrics.json").read_text()),
            "blessing": json.loads((Path(output) / "blessing.json").read_text())}


def push(model_dir: str, serving_dir: str, source: dict[str, Any]) -> str:
    """Copies a blessed model to `serving_dir/<N>/` (TF Serving's integer versions), then repoints CURRENT.json.

    The copy is made under a temporary name and renamed, and the pointer is replaced atomically, so a
    server watching `serving_dir` never sees half a model and the pointer never names a missing one.
    """
    root = Path(serving_dir)
    root.mkdir(parents=True, exist_ok=True)
    versions = [int(p.name) for p in root.iterdir() if p.is_dir() and p.name.isdigit()]
    version = max(versions, default=0) + 1
    staging = root / f".pushing-{version}-{os.getpid()}"
    shutil.copytree(model_dir, staging)
    os.replace(staging, root / str(version))
    atomic_write_json(root / SERVING_POINTER, {"version": version, "model": str(root / str(version)),
                                               "pushed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                               **source})
    return str(root / str(version))


def record_outcome(record_dir: str, pipeline_job: str, state: str, failed_task: str, message: str) -> str:
    """One JSON file per run in `record_dir` (the exit handler's job), written atomically."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = Path(record_dir) / f"run-{stamp}-{os.getpid()}.json"
    atomic_write_json(path, {"pipeline_job": pipeline_job, "state": state, "failed_task": failed_task,
                             "message": message, "finished_at": stamp})
    return str(path)
