"""`PusherConfig`: what to push where, checked when it is built (values only; storage is read by `run`).

    config = PusherConfig(model="runs/train/model", evaluation="runs/eval", serving_dir="runs/serving",
                          source={"data_fingerprint": "ab12..."})
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.config_values import require_locations
from ..core.errors import ConfigError, RetryableError
from ..core.input_checks import check_model
from .tf_serving import TfServing

LATEST = "latest"
# `replace`: GATED moves the pointer only while it names the model the evaluation gated the candidate against
# (nothing, when it gated against no baseline); ANY moves it whatever is served. Both only if no other push
# moved it while this one copied (docs/push.md, "Concurrent runs").
GATED, ANY = "gated", "any"
REPLACE_MODES = (GATED, ANY)
POINTER_FIELDS = ("version", "model", "pushed_at", "pushed_from", "gated_against", "replaced_version", "action",
                  "content_digest", "served_versions", "abandoned_through", "rolled_back_from", "storage_uri",
                  "serial", "retired_versions", "canary_version")
# A claim whose push neither won nor was refused after this long is abandoned (its process killed on another
# host; on this host a dead process is seen at once). An hour: ten times the longest copy of a model to a
# bucket we expect (a 1 GB model at 20 MB/s is under a minute), and a push judged abandoned is only refused.
STALE_CLAIM_SECONDS = 3600.0


class ServingChanged(RetryableError):
    """The push was refused: the serving pointer no longer names what the candidate was gated against (or
    another push moved it meanwhile). Nothing of this push stays in the serving directory. Exit 75: a rerun
    (evaluated against what is served now) may succeed."""


@dataclass(frozen=True, kw_only=True)
class PusherConfig:
    """`model`: an exported model directory; `evaluation`: the Evaluator's output that blessed it (or
    not); `serving_dir`: where versions `<N>/` and the pointer CURRENT.json live. Each is a local path
    or a URI. `source`: provenance recorded in the pointer (e.g. the artifact URI, the data fingerprint).
    `infra_validation`: `shardflow infra-validate`'s output for the model; when given, the model is pushed
    only if INFRA_BLESSED, and its TF Serving warm-up file goes into the version ('' : no such check).
    `replace`: one of REPLACE_MODES (above). `tf_serving`: the name and base path TF Serving serves the
    pointer's version under (the model config push writes, tf_serving.py).
    `stale_claims_after`: seconds after which another host's unfinished push is abandoned (its claim and copy
    removed by this push's clean-up)."""

    model: str
    evaluation: str
    serving_dir: str
    source: dict[str, Any] = field(default_factory=dict)
    infra_validation: str = ""
    replace: str = GATED
    tf_serving: TfServing = field(default_factory=TfServing)
    stale_claims_after: float = STALE_CLAIM_SECONDS

    def __post_init__(self) -> None:
        require_locations(self, "model", "evaluation", "serving_dir")
        check_stale_after(self.stale_claims_after)
        if not isinstance(self.infra_validation, str):
            raise ConfigError(f"infra_validation must be a path or URI ('' for none), got {self.infra_validation!r}")
        if self.replace not in REPLACE_MODES:
            raise ConfigError(f"replace must be one of {', '.join(REPLACE_MODES)}, got {self.replace!r}")
        if self.model == LATEST:
            raise ConfigError(f"model must be a model directory, not {LATEST!r} (that is what is being replaced)")
        reserved = sorted(set(POINTER_FIELDS) & set(self.source))
        if reserved:
            raise ConfigError(f"source may not set {reserved}: the pointer's own fields")
        _inside = self.serving_dir.rstrip("/") + "/"
        if self.model.rstrip("/") + "/" == _inside or self.model.startswith(_inside):
            raise ConfigError(f"model {self.model!r} lies in the serving directory {self.serving_dir!r}: "
                              "push a model from its training output")

    def check_inputs(self) -> None:
        """The check that reads storage, before the heavy imports: `model` is an exported model, not its parent."""
        check_model(self.model)


def check_stale_after(seconds: float) -> None:
    """ConfigError unless `seconds` is a positive number (`stale_claims_after`)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise ConfigError(f"stale_claims_after must be a positive number of seconds, got {seconds!r}")


@dataclass(frozen=True, kw_only=True)
class RollbackConfig:
    """Serve version `version` of `serving_dir` again (one that a pointer named before), through the same
    compare-and-swap as a push; `tf_serving` and `stale_claims_after` as in PusherConfig."""

    serving_dir: str
    version: int
    tf_serving: TfServing = field(default_factory=TfServing)
    stale_claims_after: float = STALE_CLAIM_SECONDS

    def __post_init__(self) -> None:
        require_locations(self, "serving_dir")
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise ConfigError(f"version must be a served version number (1 or more), got {self.version!r}")
        check_stale_after(self.stale_claims_after)

    def check_inputs(self) -> None:
        """Nothing to read before the run: the serving directory is read (and refused) by the rollback itself."""


@dataclass(frozen=True, kw_only=True)
class CleanServingConfig:
    """Remove what killed pushes left in `serving_dir` (cleanup.py) and write TF Serving's config of the version
    served; `tf_serving` and `stale_claims_after` as in PusherConfig. `keep` (None: no retention): also remove the
    served versions beyond the `keep` most recent, never the pointer's, a canary's, one in `protect`, nor, with
    `tracking_uri`, the one `alias` names on `registered_model` in the MLflow registry (retention.py)."""

    serving_dir: str
    tf_serving: TfServing = field(default_factory=TfServing)
    stale_claims_after: float = STALE_CLAIM_SECONDS
    keep: int | None = None
    protect: frozenset[int] = frozenset()
    tracking_uri: str = ""
    registered_model: str = ""
    alias: str = "champion"

    def __post_init__(self) -> None:
        require_locations(self, "serving_dir")
        check_stale_after(self.stale_claims_after)
        if self.keep is not None and (isinstance(self.keep, bool) or not isinstance(self.keep, int) or self.keep < 1):
            raise ConfigError(f"keep must be a number of versions (1 or more), got {self.keep!r}")
        if any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in self.protect):
            raise ConfigError(f"protect must be version numbers (1 or more), got {sorted(self.protect)!r}")
        if self.tracking_uri and (self.keep is None or not self.registered_model or not self.alias):
            raise ConfigError("a tracking URI protects a registry alias's version from retention: give --keep, "
                              f"--registered-model and --alias (got {self.keep!r}, {self.registered_model!r}, "
                              f"{self.alias!r})")

    def check_inputs(self) -> None:
        """Nothing to read before the run."""
