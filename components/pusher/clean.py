"""`run(CleanServingConfig)`: what killed pushes left in a serving directory removed, TF Serving's config rewritten.

    run(CleanServingConfig(serving_dir="runs/serving"))   # the removed claims, copies and staging folders

Every push does the same first; this is the command for a directory no push will come to soon (cleanup.py).
"""
from __future__ import annotations

from typing import Callable

from ..core import storage
from .cleanup import clean_serving_dir
from .config import CleanServingConfig
from .serving import read_served, serve_pointer_version
from .tf_serving import MODEL_CONFIG


def run(config: CleanServingConfig, echo: Callable[[str], None] = print) -> list[str]:
    serving_dir = config.serving_dir
    storage.check_conditional_writes(serving_dir)
    _, removed = clean_serving_dir(serving_dir, read_served(serving_dir), config.stale_claims_after)
    version = serve_pointer_version(serving_dir, config.tf_serving)
    served = f"version {version}" if version is not None else "nothing"
    echo(f"clean-serving: removed {len(removed)} abandoned claims, copies and staging folders; {served} served "
         f"({MODEL_CONFIG})")
    for location in removed:
        echo(f"  removed {location}")
    return removed
