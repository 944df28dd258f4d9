"""`run(DeployConfig)`: make a KServe InferenceService serve what the serving pointer names; with a canary
percent, serve the pointer's version as a canary beside the version it replaced (moves.py).

    result = run(DeployConfig(serving_dir="s3://b/serving", target=ClusterTarget(name="digits"),
                              predictor=Predictor(runtime_version="2.16.1"), canary_percent=10))
    result.version, result.canary          # 6, 7: version 6 takes 90 % of the traffic, version 7 10 %

Order, so that what is served, CURRENT.json, the registry's alias and the next baseline agree: every check
first (the pointer, each version's TensorFlow against the runtime, the cluster's dry run of the very patch:
the API server's schema and KServe's webhook), so a refusal changes nothing anywhere (exit 2); then the
pointer's compare-and-swap (exit 75 when another push moved it: the InferenceService is untouched); then the
patch. A patch failing after the pointer moved is repaired by running the command again.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..core import storage
from ..core.errors import ConfigError, ShardflowError
from ..pusher.serving import read_served
from .cluster import InferenceServices
from .config import DeployConfig
from .inference_service import (KNATIVE, check_runtime, desired_spec, knative_canary_problem, merged,
                                mode_of, new_inference_service)
from .moves import Wanted, as_canary, model_dir, move, wanted
from .saved_model_version import trained_with


DEPLOYED = "deployed.json"


@dataclass(frozen=True)
class DeployResult:
    version: int
    storage_uri: str
    canary: int | None  # the canary's version (None: no canary)
    mode: str
    changed: bool  # the InferenceService was created or patched (False: it already served this)


def check_runtimes(want: Wanted, runtime_version: str) -> None:
    """ConfigError when TF Serving `runtime_version` is older than the TensorFlow any wanted version was trained
    with (read from each version's saved_model.pb)."""
    for target in want.targets():
        try:
            check_runtime(runtime_version, trained_with(model_dir(target)))
        except ConfigError as refused:
            raise ConfigError(f"version {target.version}: {refused}") from None


def apply(api: InferenceServices, live: dict[str, Any] | None, spec: dict[str, Any], mode: str,
          move_pointer: Callable[[], Any] | None) -> bool:
    """The InferenceService made to hold `spec` (a merge patch, or created): dry run, `move_pointer`, then for
    real; whether anything changed. Nothing is sent when the live object already holds it."""
    if live is not None and merged(live, {"spec": spec}) == live and move_pointer is None:
        return False
    body = new_inference_service(api.name, api.namespace, mode, spec) if live is None else {"spec": spec}
    send = (lambda dry: api.create(body, dry)) if live is None else (lambda dry: api.patch(body, dry))
    send(True)  # the API server's validation and KServe's webhook, nothing stored
    if move_pointer is not None:
        move_pointer()
    try:
        send(False)
    except ShardflowError as err:
        raise type(err)(f"{err}; CURRENT.json has moved: run the command again (or shardflow deploy) to make "
                        f"{api.where} follow it") from None
    return True


def run(config: DeployConfig, echo: Callable[[str], None] = print) -> DeployResult:
    serving_dir = config.serving_dir
    served = read_served(serving_dir)
    record = None if config.canary_percent is None else as_canary(serving_dir, served, config.canary_percent)
    want = wanted(serving_dir, record or served.pointer, config.storage_base)
    check_runtimes(want, config.predictor.runtime_version)
    api = InferenceServices(config.target)
    live = api.get()
    mode = mode_of(live, config.mode) if live is not None else config.mode
    if want.canary and mode == KNATIVE:
        problem = knative_canary_problem(live, want.stable, want.canary)
        if problem:
            raise ConfigError(f"{api.where}: {problem}")
    spec = desired_spec(mode, want.stable, want.canary, config.predictor)
    changed = apply(api, live, spec, mode, None if record is None else
                    lambda: move(serving_dir, served, record, config.tf_serving))
    if config.output:
        storage.write_json(storage.join(config.output, DEPLOYED), {
            "inference_service": api.where, "mode": mode, "version": want.stable.version,
            "storage_uri": want.stable.storage_uri, "canary": want.canary.version if want.canary else None,
            "canary_percent": want.canary.percent if want.canary else None, "changed": changed,
            "pushed": storage.read_text(config.pushed).strip() if config.pushed else None})
    echo(f"deploy: {api.where} ({mode}) serves version {want.stable.version} from {want.stable.storage_uri}"
         + (f", version {want.canary.version} as a canary at {want.canary.percent} %" if want.canary else "")
         + ("" if changed else " (already)"))
    return DeployResult(want.stable.version, want.stable.storage_uri, want.canary.version if want.canary else None,
                        mode, changed)
