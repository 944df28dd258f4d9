"""Predict: a served model over new CSV rows (or ExampleGen examples) on Beam, like TFX's BulkInferrer.

    from shardflow.predict import PredictConfig, run

    summary = run(PredictConfig(model="runs/serving", index="new.csv", data_root="photos", output="preds"))
    summary["predicted"], summary["rejected_by_reason"]

`run` is imported lazily (it brings Beam and, in the workers, TensorFlow).
"""
from __future__ import annotations

from typing import Any

from .config import FORMATS, PredictConfig, PredictionError, resolve_model

__all__ = ["FORMATS", "PredictConfig", "PredictionError", "predict", "resolve_model", "run"]


def run(config: PredictConfig, echo: Any = print) -> dict[str, Any]:
    """See `shardflow.predict.executor.run`."""
    from .executor import run as execute

    return execute(config, echo)


def predict(model: str, output: str, index: str | None = None, data_root: str | None = None,
            examples: str | None = None, split: str = "eval", echo: Any = print, **options: Any) -> dict[str, Any]:
    """The call a pipeline launcher makes after Push (e.g. `predict(serving_dir, out, index=csv, data_root=d)`):
    keyword options as PredictConfig's (format, top_k, prediction_log, batch_size, beam_args)."""
    config = PredictConfig(model=model, output=output, index=index, data_root=data_root, examples=examples,
                           split=split, **options)
    return run(config, echo)
