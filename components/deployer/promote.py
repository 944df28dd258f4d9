"""`run(PromoteConfig)`: the canary becomes the served version, in CURRENT.json and in the InferenceService.

    run(PromoteConfig(serving_dir="s3://b/serving", target=ClusterTarget(name="digits")))

The InferenceService must exist (exit 2 otherwise) and keeps its runtime, resources and service account; in
Standard mode the stable predictor takes the canary's name (`v<N>`), so KServe keeps the canary's pods. The
pointer moves first (exit 75 when another push moved it), after the cluster's dry run of the patch; a promotion
cut off before its patch is finished by running it again (the pointer then has no canary, but the
InferenceService still differs from it). With `registry.tracking_uri`, the tracking server must answer before
anything moves (exit 2 otherwise), and the registry alias follows the patch (config.RegistryAlias): exit 1 in one
line when the version is not registered yet (`shardflow track` registers it; the pointer and the InferenceService
have moved).
"""
from __future__ import annotations

from typing import Callable

from ..core.errors import ConfigError
from ..pusher.serving import read_served
from .cluster import InferenceServices
from .config import PromoteConfig
from .executor import DeployResult, apply, check_runtimes
from .inference_service import desired_spec, merged, mode_of, predictor_of
from .moves import move, promoted, wanted


def run(config: PromoteConfig, echo: Callable[[str], None] = print) -> DeployResult:
    serving_dir = config.serving_dir
    config.registry.check_reachable()
    served = read_served(serving_dir)
    api = InferenceServices(config.target)
    live = api.get()
    if live is None:
        raise ConfigError(f"{api.where} does not exist: nothing to promote (shardflow deploy creates it)")
    record = promoted(serving_dir, served)
    want = wanted(serving_dir, record or served.pointer, config.storage_base)
    options, mode = predictor_of(live), mode_of(live)
    check_runtimes(want, options.runtime_version)
    spec = desired_spec(mode, want.stable, None, options)
    if record is None and merged(live, {"spec": spec}) == live:
        raise ConfigError(f"{serving_dir} has no canary to promote (CURRENT.json serves version "
                          f"{want.stable.version} alone, and so does {api.where})")
    apply(api, live, spec, mode, None if record is None else lambda: move(serving_dir, served, record,
                                                                          config.tf_serving))
    echo(f"promote: version {want.stable.version} is served by {api.where} and named by CURRENT.json")
    config.registry.follow(serving_dir, echo)
    return DeployResult(want.stable.version, want.stable.storage_uri, None, mode, True)
