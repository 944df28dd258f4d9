"""Data validation's options: one frozen dataclass that checks itself and names the bad value.

>>> cfg = ValidationConfig(examples="runs/examples", output="runs/validation")   # doctest: +SKIP
>>> cfg.drift_threshold, cfg.baseline_split, cfg.fail_on_anomalies             # doctest: +SKIP
(0.1, 'train', True)
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import ConfigError
from ..core.manifest import MANIFEST_NAME

__all__ = ["ConfigError", "ValidationConfig"]


@dataclass(frozen=True)
class ValidationConfig:
    """Everything one validation run needs.

    `drift_threshold` bounds the L-infinity distance (string features with a domain) and the
    Jensen-Shannon divergence (numeric features) of every other split against `baseline_split`.
    `schema` is a curated schema.pbtxt to check against instead of the one ExampleGen inferred on
    train (a curated schema can add int/float domains; its own drift comparators are kept).
    `drift_exclude` names features not compared for drift (ids, timestamps).
    """

    examples: str
    output: str
    drift_threshold: float = 0.1
    baseline_split: str = "train"
    fail_on_anomalies: bool = True
    schema: str | None = None
    drift_exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        splits = self._check_paths()
        threshold = self.drift_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
            raise ConfigError(f"drift_threshold must be a number in (0, 1], got {threshold!r}")
        if self.baseline_split not in splits:
            raise ConfigError(f"baseline_split {self.baseline_split!r} is not a split of {self.examples!r} "
                              f"(has {sorted(splits)})")
        if not isinstance(self.fail_on_anomalies, bool):
            raise ConfigError(f"fail_on_anomalies must be True or False, got {self.fail_on_anomalies!r}")
        if isinstance(self.drift_exclude, str) or any(not isinstance(n, str) or not n for n in self.drift_exclude):
            raise ConfigError(f"drift_exclude must be a tuple of feature names, got {self.drift_exclude!r}")

    def _check_paths(self) -> list[str]:
        """The examples must be a complete ExampleGen output; returns its split names."""
        manifest = Path(self.examples) / MANIFEST_NAME
        if not manifest.is_file():
            raise ConfigError(f"examples {self.examples!r} has no {MANIFEST_NAME}: not a complete ExampleGen output")
        source, out = Path(self.examples).resolve(), Path(self.output).resolve()
        if out == source or source.is_relative_to(out) or out.is_relative_to(source):
            raise ConfigError(f"output {self.output!r} must be a directory apart from examples {self.examples!r}")
        if self.schema is not None and not Path(self.schema).is_file():
            raise ConfigError(f"schema {self.schema!r} is not a file")
        if self.schema is None and not self.schema_path.is_file():
            raise ConfigError(f"examples {self.examples!r} has no schema.pbtxt: pass a schema")
        return list(json.loads(manifest.read_text()).get("splits", {}))

    @property
    def schema_path(self) -> Path:
        """The curated schema, else the one ExampleGen inferred on train."""
        return Path(self.schema) if self.schema is not None else Path(self.examples) / "schema.pbtxt"
