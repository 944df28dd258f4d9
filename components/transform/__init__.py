"""Transform: full-pass preprocessing of ExampleGen output with tensorflow-transform on Beam.

    from shardflow.transform import TransformConfig, run
    manifest = run(TransformConfig(examples="runs/examples", output="runs/transform"))
    # runs/transform/transform_graph/  (tft.TFTransformOutput), Split-*/, statistics/, manifest.json
"""
from .config import ConfigError, TransformConfig
from .executor import run
from .materialize import OutOfRangeError
from .report import UnseenLabelsError

__all__ = ["ConfigError", "OutOfRangeError", "TransformConfig", "UnseenLabelsError", "run"]
