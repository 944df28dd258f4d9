"""Predict's `run(config)`: a served model over new CSV rows (or ExampleGen examples) on Beam, like TFX's BulkInferrer.

    summary = run(PredictConfig(model="serving", index="new.csv", data_root="photos", output="preds"))
    summary["predicted"], summary["rejected_by_reason"]

The output directory (an `OutputDir`: a killed run leaves no `predict.json`, a rerun starts clean):
`predictions/part-*<suffix>` (`.csv` or `.parquet`; each kind's own: `Task.prediction_spec`), `rejects.jsonl`,
the kind's own items (`Task.prediction_items`: a mask folder, a box CSV; components/tasks/<kind>/predictions.py),
`prediction_log/part-*.tfrecord` (with `prediction_log`), and `predict.json`, written last. The model's kind
(`tasks.task_for(info.task)`) decides what a row is; this module names none.
"""
from __future__ import annotations

import time
from collections import Counter
from typing import Any, Callable

from .. import __version__
from ..core import storage
from ..core.batch_memory import budget_bytes
from ..core.beam_setup import close_dask_client, describe_runner, make_pipeline, pipeline_options
from ..core.model_info import ModelInfo, read_model_info
from ..core.output_dir import OutputDir
from ..core.progress import ProgressReporter
from ..tasks import TASKS, task_for
from ..tasks.base import Task
from .config import MARKER, PredictConfig
from .errors import PredictionError
from .plan import Inputs, first_examples, plan_examples, plan_index
from .pipeline import PredictTransform
from .writers import OutputSpec, PartInfo, list_parts

# Every kind's own items too: a rerun with a model of another kind removes what the last one wrote.
OWNED = ("predictions", "prediction_log", "rejects.jsonl") + tuple(dict.fromkeys(
    item for task in TASKS.values() for item in task.prediction_items))


def output_location(root: str) -> OutputDir:
    """Predict's output directory: `predict.json` marks it complete."""
    return OutputDir(root, marker=MARKER, owned=OWNED)


def run(config: PredictConfig, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Predicts every row of the input into `config.output`; returns the summary written last."""
    model_dir = config.check_inputs()
    started = time.time()
    info = read_model_info(model_dir)
    task = task_for(info.task)
    task.check_prediction_config(config)
    out = output_location(config.output)
    with out.staged_run() as staging:
        inputs = plan_index(config, info, staging) if config.index is not None else plan_examples(config)
        spec = OutputSpec(info.task, task.prediction_spec(config, info, model_dir, out.staged), staging,
                          inputs.sources, config.prediction_log, model_dir)
        runner, parts = _execute(config, model_dir, inputs, spec, echo)
        summary = _finish(config, out, inputs, parts, spec, info)
        summary.update({"model": model_dir, "model_reference": config.model, "runner": runner,
                        "seconds": round(time.time() - started, 3)})
        summary["rows_per_second"] = round(summary["rows"] / max(summary["seconds"], 1e-9), 1)
        out.mark_complete(summary)
    echo(f"predict: {summary['predicted']:,} predicted, {summary['rejected']:,} rejected of {summary['rows']:,} rows "
         f"in {summary['seconds']:.1f} s ({summary['rows_per_second']:,.0f} rows/s) on {runner}; {config.output}")
    return summary


def _execute(config: PredictConfig, model_dir: str, inputs: Inputs, spec: OutputSpec,
             echo: Callable[[str], None]) -> tuple[str, list[PartInfo]]:
    from .inference import check_requested_batch, serving_handler  # TensorFlow: once the inputs are known right

    if config.batch_size is not None:
        check_requested_batch(model_dir, first_examples(inputs), budget_bytes(config.memory_mb), config.batch_size)
    options = pipeline_options(config.beam_args, inputs.work_seconds, num_chunks=len(inputs.units),
                               gil_free=inputs.gil_free)
    handler = serving_handler(model_dir, budget_bytes(config.memory_mb), config.batch_size)
    echo(f"predict: {inputs.rows:,} rows in {len(inputs.units)} work units on {describe_runner(options)}")
    with ProgressReporter(storage.join(spec.staging_dir, "done"), inputs.rows, 15.0, echo):
        with make_pipeline(options) as pipeline:
            _ = pipeline | "Predict" >> PredictTransform(inputs.units, inputs.prepare, handler, spec)
    close_dask_client(pipeline)
    return describe_runner(options), list_parts(spec.staging_dir)


def _publish_parts(parts: list[PartInfo], spec: OutputSpec, task: Task, out: OutputDir) -> tuple[list[str], dict]:
    """Moves the listed parts (and their logs) to `predictions/part-NNNNN` in row order, then lets the kind write
    its own items from them; the parts' names and the kind's entries of predict.json."""
    names, suffix = [], spec.table.suffix
    storage.makedirs(out.staged("predictions"))
    for number, part in enumerate(parts):
        name = f"part-{number:05d}{suffix}"
        storage.move(storage.join(spec.staging_dir, "parts", part.name + suffix),
                     storage.join(out.staged("predictions"), name))
        if spec.prediction_log:
            storage.move(storage.join(spec.staging_dir, "logs", part.name + ".tfrecord"),
                         storage.join(out.staged("prediction_log"), f"part-{number:05d}.tfrecord"))
        names.append(f"predictions/{name}")
    stems = [storage.join(spec.staging_dir, "parts", part.name) for part in parts]
    return names, task.finish_predictions(spec.table, stems, [part.counts for part in parts])


def _finish(config: PredictConfig, out: OutputDir, inputs: Inputs, parts: list[PartInfo], spec: OutputSpec,
            info: ModelInfo) -> dict[str, Any]:
    """Rejects merged, counts reconciled, items published; the summary (without the run's timing)."""
    counts = inputs.counts()
    reasons: Counter = Counter()
    for chunk in counts:
        reasons.update(chunk["rejected"])
    prepared = sum(c["rows"] for c in counts)
    predicted, rejected = sum(p.rows for p in parts), sum(reasons.values())
    if prepared != inputs.rows or predicted + rejected != inputs.rows:
        raise PredictionError(f"rows do not reconcile: {predicted:,} predicted + {rejected:,} rejected, "
                              f"{prepared:,} prepared, but the input has {inputs.rows:,} rows (counted independently)")
    storage.concatenate(inputs.reject_files, out.staged("rejects.jsonl"))
    task = task_for(info.task)
    tables, entries = _publish_parts(parts, spec, task, out)
    names = ["predictions", "rejects.jsonl", *task.prediction_items]
    out.publish(names + (["prediction_log"] if config.prediction_log else []))
    return {"component": "predict", "shardflow_version": __version__, "task": info.task, "input": inputs.describe,
            "rows": inputs.rows, "predicted": predicted, "rejected": rejected,
            "rejected_by_reason": dict(sorted(reasons.items())), "rejects_file": "rejects.jsonl",
            "format": config.format, "tables": tables, "top_k": min(config.top_k, info.num_classes),
            "prediction_log": "prediction_log/" if config.prediction_log else None,
            "class_names": list(info.class_names), **entries}
