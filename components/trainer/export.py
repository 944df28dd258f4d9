"""Exports the trained model as a SavedModel whose serving signature takes raw serialized tf.Examples.

The signature parses the ExampleGen-format records, applies the same `RawToModel` preprocessing as
training (the tf.Transform graph when there is one) and returns `probabilities` and `class_ids`
(the contract in `shardflow.core.model_info`). The directory appears atomically: it is written
under a temporary name, `shardflow_model.json` last, then renamed to `MOUT/model`.

    export_model(model, to_model, task, info, "MOUT/model", is_chief=True)
    served = tf.saved_model.load("MOUT/model").signatures["serving_default"]
    served(examples=tf.constant([record_bytes]))["class_ids"]
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import tensorflow as tf
import tf_keras as keras

from ..core import storage
from ..core.model_info import SERVING_INPUT, SERVING_SIGNATURE, ModelInfo, write_model_info
from .features import RawToModel
from .task import TrainingTask

WEIGHTS_PREFIX = "variables/variables"  # the SavedModel's own checkpoint: what --warm-start loads


def serving_function(model: keras.Model, to_model: RawToModel, task: TrainingTask) -> tf.types.experimental.ConcreteFunction:
    spec = {task.input_name: tf.io.FixedLenFeature([], tf.string if task.raw_input_spec.is_file else tf.float32)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=SERVING_INPUT)])
    def serve(examples: tf.Tensor) -> dict[str, tf.Tensor]:
        parsed = tf.io.parse_example(examples, spec)
        probabilities = tf.cast(model({task.input_name: to_model.image(parsed)}, training=False), tf.float32)
        return {"probabilities": probabilities, "class_ids": tf.argmax(probabilities, axis=-1)}

    return serve.get_concrete_function()


def export_model(model: keras.Model, to_model: RawToModel, task: TrainingTask, info: ModelInfo,
                 model_dir: str | Path, is_chief: bool) -> None:
    """Saves on every worker (saving is collective under MultiWorkerMirroredStrategy); only the chief keeps it."""
    model_dir = Path(model_dir)
    model.raw_to_model = to_model  # tracked, so the transform graph's assets and tables are saved with it
    signatures = {SERVING_SIGNATURE: serving_function(model, to_model, task)}
    target = Path(tempfile.mkdtemp(prefix=".model-", dir=model_dir.parent)) if is_chief else \
        Path(tempfile.mkdtemp(prefix="shardflow-worker-model-"))
    try:
        model.save(str(target), save_format="tf", include_optimizer=False, signatures=signatures)
        if is_chief:
            write_model_info(target, info)
            storage.remove(model_dir)
            os.replace(target, model_dir)
    finally:
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)


def warm_start(model: keras.Model, model_dir: str | Path) -> None:
    """Initializes `model`'s weights from an earlier export; an error when the architectures differ."""
    prefix = Path(model_dir) / WEIGHTS_PREFIX
    if not Path(f"{prefix}.index").is_file():
        raise FileNotFoundError(f"warm start: {model_dir} is not a SavedModel exported by shardflow train "
                                f"(no {WEIGHTS_PREFIX}.index)")
    status = model.load_weights(str(prefix))
    try:
        # Every weight of an uncompiled model must come from the file; a model its hook compiled
        # also has optimizer variables the export does not hold, so only a non-trivial match is asked.
        if model.optimizer:
            status.assert_nontrivial_match()
        else:
            status.assert_existing_objects_matched()
    except AssertionError as err:
        raise ValueError(f"warm start: the model in {model_dir} does not match this model's architecture: {err}") from err
    status.expect_partial()  # the export also holds the preprocessing (tables, transform graph)
