"""The plain outcome of a validation run: anomalies and drift measurements, free of TFDV protos.

    result = ValidationResult(splits={"train": 32, "eval": 8}, anomalies=(...), drift=(...), ...)
    result.passed, result.by_split()["eval"]
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any
from ..core.errors import ShardflowError

# Anomaly kinds, in the order a reader cares about them.
KINDS = ("empty_split", "missing_feature", "type_mismatch", "out_of_domain", "drift", "new_feature", "shape", "other")
DATASET = "(dataset)"  # the "feature" of an anomaly about a whole split


@dataclass(frozen=True)
class Anomaly:
    """One reason TFDV gave for one feature of one split."""

    split: str
    feature: str
    kind: str  # one of KINDS
    reason: str  # TFDV's AnomalyInfo.Type name, e.g. SCHEMA_MISSING_COLUMN
    short_description: str
    description: str
    severity: str  # ERROR | WARNING | UNKNOWN

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def brief(self) -> str:
        return f"{self.split}/{self.feature}: {self.short_description} ({self.kind})"


@dataclass(frozen=True)
class DriftMeasurement:
    """The distance of a split from the baseline on one feature, whether or not it is above threshold."""

    split: str
    feature: str
    measure: str  # L_INFTY | JENSEN_SHANNON_DIVERGENCE | ...
    value: float
    threshold: float

    @property
    def exceeded(self) -> bool:
        return self.value > self.threshold

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "exceeded": self.exceeded}


@dataclass(frozen=True)
class ValidationResult:
    """What `run(config)` found, and where it wrote the reports."""

    splits: dict[str, int]  # split -> number of examples, baseline first
    baseline_split: str
    anomalies: tuple[Anomaly, ...]
    drift: tuple[DriftMeasurement, ...]
    comparators: dict[str, dict[str, Any]]  # feature -> {"measure", "threshold"} or {"skipped": why}
    drift_threshold: float
    fail_on_anomalies: bool
    reports: dict[str, str] = field(default_factory=dict)  # "json" | "markdown" | "html" -> path

    @property
    def passed(self) -> bool:
        return not self.anomalies

    def by_split(self) -> dict[str, list[Anomaly]]:
        grouped: dict[str, list[Anomaly]] = {split: [] for split in self.splits}
        for anomaly in self.anomalies:
            grouped.setdefault(anomaly.split, []).append(anomaly)
        return grouped

    def summary(self, limit: int = 10) -> str:
        """One line per anomaly (at most `limit`), for error messages and warnings."""
        lines = [f"  {a.brief()}" for a in self.anomalies[:limit]]
        if len(self.anomalies) > limit:
            lines.append(f"  ... and {len(self.anomalies) - limit} more")
        return "\n".join(lines)


class DataValidationError(ShardflowError, RuntimeError):
    """Anomalies were found and `fail_on_anomalies` is set; the reports are written. Holds the result."""

    def __init__(self, result: ValidationResult) -> None:
        self.result = result
        count = len(result.anomalies)
        where = result.reports.get("markdown", "(no report written)")
        super().__init__(f"data validation failed: {count} anomal{'y' if count == 1 else 'ies'}\n"
                         f"{result.summary()}\nreport: {where}")
