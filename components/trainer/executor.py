"""`run(config)`: train a Keras model on streamed shards and export it for serving.

    from shardflow.trainer import ExportOptions, FitOptions, InputOptions, TrainerConfig, run

    result = run(TrainerConfig(input=InputOptions(examples="runs/digits/transform"), fit=FitOptions(epochs=5),
                               export=ExportOptions(output="runs/digits/model")))
    result["history"][-1]["val_accuracy"]

Outputs in `config.export.output` (a local path or an s3:// / gs:// URI): `model/` (SavedModel +
shardflow_model.json), `history.json`, `curves.png`, `input_report.json`, `workers/` and
`tensorboard/` (TensorBoard logs, written while training runs: `train/` and `validation/` with loss
and metrics per epoch and `batch_*` every few steps, `input/` with the input-rate figures),
`training.json` (the summary, the completion marker: written last), and `checkpoints/` while a run
is unfinished: rerunning with the same output resumes from it. One life cycle (`OutputDir`): the
marker is removed first; locally the model and reports are staged and renamed into place, on an
object store they are written in place after the previous run's are deleted.
"""
from __future__ import annotations

import contextlib
import hashlib
import time
from typing import Callable, Iterator

import numpy as np
import tensorflow as tf
import tf_keras as keras

from .. import __version__
from ..core import storage
from ..core.cloud_env import enable_tensorflow_filesystems
from ..core.box_schema import DETECTION_TASK
from ..core.errors import ConfigError
from ..core.folds import FoldSelection
from ..core.model_info import ModelInfo
from ..core.output_dir import OutputDir
from .callbacks import HistoryFile, TrainTimer
from .config import TrainerConfig
from .distribution import (Placement, choose_strategy, cluster_from_env, deterministic_ops, expected_replicas,
                           precision_policy)
from .export import export_model
from .features import RawToModel
from .keras_autograph import leave_tf_keras_unconverted
from .input_pipeline import Streams, build_streams, check_enough_shards, corrupt_shards_named, train_example_count
from .record_order import RecordOrderWriter
from .resume import StreamOrder, StreamRecord, resumed_record, run_global_batch
from .hyperparameters import apply_hyperparameters
from .box_stream import check_detection_ops
from .model_builder import build_model, detector_grid
from .optimizers import task_augment, task_batch_size, task_box_loss
from .outputs import CHECKPOINTS, CURVES, HISTORY_NAME, MODEL, SUMMARY_NAME, TENSORBOARD
from .training_loop import fit_phases
from .progress import StepProgress
from .reports import plot_curves, probe_input_rate, probe_step_rate, write_input_report, write_rate_scalars
from .task import TrainingTask, resolve_task

# Published by a finished run, before the marker. history.json and checkpoints/ are not: they must
# outlive a killed run for the rerun to resume (tensorboard/ too: it is watched while training runs);
# workers/ is written by each worker itself.
PUBLISHED = (MODEL, "input_report.json", CURVES)


def output_dir(root: str) -> OutputDir:
    return OutputDir(root, marker=SUMMARY_NAME, owned=PUBLISHED)


def run(config: TrainerConfig, echo: Callable[[str], None] = print) -> dict:
    started = time.time()
    locations = (config.input.examples, config.input.transform, config.export.output, config.model.warm_start,
                 config.hyperparameters)
    enable_tensorflow_filesystems(loc for loc in locations if loc)
    leave_tf_keras_unconverted()  # before any model or trace: ~13 s of a photo Trainer's first epoch
    config = apply_hyperparameters(config)
    with deterministic_ops(config.input.deterministic):  # before any stream or model: TensorFlow reads it as they build
        return _run(config, started, echo)


