"""Beam RunInference with its TensorFlow model handler, on a shardflow model's `serving_default` signature.

The handler loads the model with the Evaluator's contract checks (`evaluator.loaded_model`): a
SavedModel whose `serving_default` takes `examples` (serialized tf.Examples in ExampleGen's raw
format) and returns its kind's outputs (core/model_info.py), which the model's task splits per example
(`Task.served_predictions`). Each batch of serialized examples
comes bounded by count and bytes from the sources (`sources.batched`), so a batch of large
photos stays bounded in memory whatever the row count. Each worker sizes its model calls in bytes
(`core.batch_memory`) on the first batch it gets: a batch is cut into calls of as many examples as
fit the activations budget, so at the default 256 MB a 256-px U-Net's batch of 64 (~1.6 GB) becomes calls of ~9.

    batches | RunInference(serving_handler("serving/3", budget_bytes=1 << 30))   # (key, PredictionResult)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from apache_beam.ml.inference.base import KeyedModelHandler, PredictionResult
from apache_beam.ml.inference.tensorflow_inference import TFModelHandlerTensor

from ..core.batch_memory import trim_heap
from ..tasks import task_for


def example_bytes(element: Any) -> int:
    """One element's serialized example size (keyed or not)."""
    example = element[1] if isinstance(element, tuple) else element
    return len(example) + 64


@dataclass
class SizedModel:
    """A loaded model and the size of its calls, decided on the first batch (`size_calls`)."""

    loaded: Any  # evaluator.loaded_model.LoadedModel
    budget_bytes: int
    requested: int | None  # an explicit --batch-size: checked against the budget, not sized
    sizing: Any = None  # core.batch_memory.BatchSizing, once measured

    def size_calls(self, batch: Sequence[bytes]) -> int:
        from ..core.batch_memory import PROBE_EXAMPLES, size_batch

        if self.sizing is None:
            self.sizing = size_batch([self.loaded.call], list(batch[:PROBE_EXAMPLES]), self.budget_bytes, self.requested)
        return self.sizing.batch_size


def serving_default_inference(model: SizedModel, batch: Sequence[bytes], inference_args: dict[str, Any],
                              model_id: str | None = None) -> Iterable[PredictionResult]:
    """`serving_default` calls of the sized number of examples; per example, its outputs as the model's kind
    splits them (views of each call's own arrays: a batch's outputs are never concatenated into a copy)."""
    size = model.size_calls(batch)
    per_example = task_for(model.loaded.info.task).served_predictions
    results: list[PredictionResult] = []
    for start in range(0, len(batch), size):
        examples = batch[start:start + size]
        answers = per_example(model.loaded.call(examples, **inference_args))
        trim_heap()  # measured: the peak over calls of 2 fell from 103-173 MB to 60-92 MB (calls of ~10, 64-MB budget)
        if len(answers) != len(examples):
            from .errors import PredictionError

            raise PredictionError(f"model {model_id}: {len(answers)} predictions for a call of {len(examples)}")
        results += [PredictionResult(example, answer, model_id) for example, answer in zip(examples, answers)]
    return results


class ServingModelHandler(TFModelHandlerTensor):
    """TFModelHandlerTensor whose model is a shardflow model (any SavedModel with the contract's
    signature, local or s3:// / gs://), not a Keras model file, called in batches sized in bytes."""

    def __init__(self, model_uri: str, budget_bytes: int, requested: int | None, **kwargs: Any) -> None:
        super().__init__(model_uri, **kwargs)
        self._budget_bytes, self._requested = budget_bytes, requested

    def load_model(self) -> SizedModel:
        from ..evaluator.loaded_model import load_model

        return SizedModel(load_model(self._model_uri, "model", task_for), self._budget_bytes, self._requested)

    def get_num_bytes(self, batch: Sequence[Any]) -> int:
        return sum(example_bytes(element) for element in batch)

    def get_metrics_namespace(self) -> str:
        return "shardflow_predict"


def check_requested_batch(model_dir: str, records: Sequence[bytes], budget_bytes: int, requested: int) -> None:
    """An explicit batch size checked against the budget in the driver, before any work: a ConfigError
    from a worker would reach the user under Beam's logged traceback. Costs a model load, so only then."""
    from ..core.batch_memory import PROBE_EXAMPLES
    from ..evaluator.loaded_model import load_model

    model = SizedModel(load_model(model_dir, "model", task_for), budget_bytes, requested)
    model.size_calls(list(records[:PROBE_EXAMPLES]))


def serving_handler(model_dir: str, budget_bytes: int, requested: int | None = None) -> Any:
    """The keyed handler RunInference runs: elements are batches already (see sources.batched), so
    that every runner sees them whole (the DaskRunner drops what BatchElements flushes at a bundle's end)."""
    handler = ServingModelHandler(model_dir, budget_bytes, requested, inference_fn=serving_default_inference)
    return KeyedModelHandler(handler).with_no_batching()
