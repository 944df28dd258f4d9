"""Data validation: the gate between ExampleGen and Transform. TFDV checks every split's statistics
against the schema inferred on train (missing features, types, domains) and against train itself (drift).

    from shardflow.validation import DataValidationError, ValidationConfig, run
    try:
        result = run(ValidationConfig(examples="runs/examples", output="runs/validation"))
    except DataValidationError as err:
        print(err)            # the anomalies in brief and where runs/validation/report.md is
"""
from typing import Any

from .config import ConfigError, ValidationConfig
from .result import Anomaly, DataValidationError, DriftMeasurement, ValidationResult


def __getattr__(name: str) -> Any:
    """`run` loads TFDV (and TensorFlow with it): import it only when used."""
    if name == "run":
        from .executor import run

        return run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["Anomaly", "ConfigError", "DataValidationError", "DriftMeasurement", "ValidationConfig",
           "ValidationResult", "run"]