def _run(config: TrainerConfig, started: float, echo: Callable[[str], None]) -> dict:
    task = resolve_task(config.input)
    config = config.replaced(batch_size=task_batch_size(task.kind, config.input.batch_size),
                             augment=task_augment(task.kind, config.input.augment),
                             box_loss=task_box_loss(task.kind, config.model.box_loss))
    check_task_options(config, task)
    if config.input.eval_split is not None:
        check_enough_shards(task, config.input.eval_split, cluster_from_env()[0])  # before workers connect
    out = output_dir(config.export.output)
    checkpoints = storage.join(out.root, CHECKPOINTS)
    stream_order = StreamOrder.of(config.input, task.train_manifest, train_example_count(task, config.input))
    # A finished run's backups are left to be removed. A backup of another order, or without its record, and a
    # worker count that cannot resume are refused before workers connect.
    record = None if out.is_complete() else resumed_record(checkpoints, stream_order)
    resuming = record is not None
    replicas = expected_replicas()
    global_batch = run_global_batch(record, config.input.batch_size, replicas, echo)
    placement = choose_strategy()
    if config.input.data_service and placement.num_workers > 1:
        raise ConfigError(f"--data-service feeds one training process; this run has {placement.num_workers} workers "
                          "(TF_CONFIG): train on one worker with the GPUs of its node")
    to_model = RawToModel(task, _tft_layer(task), raw_pixels=config.model.is_backbone)
    order = _record_order(config, task, placement, global_batch, fresh=not resuming)
    with precision_policy(config.model.mixed_precision):
        with placement.strategy.scope():
            model = build_model(task, config)  # warm-started before the output is touched: it may be this output's
        grid = detector_grid(model) if task.kind == DETECTION_TASK else None  # a detector's targets fit its grid
        streams = build_streams(task, config.input, global_batch, placement.num_workers, to_model, placement.strategy,
                                order, echo, grid=grid)
        resume_state = StreamRecord(checkpoints, stream_order, global_batch, streams.steps_per_epoch,
                                    write=placement.is_chief, order_file=order)
        with _chief_run(out, placement):
            return _train(config, task, placement, out, model, to_model, streams, resume_state, started, echo)


def check_task_options(config: TrainerConfig, task: TrainingTask) -> None:
    """Options that do not fit the task, refused in one line before anything is built."""
    if task.kind != DETECTION_TASK:
        return
    check_detection_ops(config.input.augment)
    if config.input.class_weight is not None:
        raise ConfigError("class_weight applies to labels and masks; a detector's loss weighs its boxes itself")
    if config.input.augment_on_device:
        raise ConfigError("augment_on_device cannot move boxes with the pixels; augment detection in the input "
                          "pipeline (the default)")


@contextlib.contextmanager
def _chief_run(out: OutputDir, placement: Placement) -> Iterator[None]:
    """The chief owns the output's life cycle; other workers only write their own files into it."""
    if not placement.is_chief:
        yield
        return
    if out.is_complete():  # the last run finished: this one starts anew, with a history of its own
        storage.remove(storage.join(out.root, HISTORY_NAME))
        storage.remove(storage.join(out.root, TENSORBOARD))
        storage.remove(storage.join(out.root, CHECKPOINTS))  # left only when killed right after the marker
    with out.staged_run():  # the marker goes first; a killed run leaves none
        yield


