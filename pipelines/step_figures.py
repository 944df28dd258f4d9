"""The one figure `shardflow run` prints on a step's line, read from the step's KFP outputs.

Each function takes the task's outputs (artifact or parameter name → value) and returns the text, ''
when there is none; pipelines/steps.py gives each step its function, step_log.key_figure calls it.

    examples({"examples": artifact})   # "eval 180, train 1617 examples, 0 rejected"
"""
from __future__ import annotations

import json
from pathlib import Path

from ..validation.report import JSON_NAME as ANOMALIES


def _metadata(outputs: dict, name: str) -> dict:
    artifact = outputs.get(name)
    return dict(getattr(artifact, "metadata", None) or {})


def _counts(counts: dict) -> str:
    return ", ".join(f"{split} {int(n)}" for split, n in sorted(counts.items())) + " examples"


def none(outputs: dict) -> str:
    del outputs
    return ""


def fingerprint(outputs: dict) -> str:
    return f"data {str(outputs.get('Output', ''))[:12]}"


def examples(outputs: dict) -> str:
    found = _metadata(outputs, "examples")
    return _counts(found.get("examples", {})) + f", {int(found.get('rejected', 0))} rejected"


def anomalies(outputs: dict) -> str:
    path = Path(getattr(outputs.get("report"), "path", "") + ".d") / ANOMALIES
    found = json.loads(path.read_text()).get("num_anomalies") if path.is_file() else None
    return "" if found is None else f"{found} anomalies"


def transformed(outputs: dict) -> str:
    return _counts(_metadata(outputs, "transformed").get("examples", {}))


def tuning(outputs: dict) -> str:
    found = _metadata(outputs, "hyperparameters")
    if not found.get("values"):
        return "no search (no --tune-args)"
    return f"best {found['values']}: {found.get('objective')} {found.get('score', 0):.3f} ({int(found.get('trials', 0))} trials)"


def training(outputs: dict) -> str:
    metrics = _metadata(outputs, "training_metrics")
    shown = [f"{k} {metrics[k]:.3f}" for k in ("loss", "accuracy", "val_loss", "val_accuracy") if k in metrics]
    steps = _metadata(outputs, "model").get("optimizer_steps")
    return ", ".join(shown + ([f"{int(steps)} optimizer steps"] if steps is not None else []))


def evaluation(outputs: dict) -> str:
    metrics = _metadata(outputs, "metrics")
    shown = [f"{k} {metrics[k]:.3f}" for k in ("accuracy", "pixel_accuracy", "mean_iou", "ap50", "ap") if k in metrics]
    blessed = outputs.get("blessed", metrics.get("blessed"))
    return ", ".join(shown + ([f"blessed: {'yes' if blessed else 'no'}"] if blessed is not None else []))


def serving_check(outputs: dict) -> str:
    return ("serving check: " + ("passed" if outputs.get("infra_blessed") else "failed")
            + f", loads in {float(_metadata(outputs, 'infra').get('load_seconds') or 0):.1f} s")


def served(outputs: dict) -> str:
    return f"served: {outputs.get('Output', '')}"


def predictions(outputs: dict) -> str:
    found = _metadata(outputs, "predictions")
    return f"{int(found.get('predicted', 0))} predicted, {int(found.get('rejected', 0))} rejected"


def record(outputs: dict) -> str:
    return f"record: {outputs.get('Output', '')}"
