"""`PusherConfig`: what to push where, checked when it is built (values only; storage is read by `run`).

    config = PusherConfig(model="runs/train/model", evaluation="runs/eval", serving_dir="runs/serving",
                          source={"data_fingerprint": "ab12..."})
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.config_values import require_locations
from ..core.errors import ConfigError, ShardflowError
from ..core.input_checks import check_model

LATEST = "latest"
# `replace`: GATED moves the pointer only while it names the model the evaluation gated the candidate against
# (nothing, when it gated against no baseline); ANY moves it whatever is served. Both only if no other push
# moved it while this one copied (docs/push.md, "Concurrent runs").
GATED, ANY = "gated", "any"
REPLACE_MODES = (GATED, ANY)
POINTER_FIELDS = ("version", "model", "pushed_at", "pushed_from", "gated_against", "replaced_version")


class ServingChanged(ShardflowError):
    """The push was refused: the serving pointer no longer names what the candidate was gated against (or
    another push moved it meanwhile). Nothing of this push stays in the serving directory. Exit 1."""


@dataclass(frozen=True, kw_only=True)
class PusherConfig:
    """`model`: an exported model directory; `evaluation`: the Evaluator's output that blessed it (or
    not); `serving_dir`: where versions `<N>/` and the pointer CURRENT.json live. Each is a local path
    or a URI. `source`: provenance recorded in the pointer (e.g. the artifact URI, the data fingerprint).
    `infra_validation`: `shardflow infra-validate`'s output for the model; when given, the model is pushed
    only if INFRA_BLESSED, and its TF Serving warm-up file goes into the version ('' : no such check).
    `replace`: one of REPLACE_MODES (above)."""

    model: str
    evaluation: str
    serving_dir: str
    source: dict[str, Any] = field(default_factory=dict)
    infra_validation: str = ""
    replace: str = GATED

    def __post_init__(self) -> None:
        require_locations(self, "model", "evaluation", "serving_dir")
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
