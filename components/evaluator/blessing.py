"""Blessing: every threshold holds and nothing named in a max regression got worse than allowed.

Pure functions over the overall metrics of the candidate (and of the baseline, when there is one),
and their 95% intervals (intervals.py). Without a baseline, regression checks are skipped and say
so; they neither bless nor block. The gate rule (config.GATE_RULES) says what decides:
`point`: the point estimates; `non-inferiority`: a regression check passes when the worst worsening
the interval of the paired difference allows is within the tolerance (for accuracy: the interval's
lower bound ≥ −tolerance), thresholds on the point value; `strict`: that, and each threshold on its
metric's pessimistic bound (the lower for `>=`).

>>> from .config import Regression, Threshold
>>> verdict = bless((Threshold.parse("accuracy>=0.9"),), (Regression.parse("accuracy=0.01"),),
...                 {"accuracy": 0.85}, {"accuracy": 0.88})
>>> verdict.blessed, verdict.reasons
(False, ['accuracy = 0.85 fails threshold accuracy>=0.9', 'accuracy is 0.03 worse than the baseline (0.85 vs 0.88), more than the allowed 0.01'])

The same small regression on a small eval set: within 0.01 as a point, not demonstrably so.

>>> regression, candidate, baseline = Regression.parse("accuracy=0.01"), {"accuracy": 0.895}, {"accuracy": 0.9}
>>> intervals = {"delta": {"accuracy": [-0.031, 0.021]}}
>>> [bless((), (regression,), candidate, baseline, intervals, rule).blessed for rule in ("point", "non-inferiority")]
[True, False]

The default gate (EvaluatorConfig.regressions) is a Regression whose `source` says so:

>>> gate = Regression("accuracy", 0.01, "the default regression tolerance; change it with --regression-tolerance")
>>> bless((Threshold.parse("accuracy>=0.3"),), (gate,), {"accuracy": 0.721}, {"accuracy": 0.911}).reasons
['accuracy is 0.19 worse than the baseline (0.721 vs 0.911), more than the allowed 0.01 (the default regression tolerance; change it with --regression-tolerance)']
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
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
    gate: str = "point"  # the rule that decided (config.GATE_RULES)
    candidate_interval: list[float | None] | None = None  # 95% intervals, when computed
    baseline_interval: list[float | None] | None = None
    delta_interval: list[float | None] | None = None  # of candidate − baseline, paired

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


Intervals = dict[str, Any]  # {"candidate"|"baseline"|"delta": {metric: [low, high]} or None}


def _interval(intervals: Intervals | None, role: str, metric: str) -> list[float | None] | None:
    group = (intervals or {}).get(role) or {}
    return group.get(metric)


def _with_intervals(check: Check, intervals: Intervals | None, rule: str) -> Check:
    return replace(check, gate=rule, candidate_interval=_interval(intervals, "candidate", check.metric),
                   baseline_interval=_interval(intervals, "baseline", check.metric),
                   delta_interval=_interval(intervals, "delta", check.metric))


def _span(interval: list[float | None] | None) -> str:
    if not interval or interval[0] is None or interval[1] is None:
        return "undefined"
    return f"[{interval[0]:.4g}, {interval[1]:.4g}]"


def check_threshold(threshold: Threshold, candidate: dict[str, float], baseline: dict[str, float] | None = None,
                    intervals: Intervals | None = None, rule: str = "point") -> Check:
    """The threshold on the candidate's value, or (rule `strict`) on its interval's pessimistic bound; the
    baseline's value rides along for the reports (it decides nothing)."""
    value = candidate[threshold.metric]
    reference = baseline.get(threshold.metric) if baseline else None
    check = _with_intervals(Check("threshold", threshold.metric, str(threshold), None, "", _json_number(value),
                                  _json_number(reference)), intervals, rule)
    if rule == "strict":
        interval = check.candidate_interval or [None, None]
        passed = threshold.holds(threshold.pessimistic(interval))
        side = "lower" if threshold.op.startswith(">") else "upper"
        reason = (f"{threshold.metric} = {_show(value)} (95% interval {_span(interval)}) "
                  f"{'meets' if passed else 'fails'} threshold {threshold} at its {side} bound")
    else:
        passed = threshold.holds(value)
        reason = f"{threshold.metric} = {_show(value)} {'meets' if passed else 'fails'} threshold {threshold}"
    return replace(check, passed=passed, reason=reason)


