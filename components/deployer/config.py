"""`DeployConfig`, `PromoteConfig`: which InferenceService serves which serving directory, checked when built.

    config = DeployConfig(serving_dir="s3://b/serving", target=ClusterTarget(name="digits", namespace="ml"),
                          predictor=Predictor(runtime_version="2.16.1"), canary_percent=10)
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from ..core.config_values import require_locations
from ..core.errors import ConfigError
from ..pusher.tf_serving import TfServing
from ..tracking.config import check_alias
from .inference_service import MODES, STANDARD, Predictor, check_percent

_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")  # KServe's InferenceService names: DNS-1035 labels


@dataclass(frozen=True, kw_only=True)
class ClusterTarget:
    """The InferenceService `name` in `namespace` ('' : the pod's own, else default), reached through
    `api_server` (a URL the client uses without credentials: `kubectl proxy`'s, a test's; '' : in a pod its
    service account, else the kubeconfig)."""

    name: str = "shardflow"
    namespace: str = ""
    api_server: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _DNS_LABEL.match(self.name):
            raise ConfigError(f"inference service name must be a DNS label (lower case, digits, '-'), "
                              f"got {self.name!r}")
        if self.namespace and not _DNS_LABEL.match(self.namespace):
            raise ConfigError(f"namespace must be a DNS label, got {self.namespace!r}")
        if self.api_server and not re.match(r"^https?://[^/\s]+", self.api_server):
            raise ConfigError(f"kube API must be a URL such as http://127.0.0.1:8001, got {self.api_server!r}")


def check_storage_base(value: str) -> None:
    """'' or a URI KServe's storage initializer reads (pvc://, s3://, gs://, ...)."""
    if not isinstance(value, str) or (value and not re.match(r"^[a-z][a-z0-9+.-]*://\S+$", value)):
        raise ConfigError(f"kserve storage base must be a URI such as pvc://artifacts/serving, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class DeployConfig:
    """Serve `serving_dir`'s pointer version with `target`; with `canary_percent`, its version as a canary
    (1-99 % of the traffic) beside the version it replaced. `mode`: the deployment mode of an InferenceService
    this creates (an existing one keeps its own). `tf_serving`: TF Serving's model config, which follows the
    pointer when a canary moves it."""

    serving_dir: str
    target: ClusterTarget = field(default_factory=ClusterTarget)
    predictor: Predictor
    canary_percent: int | None = None
    mode: str = STANDARD
    tf_serving: TfServing = field(default_factory=TfServing)
    storage_base: str = ""  # the serving directory as KServe reads it (pvc://CLAIM/PATH); '' : as it is written
    output: str = ""  # where deployed.json records what is served (a pipeline step's output); '' : nowhere
    pushed: str = ""  # the Pusher's note of the version it pushed (a pipeline step's input), recorded beside it

    def __post_init__(self) -> None:
        require_locations(self, "serving_dir")
        check_storage_base(self.storage_base)
        if self.canary_percent is not None:
            check_percent(self.canary_percent)
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")

    def check_inputs(self) -> None:
        """Nothing to read before the run: the pointer and the cluster are read (and refused) by the run."""


@dataclass(frozen=True, kw_only=True)
class RegistryAlias:
    """The MLflow registry alias that follows the pointer as soon as it moves (tracking/aliases.py); without a
    `tracking_uri` it follows at the next `shardflow track`.

    >>> RegistryAlias(tracking_uri="http://127.0.0.1:5000", registered_model="digits", alias="latest")
    Traceback (most recent call last):
    ...
    shardflow.core.errors.ConfigError: alias 'latest': MLflow reserves 'latest' and v<number>; letters, digits, '_' and '-'
    """

    tracking_uri: str = ""
    registered_model: str = ""
    alias: str = "champion"

    def __post_init__(self) -> None:
        if not self.tracking_uri:
            return
        if not self.registered_model:
            raise ConfigError(f"registered_model: give the registry's model that follows the serving directory "
                              f"(got {self.registered_model!r})")
        check_alias(self.alias)

    def check_reachable(self) -> None:
        """ConfigError (exit 2) when the tracking server cannot be reached: checked before anything moves."""
        if self.tracking_uri:
            from ..tracking.mlflow_sink import check_reachable

            check_reachable(self.tracking_uri)

    def follow(self, serving_dir: str, echo: Callable[[str], None]) -> None:
        """The alias moved onto the version CURRENT.json names (ShardflowError, exit 1, when it is not registered)."""
        if self.tracking_uri:
            from ..tracking.aliases import follow_pointer

            version = follow_pointer(self.tracking_uri, self.registered_model, self.alias, serving_dir)
            echo(f"registry: alias {self.alias!r} of {self.registered_model!r} names model version {version}")


@dataclass(frozen=True, kw_only=True)
class PromoteConfig:
    """Make `serving_dir`'s canary the served version: the pointer and `target` together (and `registry`'s alias)."""

    serving_dir: str
    target: ClusterTarget = field(default_factory=ClusterTarget)
    tf_serving: TfServing = field(default_factory=TfServing)
    storage_base: str = ""  # as DeployConfig's
    registry: RegistryAlias = field(default_factory=RegistryAlias)

    def __post_init__(self) -> None:
        require_locations(self, "serving_dir")
        check_storage_base(self.storage_base)

    def check_inputs(self) -> None:
        """Nothing to read before the run."""
