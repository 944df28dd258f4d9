"""What each pipeline step does, on plain paths and lists: no kfp here, so it is testable alone.

The KFP components in `components.py` are thin: they take their artifacts' paths, call one function
here and copy the results into KFP artifacts. Each step runs a shardflow command through that
command's own CLI module (its parser and `main`), so a pipeline option string is exactly a CLI flag
(`example_gen_options=["--resize", "28x28"]`, `beam_args=["--runner=DataflowRunner", ...]`). Not
through `shardflow.cli`: it imports this package (compile, run, schedule), which would be a cycle.
An output may be a local path or a remote URI (s3://, gs://); the commands take either.

    launchers.example_gen(["train=/data/train.csv"], "/data", [], [], "/artifacts/examples")
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from types import ModuleType
from typing import Any, NoReturn

from ..core import storage
from ..core.errors import ConfigError
from ..core.hashing import sha256_of
from ..core.manifest import read_manifest
from ..evaluator import cli as evaluator_cli
from ..example_gen import cli as example_gen_cli
from ..example_gen.spans import has_span_pattern, pattern_matches
from ..pusher import push_model, resolve_model_reference  # noqa: F401  (re-exported for the components)
from ..trainer import cli as trainer_cli
from ..transform import cli as transform_cli
from ..validation import cli as validation_cli



class StepFailed(RuntimeError):
    """A shardflow command ended with a non-zero exit code."""


class _StepParser(argparse.ArgumentParser):
    """A bad option fails the step with StepFailed naming it, not with argparse's SystemExit."""

    def error(self, message: str) -> NoReturn:
        raise StepFailed(f"{self.prog}: error: {message}")


def _shardflow(command: str, cli: ModuleType, argv: list[str], takes_beam_options: bool = False) -> None:
    """`shardflow COMMAND ARGV` as the CLI runs it; `takes_beam_options`: unknown flags go to Beam (as
    for example-gen, transform and evaluate in shardflow.cli), otherwise they are an error."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # as shardflow.cli sets it, before TF is imported
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    parser = _StepParser(prog=f"shardflow {command}")
    cli.add_arguments(parser)
    args, extra = parser.parse_known_args(argv)
    if extra and not takes_beam_options:
        raise StepFailed(f"shardflow {command}: unrecognized arguments: {' '.join(extra)}")
    try:
        code = cli.main(args, extra)
    except ConfigError as err:
        raise StepFailed(f"shardflow {command}: error: {err}") from err
    if code != 0:
        raise StepFailed(f"shardflow {command} exited with code {code} (arguments: {' '.join(argv)})")


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
    argv = ["--data-root", data_root, "--output", output]
    for spec in index:
        argv += ["--index", spec]
    _shardflow("example-gen", example_gen_cli, argv + list(options) + list(beam_args), takes_beam_options=True)
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
    argv = ["--examples", target, "--output", output, "--drift-threshold", str(drift_threshold)]
    argv += ["--schema", schema] if schema else []
    _shardflow("validate", validation_cli, argv + (["--warn-only"] if warn_only else []))
    return storage.read_json(storage.join(output, "anomalies.json"))


def transform(examples: str, options: list[str], beam_args: list[str], output: str) -> dict:
    argv = ["--examples", examples, "--output", output] + list(options) + list(beam_args)
    _shardflow("transform", transform_cli, argv, takes_beam_options=True)
    manifest = read_manifest(output)
    return {"examples": {s: i.num_examples for s, i in manifest.splits.items()}}


def train(examples: str, options: list[str], warm_start: str, output: str) -> dict:
    argv = ["--examples", examples, "--output", output] + list(options)
    _shardflow("train", trainer_cli, argv + (["--warm-start", warm_start] if warm_start else []))
    return storage.read_json(storage.join(output, "training.json"))  # `output` may be an s3:// or gs:// URI


def evaluate(model_dir: str, examples: str, baseline: str, thresholds: list[str], max_regressions: list[str],
             slice_by: list[str], output: str) -> dict:
    argv = ["--model", model_dir, "--examples", examples, "--output", output]
    if baseline:
        argv += ["--baseline", baseline]
    for flag, values in (("--threshold", thresholds), ("--max-regression", max_regressions), ("--slice-by", slice_by)):
        for value in values:
            argv += [flag, value]
    _shardflow("evaluate", evaluator_cli, argv, takes_beam_options=True)  # it reports unknown flags itself
    return {"metrics": storage.read_json(storage.join(output, "metrics.json")),
            "blessing": storage.read_json(storage.join(output, "blessing.json"))}


def push(model_dir: str, serving_dir: str, source: dict[str, Any]) -> str:
    """The Pusher's copy to `serving_dir/<N>/` and pointer update (the pipeline's condition checked the blessing)."""
    return push_model(model_dir, serving_dir, source)[1]


def record_outcome(record_dir: str, pipeline_job: str, state: str, failed_task: str, message: str) -> str:
    """One JSON file per run in `record_dir` (the exit handler's job), written atomically."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = storage.join(record_dir, f"run-{stamp}-{os.getpid()}.json")
    storage.write_json(path, {"pipeline_job": pipeline_job, "state": state, "failed_task": failed_task,
                             "message": message, "finished_at": stamp})
    return str(path)