def _record_order(config: TrainerConfig, task: TrainingTask, placement: Placement, global_batch: int,
                  fresh: bool) -> RecordOrderWriter | None:
    if config.export.record_order is None:
        return None
    return RecordOrderWriter(config.export.record_order, task.train_dir, task.train_manifest, config.input.train_split,
                             global_batch, global_batch // placement.num_workers, placement.worker_index, fresh)


def _train(config: TrainerConfig, task: TrainingTask, placement: Placement, out: OutputDir, model: keras.Model,
           to_model: RawToModel, streams: Streams, record: StreamRecord, started: float,
           echo: Callable[[str], None]) -> dict:
    global_batch = streams.global_batch
    with corrupt_shards_named(streams.train_files + streams.eval_files, task.train_manifest.compression):
        probe = probe_input_rate(streams.probe, config.input.input_probe_batches, global_batch)  # (rate, batches read)
    echo(f"train: {task.kind} of {task.target!r} from {task.input_name!r}, {task.num_classes} classes, "
         f"{streams.train_examples} examples{_folds_note(config)}, "
         f"{streams.steps_per_epoch} steps/epoch of {global_batch} "
         f"({placement.kind}, {placement.replicas} replica(s)); input alone {probe[0]:,.0f} ex/s")
    timer = TrainTimer(global_batch)
    history = HistoryFile(storage.join(out.root, HISTORY_NAME), write=placement.is_chief)
    progress = StepProgress(streams.steps_per_epoch, config.fit.steps, global_batch, echo)
    steps = fit_phases(config, task, placement, out.root, model, streams, (timer, history, progress), record, echo)
    return _finish(config, task, placement, out, model, to_model, timer, history, probe, started, echo, steps, streams)


def _folds_note(config: TrainerConfig) -> str:
    folds = config.input.train_folds
    return "" if folds is None else f" (folds {','.join(map(str, folds.folds))} of {folds.count})"


def _tft_layer(task: TrainingTask) -> keras.layers.Layer | None:
    if task.transform_graph is None:
        return None
    import tensorflow_transform as tft

    return tft.TFTransformOutput(task.transform_graph).transform_features_layer()


def _finish(config: TrainerConfig, task: TrainingTask, placement: Placement, out: OutputDir, model: keras.Model,
            to_model: RawToModel, timer: TrainTimer, history: HistoryFile, probe: tuple[float, int], started: float,
            echo: Callable[[str], None], steps: int, streams: Streams) -> dict:
    info = _model_info(config, task, placement, steps)
    export_model(model, to_model, task, info, out.staged(MODEL), placement.is_chief, config.export.nms_iou)
    digest = weights_digest(model)
    storage.write_json(storage.join(out.root, "workers", f"worker-{placement.worker_index}.json"),
                       {"worker_index": placement.worker_index, "weights_sha256": digest, "optimizer_steps": steps})
    if not placement.is_chief:
        return {"optimizer_steps": steps, "weights_sha256": digest}
    step_rate = None if placement.num_workers > 1 else (  # one process's step: what the service would feed
        lambda: probe_step_rate(model, next(iter(streams.probe)), timer.global_batch))
    report = write_input_report(out.staged("input_report.json"), probe[0], timer.steady_rate(), {
        "global_batch": timer.global_batch,
        "probe_batches": probe[1], "epochs": timer.epochs, "strategy": placement.kind}, step_rate)
    write_rate_scalars(storage.join(out.root, TENSORBOARD, "input"), report, timer.epochs, steps)
    if "service_workers_needed" in report:
        echo(f"train: input-bound: the input alone reads {report['input_examples_per_second']:,.0f} ex/s, the model's "
             f"step alone takes {report['step_examples_per_second']:,.0f}; {report['service_workers_needed']} tf.data "
             f"service worker(s) as fast as this node would feed it (--data-service, docs/data-service.md)")
    if history.entries:
        plot_curves(history.entries, out.staged(CURVES))
    model_dir = storage.join(out.root, MODEL)
    summary = {"optimizer_steps": steps, "resumed_from_step": timer.resumed_from_step, "weights_sha256": digest,
               "history": history.entries, "input_report": report, "model": model_dir,
               "tensorboard": storage.join(out.root, TENSORBOARD),
               "seconds": round(time.time() - started, 1), **info.extra}
    if streams.service_log is not None:
        summary["data_service"] = streams.service_log.as_dict()
    out.complete(PUBLISHED, summary)  # training.json last
    storage.remove(storage.join(out.root, CHECKPOINTS))  # finished: a rerun with this output trains anew
    last = history.entries[-1] if history.entries else {}
    echo(f"train: done, {steps} optimizer steps, " + ", ".join(f"{k} {v:.4f}" for k, v in last.items()
         if isinstance(v, float) and k != "optimizer_steps") + f"; input {report['verdict']}; model in {model_dir}")
    return summary


def _model_info(config: TrainerConfig, task: TrainingTask, placement: Placement, steps: int) -> ModelInfo:
    options = {k: (list(v) if isinstance(v, tuple) else v.to_json() if isinstance(v, FoldSelection) else v)
               for k, v in config.flat().items()}
    return ModelInfo(task=task.kind, label=task.target, num_classes=task.num_classes,
                     class_names=task.class_names, label_vocabulary=task.label_vocabulary, extra={
                         "component": "trainer", "shardflow_version": __version__, "input": task.input_name,
                         "examples": task.train_dir, "raw_examples": task.raw_dir,
                         "transform_graph": task.transform_graph, "materialized": task.materialized,
                         "train_time_augmentation": list(config.input.augment),
                         "ingest_ops": task.raw_manifest.extra.get("ingest_ops"),
                         "optimizer_steps": steps, "strategy": placement.kind, "workers": placement.num_workers,
                         "replicas": placement.replicas, "options": options,
                         "precision": keras.mixed_precision.global_policy().name,  # the one it trained under
                         **_detection_extra(task)})


def _detection_extra(task: TrainingTask) -> dict:
    """A detector's label map ({name: served class id}) and box limit, as ExampleGen recorded them."""
    if task.kind != DETECTION_TASK or task.label_map is None:
        return {}
    return {"label_map": dict(task.label_map.ids_by_name), "max_boxes": task.max_boxes}


def weights_digest(model: keras.Model) -> str:
    """SHA-256 of every weight in order: equal digests mean equal models (workers stay in sync).

    A metric's running totals are not the model: a detector tracks its loss parts on itself (detector.py), so
    they are among its weights, and a run resumed mid-epoch counts them from the resumed step only."""
    metric_variables = {id(variable) for metric in model.metrics for variable in metric.variables}
    digest = hashlib.sha256()
    for variable in model.weights:
        if id(variable) not in metric_variables:
            digest.update(np.ascontiguousarray(variable.numpy()).tobytes())
    return digest.hexdigest()
