"""`run(RollbackConfig)`: serve an earlier version again, through the pointer's compare-and-swap, recorded like a push.

    run(RollbackConfig(serving_dir="runs/serving", version=1))   # CURRENT.json, models.config: version 1

Only a version some pointer named (`served_versions`: it was gated and pushed whole) can be served again, and
only while its directory holds the content it was served with. The new pointer says `"action": "rollback"`,
`rolled_back_from` and `replaced_version`; `latest` (warm starts, baselines) and TF Serving follow it.
A candidate gated against the version rolled back from is then refused by its push (its baseline is no
longer served); a push racing the rollback loses to it or wins over it, never both (exit 75 for the loser).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..core import storage
from ..core.errors import ConfigError, ShardflowError
from ..core.model_info import model_digest
from .cleanup import clean_serving_dir
from .config import RollbackConfig
from .layout import SAVED_MODEL, entry_model
from .retention import retired, still_served
from .serving import SERVING_POINTER, read_served, serve_pointer_version, served_history, successor, swap_pointer
from .tf_serving import MODEL_CONFIG


@dataclass(frozen=True)
class RollbackResult:
    version: int
    location: str
    replaced_version: int | None


def run(config: RollbackConfig, echo: Callable[[str], None] = print) -> RollbackResult:
    serving_dir, version = config.serving_dir, config.version
    storage.check_conditional_writes(serving_dir)
    served, _ = clean_serving_dir(serving_dir, read_served(serving_dir), config.stale_claims_after)
    history = served_history(serving_dir, served)
    entry = history.get(str(version))
    if entry is None:
        listed = ", ".join(sorted(history, key=int)) or "none"
        never = "was retired by clean-serving --keep" if version in retired(served) else "was never served"
        raise ConfigError(f"version {version} {never} from {serving_dir} (served versions: {listed})")
    target = entry_model(serving_dir, version, entry)
    digest = model_digest(target) if storage.is_file(storage.join(target, SAVED_MODEL)) else ""
    if not digest or entry.get("content_digest", digest) != digest:
        raise ShardflowError(f"{target} no longer holds the model served as version {version}: not served again")
    if served.version != version:
        record = {"version": version, "model": target, "pushed_from": entry.get("pushed_from"),
                  "content_digest": digest, "gated_against": None, "action": "rollback",
                  "rolled_back_from": served.version, **({"storage_uri": entry["storage_uri"]}
                                                         if entry.get("storage_uri") else {})}
        swap_pointer(serving_dir, served, lambda now: successor(serving_dir, still_served(now, version), record),
                     None)
    serve_pointer_version(serving_dir, config.tf_serving)
    echo(f"rollback: {target} (version {version}) is served again, replacing version {served.version}; "
         f"{SERVING_POINTER} and TF Serving's {MODEL_CONFIG} name it")
    return RollbackResult(version, target, served.version)