def regression_holds(regression: Regression, worse: float, delta_interval: list[float | None] | None,
                     rule: str) -> bool:
    """The gate's decision on one regression check (False when undefined). `worse`: the point worsening;
    under non-inferiority (and strict), the worst worsening the paired difference's interval allows.

    >>> accuracy = Regression.parse("accuracy=0.01")
    >>> [regression_holds(accuracy, 0.005, [-0.02, 0.01], rule) for rule in ("point", "non-inferiority")]
    [True, False]
    """
    decisive = worse if rule == "point" else regression.worst_worsening(delta_interval or [None, None])
    return not math.isnan(decisive) and decisive <= regression.max_regression


def check_regression(regression: Regression, candidate: dict[str, float], baseline: dict[str, float] | None,
                     intervals: Intervals | None = None, rule: str = "point") -> Check:
    metric, value = regression.metric, candidate[regression.metric]
    check = _with_intervals(Check("regression", metric, str(regression), None, "", _json_number(value), None,
                                  regression.source), intervals, rule)
    if baseline is None:
        return replace(check, reason=f"no baseline: regression check {regression} skipped")
    reference = baseline[metric]
    if math.isnan(value) and math.isnan(reference):  # a detector's AP_small on a set without small objects
        return replace(check, reason=f"{metric} is undefined for both models: regression check {regression} skipped")
    worse = regression.worsening(value, reference)
    passed = regression_holds(regression, worse, check.delta_interval, rule)
    both = f"({_show(value)} vs {_show(reference)})"
    noise = "" if rule == "point" else _noise(regression, check.delta_interval, rule)
    if math.isnan(worse):
        reason = f"{metric} cannot be compared with the baseline {both}"
    else:
        verdict = "more than" if not passed else "within"
        reason = (f"{metric} is {_change(worse)} than the baseline {both}{noise}, "
                  f"{verdict} the allowed {regression.max_regression:g}{_why(regression)}")
    return replace(check, passed=passed, reason=reason, baseline=_json_number(reference))


def _change(worse: float) -> str:
    return "no worse" if worse == 0 else f"{-worse:.6g} better" if worse < 0 else f"{worse:.6g} worse"


def _noise(regression: Regression, delta_interval: list[float | None] | None, rule: str) -> str:
    """What the paired difference's 95% interval allows, which decides under non-inferiority."""
    worst = regression.worst_worsening(delta_interval or [None, None])
    if math.isnan(worst):
        return f"; its 95% interval is undefined ({rule} gate)"
    bound = (f"at most {worst:.6g} worse" if worst > 0 else f"at least {-worst:.6g} better" if worst < 0
             else "no worse")
    return f"; at 95% confidence {bound} (interval of the difference {_span(delta_interval)}, {rule} gate)"


def _why(regression: Regression) -> str:
    return "" if regression.source == "--max-regression" else f" ({regression.source})"


def bless(thresholds: tuple[Threshold, ...], regressions: tuple[Regression, ...], candidate: dict[str, float],
          baseline: dict[str, float] | None, intervals: Intervals | None = None, rule: str = "point") -> Blessing:
    """The verdict on the candidate's overall metrics under the gate `rule`, one check per threshold and
    regression. `intervals`: bootstrap_intervals' result (needed by every rule but `point`)."""
    checks = [check_threshold(t, candidate, baseline, intervals, rule) for t in thresholds]
    checks += [check_regression(r, candidate, baseline, intervals, rule) for r in regressions]
    failed = [c.reason for c in checks if c.passed is False]
    if failed:
        return Blessing(False, failed, checks)
    reasons = [c.reason for c in checks] or ["no thresholds or regressions were given: nothing to fail"]
    return Blessing(True, reasons, checks)
