"""Beam RunInference with its TensorFlow model handler, on a shardflow model's `serving_default` signature.

The handler loads the model with the Evaluator's contract checks (`evaluator.loaded_model`): a
SavedModel whose `serving_default` takes `examples` (serialized tf.Examples in ExampleGen's raw
format) and returns `probabilities` and `class_ids`. Each batch of serialized examples is one
signature call; batches come bounded by count and bytes from the sources (`sources.batched`), so
a batch of large photos stays bounded in memory whatever the row count.

    batches | RunInference(serving_handler("serving/3"))   # (key, PredictionResult) per example
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np
from apache_beam.ml.inference.base import KeyedModelHandler, PredictionResult
from apache_beam.ml.inference.tensorflow_inference import TFModelHandlerTensor

OUTPUTS = ("probabilities", "class_ids")


def example_bytes(element: Any) -> int:
    """One element's serialized example size (keyed or not)."""
    example = element[1] if isinstance(element, tuple) else element
    return len(example) + 64


def serving_default_inference(model: Any, batch: Sequence[bytes], inference_args: dict[str, Any],
                              model_id: str | None = None) -> Iterable[PredictionResult]:
    """One `serving_default` call on the batch; per example, its probabilities and class ids."""
    import tensorflow as tf

    outputs = model.signature(examples=tf.constant(list(batch), dtype=tf.string), **inference_args)
    probabilities = outputs["probabilities"].numpy()
    class_ids = outputs["class_ids"].numpy()
    if len(probabilities) != len(batch):
        from .config import PredictionError

        raise PredictionError(f"model {model_id}: {len(probabilities)} predictions for a batch of {len(batch)}")
    return [PredictionResult(example, {"probabilities": np.asarray(p, np.float32), "class_ids": c}, model_id)
            for example, p, c in zip(batch, probabilities, class_ids)]


class ServingModelHandler(TFModelHandlerTensor):
    """TFModelHandlerTensor whose model is a shardflow model (any SavedModel with the contract's
    signature, local or s3:// / gs://), not a Keras model file."""

    def load_model(self) -> Any:
        from ..evaluator.loaded_model import load_model

        return load_model(self._model_uri, role="model")

    def get_num_bytes(self, batch: Sequence[Any]) -> int:
        return sum(example_bytes(element) for element in batch)

    def get_metrics_namespace(self) -> str:
        return "shardflow_predict"


def serving_handler(model_dir: str) -> Any:
    """The keyed handler RunInference runs: elements are batches already (see sources.batched), so
    that every runner sees them whole (the DaskRunner drops what BatchElements flushes at a bundle's end)."""
    handler = ServingModelHandler(model_dir, inference_fn=serving_default_inference)
    return KeyedModelHandler(handler).with_no_batching()
