"""Data validation's options: one frozen dataclass that checks itself and names the bad value.

>>> cfg = ValidationConfig(examples="runs/examples", output="runs/validation")
>>> cfg.drift_threshold, cfg.baseline_split, cfg.fail_on_anomalies
(0.1, 'train', True)
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import ConfigError
from ..core.config_values import require_apart, require_locations
from ..core.input_checks import check_examples
from ..core.uri import join

SCHEMA_NAME = "schema.pbtxt"

__all__ = ["ConfigError", "ValidationConfig"]


@dataclass(frozen=True, kw_only=True)
class ValidationConfig:
    """Everything one validation run needs.

    `drift_threshold` bounds the L-infinity distance (string features with a domain) and the
    Jensen-Shannon divergence (numeric features) of every other split against `baseline_split`.
    `schema` is a curated schema.pbtxt to check against instead of the one ExampleGen inferred on
    train (a curated schema can add int/float domains; its own drift comparators are kept).
    `drift_exclude` names features not compared for drift (ids, timestamps).
    `examples`, `output` and `schema` are local paths or URIs (s3://, gs://); what they hold is
    checked when the run starts (`executor.check_inputs`), not here.
    """

    examples: str
    output: str
    drift_threshold: float = 0.1
    baseline_split: str = "train"
    fail_on_anomalies: bool = True
    schema: str | None = None
    drift_exclude: tuple[str, ...] = ()

    def check_inputs(self) -> None:
        """The checks that read storage, before the heavy imports: --examples is the right kind of output."""
        check_examples(self.examples)

    def __post_init__(self) -> None:
        require_locations(self, "examples", "output")
        require_apart(self.output, examples=self.examples)
        threshold = self.drift_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
            raise ConfigError(f"drift_threshold must be a number in (0, 1], got {threshold!r}")
        if not isinstance(self.fail_on_anomalies, bool):
            raise ConfigError(f"fail_on_anomalies must be True or False, got {self.fail_on_anomalies!r}")
        if isinstance(self.drift_exclude, str) or any(not isinstance(n, str) or not n for n in self.drift_exclude):
            raise ConfigError(f"drift_exclude must be a tuple of feature names, got {self.drift_exclude!r}")

    @property
    def schema_path(self) -> str:
        """The curated schema, else the one ExampleGen inferred on train (a path or URI)."""
        return self.schema if self.schema is not None else join(self.examples, SCHEMA_NAME)
