"""Predict's `run(config)`: a served model over new CSV rows (or ExampleGen examples) on Beam, like TFX's BulkInferrer.

    summary = run(PredictConfig(model="serving", index="new.csv", data_root="photos", output="preds"))
    summary["predicted"], summary["rejected_by_reason"]

The output directory (an `OutputDir`: a killed run leaves no `predict.json`, a rerun starts clean):
`predictions/part-*.csv|parquet` (a detector's: `part-*.jsonl`, one JSON line per row with its boxes, and
`boxes.csv`, every row's boxes in ExampleGen's AutoML box layout: detections.py), `rejects.jsonl`,
`masks/*.png` (segmentation), `prediction_log/part-*.tfrecord` (with `prediction_log`), and `predict.json`,
written last.
"""
from __future__ import annotations

import shutil
import time
from collections import Counter
from typing import Any, Callable

from .. import __version__
from ..core import storage
from ..core.batch_memory import budget_bytes
from ..core.beam_setup import close_dask_client, describe_runner, make_pipeline, pipeline_options
from ..core.box_schema import DETECTION_TASK
from ..core.errors import ConfigError
from ..core.label_map_file import model_label_map
from ..core.manifest import read_manifest
from ..core.model_info import ModelInfo, read_model_info
from ..core.output_dir import OutputDir
from ..core.progress import ProgressReporter
from .config import MARKER, PredictConfig, PredictionError
from .plan import Inputs, first_examples, plan_examples, plan_index
from .pipeline import PredictTransform
from .writers import AUTOML_SUFFIX, SUFFIX, OutputSpec, PartInfo, list_parts

BOXES_CSV = "boxes.csv"
OWNED = ("predictions", "masks", "prediction_log", "rejects.jsonl", BOXES_CSV)


def output_location(root: str) -> OutputDir:
    """Predict's output directory: `predict.json` marks it complete."""
    return OutputDir(root, marker=MARKER, owned=OWNED)


def run(config: PredictConfig, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Predicts every row of the input into `config.output`; returns the summary written last."""
    model_dir = config.check_inputs()
    started = time.time()
    info = read_model_info(model_dir)
    detector = info.task == DETECTION_TASK
    if detector and config.format != "csv":
        raise ConfigError(f"format {config.format!r}: a detector's predictions are JSON lines and an AutoML box CSV "
                          "(the default format, csv)")
    out = output_location(config.output)
    with out.staged_run() as staging:
        inputs = plan_index(config, info, staging) if config.index is not None else plan_examples(config)
        spec = OutputSpec(info.task, tuple(info.class_names), min(config.top_k, info.num_classes),
                          "jsonl" if detector else config.format, staging, out.staged("masks"), inputs.sources,
                          config.prediction_log, model_dir, config.min_score,
                          stored_image_size(str(config.examples), info) if detector and config.examples else None,
                          _label_names(model_dir, info) if detector else (),
                          letterbox_target(info) if detector else None)
        runner, parts = _execute(config, model_dir, inputs, spec, echo)
        summary = _finish(config, out, inputs, parts, spec, info)
        summary.update({"model": model_dir, "model_reference": config.model, "runner": runner,
                        "seconds": round(time.time() - started, 3)})
        summary["rows_per_second"] = round(summary["rows"] / max(summary["seconds"], 1e-9), 1)
        out.mark_complete(summary)
    echo(f"predict: {summary['predicted']:,} predicted, {summary['rejected']:,} rejected of {summary['rows']:,} rows "
         f"in {summary['seconds']:.1f} s ({summary['rows_per_second']:,.0f} rows/s) on {runner}; {config.output}")
    return summary


def _label_names(model_dir: str, info: ModelInfo) -> tuple[tuple[int, str], ...]:
    """A detector's (served id, class name) pairs, from its label_map.pbtxt (core/label_map_file.py)."""
    try:
        label_map = model_label_map(model_dir, info)
    except (OSError, ValueError) as err:
        raise ConfigError(f"model {model_dir}: cannot read its label map: {err}") from None
    return tuple((i, name) for name, i in label_map.ids_by_name.items())


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


def _publish_parts(parts: list[PartInfo], spec: OutputSpec, out: OutputDir) -> list[str]:
    """Moves the listed parts (and their logs) to `predictions/part-NNNNN` in row order; their names."""
    names = []
    storage.makedirs(out.staged("predictions"))
    for number, part in enumerate(parts):
        name = f"part-{number:05d}{SUFFIX[spec.format]}"
        storage.move(storage.join(spec.staging_dir, "parts", part.name + SUFFIX[spec.format]),
                     storage.join(out.staged("predictions"), name))
        if spec.prediction_log:
            storage.move(storage.join(spec.staging_dir, "logs", part.name + ".tfrecord"),
                         storage.join(out.staged("prediction_log"), f"part-{number:05d}.tfrecord"))
        names.append(f"predictions/{name}")
    if spec.task == DETECTION_TASK:  # one box CSV for a labelling tool, its rows in the input's order
        _concatenate([storage.join(spec.staging_dir, "parts", part.name + AUTOML_SUFFIX) for part in parts],
                     out.staged(BOXES_CSV))
    return names


def letterbox_target(info: ModelInfo) -> tuple[int, int] | None:
    """(H, W) the model's ingest letterboxed its images into (ingest_ops' resize_mode), else None (stretched)."""
    ops = (info.extra.get("ingest_ops") or {}).get(info.extra.get("input")) or {}
    return tuple(ops["resize"]) if ops.get("resize_mode") == "letterbox" and ops.get("resize") else None  # type: ignore


def stored_image_size(examples: str, info: ModelInfo) -> tuple[int, int]:
    """(H, W) of the model's input image as the examples store it (one size for all): a record's pixel boxes."""
    features = read_manifest(examples).features
    name = info.extra.get("input") or next((n for n, f in features.items() if f.role == "image"), None)
    if name not in features or len(features[name].shape) < 2:
        raise ConfigError(f"examples {examples!r} have no image feature {name!r} of a known size")
    height, width = features[name].shape[:2]
    return int(height), int(width)


def _concatenate(files: list[str], target: str) -> None:
    with storage.open_write(target) as stream:
        for path in files:
            with storage.open_read(path) as source:
                shutil.copyfileobj(source, stream)


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
    _concatenate(inputs.reject_files, out.staged("rejects.jsonl"))
    tables = _publish_parts(parts, spec, out)
    names = ["predictions", "rejects.jsonl"] + (["masks"] if info.task == "segmentation" else [])
    names += [BOXES_CSV] if info.task == DETECTION_TASK else []
    out.publish(names + (["prediction_log"] if config.prediction_log else []))
    return {"component": "predict", "shardflow_version": __version__, "task": info.task, "input": inputs.describe,
            "rows": inputs.rows, "predicted": predicted, "rejected": rejected,
            "rejected_by_reason": dict(sorted(reasons.items())), "rejects_file": "rejects.jsonl",
            "format": config.format, "tables": tables, "top_k": spec.top_k,
            "masks": "masks/" if info.task == "segmentation" else None,
            "prediction_log": "prediction_log/" if config.prediction_log else None,
            "class_names": list(info.class_names),
            **({"boxes": sum(p.boxes for p in parts), "min_score": config.min_score, "boxes_csv": BOXES_CSV}
               if info.task == DETECTION_TASK else {})}
