"""`PusherConfig`: what to push where, checked when it is built (values only; storage is read by `run`).

    config = PusherConfig(model="runs/train/model", evaluation="runs/eval", serving_dir="runs/serving",
                          source={"data_fingerprint": "ab12..."})
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.errors import ConfigError
from ..core.config_values import require_locations
from ..core.input_checks import check_model

LATEST = "latest"


@dataclass(frozen=True, kw_only=True)
class PusherConfig:
    """`model`: an exported model directory; `evaluation`: the Evaluator's output that blessed it (or
    not); `serving_dir`: where versions `<N>/` and the pointer CURRENT.json live. Each is a local path
    or a URI. `source`: provenance recorded in the pointer (e.g. the artifact URI, the data fingerprint).
    `infra_validation`: `shardflow infra-validate`'s output for the model; when given, the model is pushed
    only if INFRA_BLESSED, and its TF Serving warm-up file goes into the version ('' : no such check)."""

    model: str
    evaluation: str
    serving_dir: str
    source: dict[str, Any] = field(default_factory=dict)
    infra_validation: str = ""

    def __post_init__(self) -> None:
        require_locations(self, "model", "evaluation", "serving_dir")
        if not isinstance(self.infra_validation, str):
            raise ConfigError(f"infra_validation must be a path or URI ('' for none), got {self.infra_validation!r}")
        if self.model == LATEST:
            raise ConfigError(f"model must be a model directory, not {LATEST!r} (that is what is being replaced)")
        reserved = sorted({"version", "model", "pushed_at"} & set(self.source))
        if reserved:
            raise ConfigError(f"source may not set {reserved}: the pointer's own fields")
        _inside = self.serving_dir.rstrip("/") + "/"
        if self.model.rstrip("/") + "/" == _inside or self.model.startswith(_inside):
            raise ConfigError(f"model {self.model!r} lies in the serving directory {self.serving_dir!r}: "
                              "push a model from its training output")

    def check_inputs(self) -> None:
        """The check that reads storage, before the heavy imports: `model` is an exported model, not its parent."""
        check_model(self.model)
