"""Transform: full-pass preprocessing of ExampleGen output with tensorflow-transform on Beam.

    from shardflow.transform import TransformConfig, run
    manifest = run(TransformConfig(examples="runs/examples", output="runs/transform"))
    # runs/transform/transform_graph/  (tft.TFTransformOutput), Split-*/, statistics/, manifest.json
"""
from typing import Any

from .config import ConfigError, TransformConfig

_LAZY = {"run": "executor", "OutOfRangeError": "materialize", "UnseenLabelsError": "report"}


def __getattr__(name: str) -> Any:
    """The executor loads TensorFlow, TFT and TFDV: import it only when used."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["ConfigError", "OutOfRangeError", "TransformConfig", "UnseenLabelsError", "run"]
