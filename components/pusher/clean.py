"""`run(CleanServingConfig)`: what killed pushes left in a serving directory removed, TF Serving's config rewritten;
with `keep`, the served versions beyond the `keep` most recent retired and removed (retention.py).

    run(CleanServingConfig(serving_dir="runs/serving"))          # the removed claims, copies and staging folders
    run(CleanServingConfig(serving_dir="runs/serving", keep=3))   # and versions 1..N-3, less the protected ones

Every push does the same first; this is the command for a directory no push will come to soon (cleanup.py).
"""
from __future__ import annotations

from typing import Callable

from ..core import storage
from .cleanup import clean_serving_dir
from .config import CleanServingConfig
from .layout import version_folder
from .retention import protected_versions, retire_versions
from .serving import read_served, serve_pointer_version
from .tf_serving import MODEL_CONFIG


def run(config: CleanServingConfig, echo: Callable[[str], None] = print) -> list[str]:
    serving_dir = config.serving_dir
    storage.check_conditional_writes(serving_dir)
    protect = set(config.protect)  # with --tracking-uri, the registry alias's version too (tracking/clean_serving.py)
    _, removed = clean_serving_dir(serving_dir, read_served(serving_dir), config.stale_claims_after)
    retired = retire_versions(serving_dir, config.keep, protect) if config.keep is not None else []
    version = serve_pointer_version(serving_dir, config.tf_serving)
    served = f"version {version}" if version is not None else "nothing"
    kept = (f"; retired {len(retired)} versions beyond the {config.keep} most recent (protected: "
            f"{', '.join(map(str, sorted(protected_versions(serving_dir) | protect))) or 'none'})"
            if config.keep is not None else "")
    echo(f"clean-serving: removed {len(removed)} abandoned claims, copies and staging folders{kept}; {served} "
         f"served ({MODEL_CONFIG})")
    for location in removed + [version_folder(serving_dir, number) for number in retired]:
        echo(f"  removed {location}")
    return removed + [version_folder(serving_dir, number) for number in retired]
