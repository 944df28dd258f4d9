"""Predict: a served model over new CSV rows (or ExampleGen examples) on Beam, like TFX's BulkInferrer.

    from shardflow.predict import PredictConfig, run

    summary = run(PredictConfig(model="runs/serving", index="new.csv", data_root="photos", output="preds"))
    summary["predicted"], summary["rejected_by_reason"]

Every name is imported lazily: `run` brings Beam and, in the workers, TensorFlow; and the task kinds' prediction
writers (components/tasks/<kind>/predictions.py) import this package's tables and errors, so importing the package
itself must not import the config (through the Pusher, the Evaluator's config reads the task registry) nor the
executor (which reads it): no import cycle (docs/architecture.md, rule 9).
"""
from __future__ import annotations

import importlib
from typing import Any

_LAZY = {"FORMATS": "config", "PredictConfig": "config", "resolve_model": "config", "PredictionError": "errors"}

__all__ = ["FORMATS", "PredictConfig", "PredictionError", "predict", "resolve_model", "run"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run(config: Any, echo: Any = print) -> dict[str, Any]:
    """See `shardflow.predict.executor.run` (`config`: a PredictConfig)."""
    return importlib.import_module(".executor", __name__).run(config, echo)


def predict(model: str, output: str, index: str | None = None, data_root: str | None = None,
            examples: str | None = None, split: str = "eval", echo: Any = print, **options: Any) -> dict[str, Any]:
    """The call a pipeline launcher makes after Push (e.g. `predict(serving_dir, out, index=csv, data_root=d)`):
    keyword options as PredictConfig's (format, top_k, prediction_log, batch_size, beam_args)."""
    config = __getattr__("PredictConfig")(model=model, output=output, index=index, data_root=data_root,
                                          examples=examples, split=split, **options)
    return run(config, echo)
