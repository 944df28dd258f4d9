"""Infra validation: will the pushed model load and answer where it is served (TFX's InfraValidator)?

    from shardflow.infra_validator import InfraValidatorConfig, run
    result = run(InfraValidatorConfig(model="runs/train/model", evaluation="runs/eval", output="runs/infra"))
    # runs/infra/infra_validation.json, assets.extra/tf_serving_warmup_requests, INFRA_BLESSED or INFRA_NOT_BLESSED
"""
from typing import Any

from .errors import InfraValidationError

_LAZY = {"run": "executor", "InfraValidation": "executor", **{name: "config" for name in (
    "INFRA_BLESSED", "INFRA_NOT_BLESSED", "REPORT", "WARMUP_FILE", "InfraValidatorConfig", "parse_batch_sizes")}}


def __getattr__(name: str) -> Any:
    """The executor loads numpy and, to build the warm-up file, TensorFlow: import it only when used. The config
    too: it reads the task registry (shardflow.tasks), whose kinds import modules of this package (canaries,
    errors) when they judge served answers, so importing the package itself must not import the registry."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["INFRA_BLESSED", "INFRA_NOT_BLESSED", "InfraValidation", "InfraValidationError", "InfraValidatorConfig",
           "REPORT", "WARMUP_FILE", "parse_batch_sizes", "run"]
