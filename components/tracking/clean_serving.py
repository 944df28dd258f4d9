"""`shardflow clean-serving`'s run: the registry alias's version added to what retention never removes, then the
Pusher's clean (pusher/clean.py). The registry is MLflow's and the tracking component's; the Pusher reads neither.

    run(CleanServingConfig(serving_dir="runs/digits/serving", keep=3, tracking_uri="http://127.0.0.1:5000",
                           registered_model="digits"))
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from ..pusher import clean
from ..pusher.config import CleanServingConfig


def run(config: CleanServingConfig, echo: Callable[[str], None] = print) -> list[str]:
    if config.keep is not None and config.tracking_uri:  # read before anything is removed
        from .aliases import aliased_versions

        named = aliased_versions(config.tracking_uri, config.registered_model, config.alias, config.serving_dir)
        config = dataclasses.replace(config, protect=config.protect | frozenset(named))
    return clean.run(config, echo)
