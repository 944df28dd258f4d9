"""Blessing: every threshold holds and nothing named in a max regression got worse than allowed.

Pure functions over the overall metrics of the candidate (and of the baseline, when there is one).
Without a baseline, regression checks are skipped and say so; they neither bless nor block.

>>> from .config import Regression, Threshold
>>> verdict = bless((Threshold.parse("accuracy>=0.9"),), (Regression.parse("accuracy=0.01"),),
...                 {"accuracy": 0.85}, {"accuracy": 0.88})
>>> verdict.blessed, verdict.reasons
(False, ['accuracy = 0.85 fails threshold accuracy>=0.9', 'accuracy is 0.03 worse than the baseline (0.85 vs 0.88), more than the allowed 0.01'])

The default gate (EvaluatorConfig.regressions) is a Regression whose `source` says so:

>>> gate = Regression("accuracy", 0.01, "the default regression tolerance; change it with --regression-tolerance")
>>> bless((Threshold.parse("accuracy>=0.3"),), (gate,), {"accuracy": 0.721}, {"accuracy": 0.911}).reasons
['accuracy is 0.19 worse than the baseline (0.721 vs 0.911), more than the allowed 0.01 (the default regression tolerance; change it with --regression-tolerance)']
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from .config import Regression, Threshold


@dataclass(frozen=True)
class Check:
    """One threshold or regression check; `passed` None when it was skipped (no baseline)."""

    kind: str  # "threshold" | "regression"
    metric: str
    rule: str
    passed: bool | None
    reason: str
    candidate: float | None
    baseline: float | None = None
    source: str = ""  # a regression check's origin: --max-regression or the default tolerance

    @property
    def delta(self) -> float | None:
        """candidate − baseline, when both are known."""
        return None if self.candidate is None or self.baseline is None else self.candidate - self.baseline


@dataclass(frozen=True)
class Blessing:
    blessed: bool
    reasons: list[str]  # not blessed: what failed; blessed: what was checked (or that nothing was)
    checks: list[Check]

    def to_json(self) -> dict[str, Any]:
        return {"blessed": self.blessed, "reasons": self.reasons,
                "checks": [{**asdict(c), "delta": _json_number(c.delta)} for c in self.checks]}

    def marker_text(self) -> str:
        """The text of EOUT/BLESSED or EOUT/NOT_BLESSED: one reason per line."""
        return "\n".join(self.reasons) + "\n"


def _show(value: float) -> str:
    return "undefined" if math.isnan(value) else f"{value:.6g}"


def _json_number(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


def check_threshold(threshold: Threshold, candidate: dict[str, float], baseline: dict[str, float] | None = None) -> Check:
    """The threshold on the candidate; the baseline's value rides along for the reports (it decides nothing)."""
    value = candidate[threshold.metric]
    passed = threshold.holds(value)
    verb = "meets" if passed else "fails"
    reference = baseline.get(threshold.metric) if baseline else None
    return Check("threshold", threshold.metric, str(threshold), passed,
                 f"{threshold.metric} = {_show(value)} {verb} threshold {threshold}", _json_number(value),
                 _json_number(reference))


def check_regression(regression: Regression, candidate: dict[str, float], baseline: dict[str, float] | None) -> Check:
    metric, value = regression.metric, candidate[regression.metric]
    if baseline is None:
        return Check("regression", metric, str(regression), None,
                     f"no baseline: regression check {regression} skipped", _json_number(value), None, regression.source)
    reference = baseline[metric]
    worse = regression.worsening(value, reference)
    both = f"({_show(value)} vs {_show(reference)})"
    if math.isnan(worse):
        passed, reason = False, f"{metric} cannot be compared with the baseline {both}"
    elif worse > regression.max_regression:
        passed, reason = False, (f"{metric} is {worse:.6g} worse than the baseline {both}, "
                                 f"more than the allowed {regression.max_regression:g}{_why(regression)}")
    else:
        change = "no worse" if worse == 0 else f"{-worse:.6g} better" if worse < 0 else f"{worse:.6g} worse"
        passed, reason = True, (f"{metric} is {change} than the baseline {both}, "
                                f"within the allowed {regression.max_regression:g}{_why(regression)}")
    return Check("regression", metric, str(regression), passed, reason, _json_number(value), _json_number(reference),
                 regression.source)


def _why(regression: Regression) -> str:
    return "" if regression.source == "--max-regression" else f" ({regression.source})"


def bless(thresholds: tuple[Threshold, ...], regressions: tuple[Regression, ...], candidate: dict[str, float],
          baseline: dict[str, float] | None) -> Blessing:
    """The verdict on the candidate's overall metrics, with one check per threshold and regression."""
    checks = [check_threshold(t, candidate, baseline) for t in thresholds]
    checks += [check_regression(r, candidate, baseline) for r in regressions]
    failed = [c.reason for c in checks if c.passed is False]
    if failed:
        return Blessing(False, failed, checks)
    reasons = [c.reason for c in checks] or ["no thresholds or regressions were given: nothing to fail"]
    return Blessing(True, reasons, checks)
