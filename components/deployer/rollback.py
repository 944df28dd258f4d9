"""`run(FollowedRollback)`: `shardflow rollback`, with `--inference-service` the InferenceService following.

    run(FollowedRollback(rollback=RollbackConfig(serving_dir="s3://b/serving", version=6),
                         target=ClusterTarget(name="digits")))

Without a target this is the Pusher's rollback (pusher/rollback.py). With one, the InferenceService must exist
(exit 2 otherwise); its patch to serve version K alone (a canary dropped) is dry-run first, then the pointer is
swapped back (the Pusher's rollback; a canary beside K is dropped here), then the patch is applied. Run again,
a rollback cut off before its patch finishes it. With `registry.tracking_uri`, the registry alias follows as in
promote.py (the tracking server reached before anything moves).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..core.errors import ConfigError
from ..pusher import rollback as pusher_rollback
from ..pusher.config import RollbackConfig
from ..pusher.serving import read_served
from .cluster import InferenceServices
from .config import ClusterTarget, RegistryAlias
from .executor import apply, check_runtimes
from .inference_service import desired_spec, mode_of, predictor_of
from .moves import CANARY, move, record_of, wanted


@dataclass(frozen=True, kw_only=True)
class FollowedRollback:
    """The Pusher's rollback, and the InferenceService that follows it (None: none)."""

    rollback: RollbackConfig
    target: ClusterTarget | None = None
    storage_base: str = ""  # the serving directory as KServe reads it (DeployConfig's)
    registry: RegistryAlias = field(default_factory=RegistryAlias)

    def check_inputs(self) -> None:
        self.rollback.check_inputs()


def run(config: FollowedRollback, echo: Callable[[str], None] = print) -> object:
    if config.target is None:
        return pusher_rollback.run(config.rollback, echo)
    serving_dir, version = config.rollback.serving_dir, config.rollback.version
    config.registry.check_reachable()
    served = read_served(serving_dir)
    record = record_of(serving_dir, served, version, "rollback")
    want = wanted(serving_dir, record, config.storage_base)
    api = InferenceServices(config.target)
    live = api.get()
    if live is None:
        raise ConfigError(f"{api.where} does not exist: nothing to roll back (shardflow deploy creates it)")
    options, mode = predictor_of(live), mode_of(live)
    check_runtimes(want, options.runtime_version)
    spec = desired_spec(mode, want.stable, None, options)

    def move_pointer() -> object:
        if served.version == version and (served.pointer or {}).get(CANARY):  # the Pusher's would keep the canary
            return move(serving_dir, served, record, config.rollback.tf_serving)
        return pusher_rollback.run(config.rollback, echo)

    apply(api, live, spec, mode, move_pointer)
    echo(f"rollback: {api.where} serves version {version} again ({want.stable.storage_uri})")
    config.registry.follow(serving_dir, echo)
    return version
