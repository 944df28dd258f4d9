"""`run(config)`: will the model load and answer where it is served? Probe it in a TensorFlow-only process.

    from shardflow.infra_validator import InfraValidatorConfig, run
    result = run(InfraValidatorConfig(model="runs/train/model", evaluation="runs/eval", output="runs/infra"))
    result.blessed, result.reasons, result.load_seconds, result.latency

The probe (`probe.py`) runs as a script by path in its own interpreter (`python -I`: a fresh one, or one
started ahead that imported TensorFlow meanwhile: probe_process.py), importing
TensorFlow only, as a TF Serving container has nothing of shardflow: it loads the SavedModel,
calls every signature with the Evaluator's canaries, times each batch size and replays the warm-up
file built here (a record that would only repeat calls made is checked, not run again). This process
judges through the model's task (`tasks.task_for(info.task)`, components/tasks/): which outputs the probe saves
(`served_outputs`), whether the Evaluator's canary answers are read (`needs_canary_predictions`), what the
signatures fed lack (`signature_problems`) and the verdict on the answers (`judge_served`: probabilities within
`tolerance` of the Evaluator's, or a kind's own contract). Outputs in `config.output` (an `OutputDir`):
infra_validation.json, the warm-up file `assets.extra/tf_serving_warmup_requests` (the Pusher copies it into
the pushed version) and, last, INFRA_BLESSED or INFRA_NOT_BLESSED (one reason per line). A probe that crashes, times out,
cannot load the model or disagrees gives INFRA_NOT_BLESSED with a one-line reason.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .. import __version__
from ..core import storage
from ..core.batch_memory import budget_bytes
from ..core.config_record import recorded_options
from ..core.model_info import SERVING_SIGNATURE, read_model_info
from ..core.output_dir import OutputDir
from ..evaluator.outputs import METRICS
from ..tasks import task_for
from ..tasks.base import ServedCheck
from .canaries import Canaries, read_canaries, signature_inputs
from .config import INFRA_BLESSED, INFRA_NOT_BLESSED, REPORT, WARMUP_DIR, WARMUP_FILE, InfraValidatorConfig
from .errors import InfraValidationError
from .probe_process import PROBE, run_probe
from .warmup import warmup_file_bytes, warmup_records

Inputs = dict[str, tuple[str, list[bytes]]]


@dataclass(frozen=True)
class InfraValidation:
    blessed: bool
    reasons: list[str]  # why not blessed; what was checked when blessed
    load_seconds: float | None = None
    latency: list[dict[str, Any]] = field(default_factory=list)  # {signature, batch_size, calls, p50_ms, p99_ms}
    max_abs_diff: dict[str, float] = field(default_factory=dict)  # per signature, against the Evaluator's
    output: str = ""


def output_dir(root: str) -> OutputDir:
    return OutputDir(root, marker=INFRA_BLESSED, other_markers=(INFRA_NOT_BLESSED,), owned=(REPORT, WARMUP_DIR))


def run(config: InfraValidatorConfig, echo: Callable[[str], None] = print) -> InfraValidation:
    """Probes `config.model`; writes the report, the warm-up file and the verdict; returns the figures."""
    config.check_inputs()
    out, scratch = output_dir(config.output), tempfile.mkdtemp(prefix="shardflow-infra-")
    try:
        with out.staged_run():
            return _validate(config, out, scratch, echo)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _local_model(model: str, scratch: str) -> str:
    """The probe reads a local copy of a remote model (TF Serving reads buckets itself; plain TF has no s3://)."""
    if not storage.is_remote(model):
        return os.path.abspath(model)
    local = os.path.join(scratch, "model")
    storage.copy_tree(model, local)
    return local


def _validate(config: InfraValidatorConfig, out: OutputDir, scratch: str,
              echo: Callable[[str], None]) -> InfraValidation:
    started = time.perf_counter()
    model = _local_model(config.model, scratch)
    info = read_model_info(model)
    task = task_for(info.task)
    canaries = read_canaries(config.evaluation, with_probabilities=task.needs_canary_predictions)
    examples = _evaluated_examples(config.evaluation)
    fed, reasons = signature_inputs(model, canaries, examples)
    if SERVING_SIGNATURE not in fed:
        reasons.insert(0, f"the model has no {SERVING_SIGNATURE!r} signature taking serialized examples")
    if not reasons:
        reasons = task.signature_problems(sorted(fed))
    warmup = os.path.join(scratch, "tf_serving_warmup_requests")
    if fed:
        records = warmup_records(fed, config.warmup_requests, config.batch_sizes)
        with open(warmup, "wb") as file:
            file.write(warmup_file_bytes(records))
    probe: dict[str, Any] = {}
    deltas: dict[str, float] = {}
    passed: list[str] = []
    if not reasons:
        echo(f"infra-validate: probing {config.model} in a TensorFlow-only process "
             f"({len(canaries.records)} canaries, signatures {sorted(fed)})")
        probe, reasons = _run_probe(config, model, fed, warmup, scratch, list(task.served_outputs))
    if not reasons:
        judged = task.judge_served(ServedCheck(config, info, canaries, sorted(fed), os.path.join(scratch, "outputs"),
                                               probe["checked"], model, examples))
        deltas, passed = judged.deltas, judged.passed
        reasons = judged.reasons + _check_replay(probe, config.warmup_requests)
    report = _report(config, canaries, fed, probe, deltas, passed if not reasons else reasons,
                     time.perf_counter() - started, blessed=not reasons)
    _publish(out, report, warmup if fed else None)
    result = InfraValidation(report["blessed"], report["reasons"], probe.get("load_seconds"), probe.get("latency", []),
                             deltas, config.output)
    echo(f"infra-validate: {'INFRA_BLESSED' if result.blessed else 'INFRA_NOT_BLESSED'}: {'; '.join(result.reasons)}")
    return result


def _evaluated_examples(evaluation: str) -> str:
    examples = storage.read_json(storage.join(evaluation, METRICS)).get("examples")
    if not examples:
        raise InfraValidationError(f"evaluation {evaluation}: metrics.json names no examples")
    return examples


def _write_inputs(fed: Inputs, scratch: str) -> dict[str, dict[str, str]]:
    inputs = {}
    for name, (input_name, values) in fed.items():
        path = os.path.join(scratch, "inputs", f"{name}.tfrecord")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as file:
            file.write(warmup_file_bytes(values))  # plain TFRecord framing, one value per record
        inputs[name] = {"input": input_name, "file": path}
    return inputs


def _run_probe(config: InfraValidatorConfig, model: str, fed: Inputs, warmup: str, scratch: str,
               saved: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The probe's result and [] when it succeeded; else what it got to and [a one-line reason]."""
    outputs, result_path = os.path.join(scratch, "outputs"), os.path.join(scratch, "result.json")
    os.makedirs(outputs, exist_ok=True)
    request = {"model": model, "inputs": _write_inputs(fed, scratch), "batch_sizes": list(config.batch_sizes),
               "memory_bytes": budget_bytes(config.memory_mb), "latency_calls": config.latency_calls,
               "latency_seconds": config.latency_seconds, "warmup": warmup, "outputs": outputs, "result": result_path, "saved_outputs": saved}
    request_path = os.path.join(scratch, "request.json")
    with open(request_path, "w", encoding="utf-8") as file:
        json.dump(request, file)
    started = time.perf_counter()
    done = run_probe(request_path, config.timeout)
    seconds = round(time.perf_counter() - started, 3)
    if done.returncode is None:
        return {"seconds": seconds, "standby": done.standby}, [
            f"the probe did not finish within {config.timeout:g} s (timeout)"]
    result = _read_json(result_path)
    result.update(exit_code=done.returncode, seconds=seconds, standby=done.standby)
    if done.returncode == 0 and result.get("ok"):
        return result, []
    error = result.get("error") or _last_line(done.stderr) or (
        f"killed by signal {-done.returncode}" if done.returncode < 0 else f"exit status {done.returncode}")
    return result, [f"the TensorFlow-only probe failed: {error}"]


def _read_json(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except (OSError, ValueError):
        return {}


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _check_replay(probe: dict[str, Any], expected: int) -> list[str]:
    replayed = (probe.get("warmup") or {}).get("records", 0)
    return [] if replayed == expected else [f"the warm-up file replayed {replayed} of {expected} records"]


def _report(config: InfraValidatorConfig, canaries: Canaries, fed: Inputs, probe: dict[str, Any],
            deltas: dict[str, float], reasons: list[str], seconds: float, blessed: bool) -> dict[str, Any]:
    """`reasons`: why not blessed, or what passed (the load and warm-up lines are added here)."""
    if blessed:
        reasons = [f"loads in a TensorFlow-only process in {probe['load_seconds']:.2f} s", *reasons,
                   f"warm-up file: {probe['warmup']['records']} requests replayed, {probe['warmup'].get('run', 0)} "
                   f"of them run (the others repeat a signature's batch size and canaries it answered)"]
    evaluated = storage.join(config.evaluation, METRICS)
    return {
        "component": "infra_validator", "shardflow_version": __version__, "options": recorded_options(config),
        "model": config.model,
        "evaluation": config.evaluation,
        "evaluated_model": storage.read_json(evaluated).get("model") if storage.is_file(evaluated) else None,
        "blessed": blessed, "reasons": reasons, "tolerance": config.tolerance, "canaries": len(canaries.records),
        "signatures": sorted(fed), "load_seconds": probe.get("load_seconds"),
        "max_abs_diff": {name: value if np.isfinite(value) else None for name, value in deltas.items()},
        "first_call_ms": {name: part["first_call_ms"] for name, part in (probe.get("checked") or {}).items()},
        "example_bytes": {name: part.get("example_bytes") for name, part in (probe.get("checked") or {}).items()},
        "latency": probe.get("latency", []),
        "warmup": {"file": WARMUP_FILE if fed else None, "requests": config.warmup_requests if fed else 0,
                   "replayed": (probe.get("warmup") or {}).get("records", 0),
                   "run": (probe.get("warmup") or {}).get("run", 0)},
        "probe": {"command": [sys.executable, "-I", PROBE], "exit_code": probe.get("exit_code"),
                  "seconds": probe.get("seconds"), "started_ahead": bool(probe.get("standby")),
                  "tensorflow": probe.get("tensorflow"),
                  "modules": probe.get("modules", []), "error": probe.get("error")},
        "seconds": round(seconds, 3),
    }


def _publish(out: OutputDir, report: dict[str, Any], warmup: str | None) -> None:
    storage.write_text(out.staged(REPORT), json.dumps(report, indent=2) + "\n")
    if warmup:
        storage.copy_file(warmup, storage.join(out.staged(WARMUP_DIR), WARMUP_FILE.split("/", 1)[1]))
    out.publish((REPORT, WARMUP_DIR))
    marker = INFRA_BLESSED if report["blessed"] else INFRA_NOT_BLESSED
    out.mark_complete("\n".join(report["reasons"]) + "\n", marker)
