"""Evaluator's options: one frozen dataclass that checks itself and names the bad value.

>>> Threshold.parse("accuracy>=0.9")
Threshold(metric='accuracy', op='>=', value=0.9)
>>> Regression.parse("log_loss=0.05")
Regression(metric='log_loss', max_regression=0.05, source='--max-regression')
>>> parse_tolerance("off"), parse_tolerance("0.02"), parse_tolerance("auto")
(None, 0.02, 'auto')
>>> Threshold.parse("ece<=0.05").holds(0.03), Regression.parse("ece=0.01").worsening(0.05, 0.03)   # lower is better
(True, 0.020000000000000004)
>>> cfg = EvaluatorConfig(model="m", examples="ex", output="eout", thresholds=("accuracy>=0.9",))  # doctest: +SKIP
>>> cfg.thresholds                                                                                 # doctest: +SKIP
(Threshold(metric='accuracy', op='>=', value=0.9),)
"""
from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Callable

from ..core.batch_memory import SCORING_BUDGET_MB
from ..core.errors import ConfigError
from ..core.config_values import require_apart, require_positive
from ..core.input_checks import check_examples, check_model
from ..tasks import TASKS, task_for
from .intervals import DEFAULT_RESAMPLES, DEFAULT_SEED
from .outputs import (BLESSED, BLESSING, CANARIES, CANARY_DETECTION_COLUMNS, CANARY_PREDICTIONS,  # noqa: F401
                      DETECTIONS_PLOT, GATED_AGAINST, LABEL_ISSUES, LABEL_ISSUES_SHEET, METRICS, NO_BASELINE,
                      NOT_BLESSED, PLOT, PRECISION_RECALL_PLOT, RELIABILITY_PLOT, EvaluationError)

MIN_RESAMPLES = 100  # fewer draws make the 2.5th and 97.5th percentiles a handful of values

__all__ = ["AUTO_TOLERANCE", "ConfigError", "DEFAULT_GATE_RULE", "DEFAULT_REGRESSION_TOLERANCE", "DEFAULT_THRESHOLDS",
           "DEFAULT_TOLERANCES", "EvaluationError", "EvaluatorConfig", "GATE_RULES", "Regression", "Threshold",
           "TASK_METRICS", "check_metric_names", "parse_tolerance"]

# The top-level ("overall") metrics a threshold or a regression may name, per model task (the task's own list).
TASK_METRICS: dict[str, tuple[str, ...]] = {kind: task.metric_names for kind, task in TASKS.items()}
# The blessing threshold of a run that names none (`shardflow run`, the IR default), per task.
DEFAULT_THRESHOLDS: dict[str, str] = {kind: task.default_threshold for kind, task in TASKS.items()}
# How a regression check (and, under `strict`, a threshold) decides (docs/evaluator.md, "The gate rules"):
# `point` compares point estimates; `non-inferiority` needs the 95% interval of the paired difference to
# exclude a worsening beyond the tolerance; `strict` is non-inferiority with thresholds on the interval's
# pessimistic bound. The default was chosen from the simulation in benchmarks/gate_suite.py.
GATE_RULES = ("point", "non-inferiority", "strict")
DEFAULT_GATE_RULE = "non-inferiority"
# With a baseline, a threshold metric may be at most this much worse than the baseline's (absolute),
# unless --max-regression names it: a scheduled retraining never silently pushes a worse model. Under
# `point` the tolerance absorbs the noise of the point estimates; under non-inferiority it is the margin,
# the largest true worsening accepted (the interval absorbs the noise): 0.01 there would refuse over 5 % of
# equal-quality candidates on eval sets under ~5,000-12,000 examples (docs/evaluator.md, "The gate rules").
DEFAULT_TOLERANCES = {"point": 0.01, "non-inferiority": 0.03, "strict": 0.03}
DEFAULT_REGRESSION_TOLERANCE = DEFAULT_TOLERANCES["point"]
AUTO_TOLERANCE = "auto"  # the gate rule's default tolerance
DEFAULT_GATE = "the default regression tolerance; change it with --regression-tolerance"
_ALL_METRICS = tuple(dict.fromkeys(m for names in TASK_METRICS.values() for m in names))
LOWER_IS_BETTER = frozenset(m for task in TASKS.values() for m in task.lower_is_better)
_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}
# The values a metric can take: a threshold outside them can never be met (or always is).
_RANGES: dict[str, tuple[float, float]] = {metric: (0.0, 1.0) for metric in _ALL_METRICS}
_RANGES.update({metric: (0.0, math.inf) for task in TASKS.values() for metric in task.unbounded_metrics})
_PESSIMISTIC = {">=": 0, ">": 0, "<=": 1, "<": 1}  # a threshold's side of an interval that must hold (strict)
_THRESHOLD = re.compile(r"^\s*(?P<metric>[A-Za-z_][A-Za-z0-9_]*)\s*(?P<op>>=|<=|>|<)\s*(?P<value>\S+)\s*$")
_REGRESSION = re.compile(r"^\s*(?P<metric>[A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?P<value>\S+)\s*$")


def _number(text: str, option: str, whole: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{option} {whole!r}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise ConfigError(f"{option} {whole!r}: the value must be finite")
    return value


def _known_metric(metric: str, option: str, whole: str) -> None:
    if metric not in _ALL_METRICS:
        known = "; ".join(f"{task}: {', '.join(names)}" for task, names in TASK_METRICS.items())
        raise ConfigError(f"{option} {whole!r}: unknown metric {metric!r} (known: {known})")


@dataclass(frozen=True)
class Threshold:
    """`accuracy>=0.9`: the candidate's overall metric must compare true against the value."""

    metric: str
    op: str
    value: float

    @classmethod
    def parse(cls, text: str) -> "Threshold":
        match = _THRESHOLD.match(text)
        if not match:
            raise ConfigError(f"threshold must look like METRIC>=VALUE (or >, <=, <), got {text!r}")
        _known_metric(match["metric"], "threshold", text)
        threshold = cls(match["metric"], match["op"], _number(match["value"], "threshold", text))
        threshold._check_reachable(text)
        return threshold

    def _check_reachable(self, text: str) -> None:
        """`accuracy>=1.5` or `accuracy>1` can never hold: refused instead of never blessing."""
        low, high = _RANGES[self.metric]
        if not (self.holds(low) or self.holds(high)):
            raise ConfigError(f"threshold {text!r} can never be met: {self.metric} lies within "
                              f"[{low:g}, {high:g}]")

    def holds(self, measured: float) -> bool:
        """False for an undefined (NaN) measurement: nothing is known to hold."""
        return not math.isnan(measured) and _OPERATORS[self.op](measured, self.value)

    def pessimistic(self, interval: list[float | None] | tuple[float | None, float | None]) -> float:
        """The bound of the metric's interval that the threshold must hold on under `strict`: the lower
        for `>=`/`>`, the upper for `<=`/`<`; NaN when undefined."""
        bound = interval[_PESSIMISTIC[self.op]]
        return float("nan") if bound is None else float(bound)

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.value:g}"


def parse_tolerance(text: str | float | None) -> float | str | None:
    """`--regression-tolerance`: an amount >= 0, `off` (None: no default gate) or `auto` (the gate rule's default)."""
    if text is None or (isinstance(text, str) and text.strip().lower() in ("off", "none")):
        return None
    if isinstance(text, str) and text.strip().lower() == AUTO_TOLERANCE:
        return AUTO_TOLERANCE
    value = _number(str(text), "regression tolerance", str(text))
    if value < 0:
        raise ConfigError(f"regression tolerance {text!r} must be >= 0 (or 'off')")
    return value


@dataclass(frozen=True)
class Regression:
    """`accuracy=0.01`: the candidate may be worse than the baseline by at most 0.01 (absolute).

    `source`: who asked for the check: `--max-regression`, or the default gate on a threshold metric.
    """

    metric: str
    max_regression: float
    source: str = "--max-regression"

    @classmethod
    def parse(cls, text: str) -> "Regression":
        match = _REGRESSION.match(text)
        if not match:
            raise ConfigError(f"max regression must look like METRIC=AMOUNT such as accuracy=0.01, got {text!r}")
        _known_metric(match["metric"], "max regression", text)
        amount = _number(match["value"], "max regression", text)
        if amount < 0:
            raise ConfigError(f"max regression {text!r}: the allowed amount must be >= 0")
        return cls(match["metric"], amount)

    def worsening(self, candidate: float, baseline: float) -> float:
        """How much worse the candidate is (positive = worse): lower is worse except for losses."""
        if self.metric in LOWER_IS_BETTER:
            return candidate - baseline
        return baseline - candidate

    def worst_worsening(self, delta_interval: list[float | None] | tuple[float | None, float | None]) -> float:
        """The largest worsening the 95% interval of candidate − baseline allows (NaN when undefined):
        −low for a metric where higher is better, high for a loss."""
        low, high = delta_interval
        bound = high if self.metric in LOWER_IS_BETTER else (None if low is None else -low)
        return float("nan") if bound is None else float(bound)

    def __str__(self) -> str:
        return f"{self.metric}={self.max_regression:g}"


def check_metric_names(task: str, thresholds: tuple[Threshold, ...], regressions: tuple[Regression, ...]) -> None:
    """ConfigError when a threshold or regression names a metric the model's task does not have."""
    known = task_for(task).metric_names
    for item, option in [(t, "threshold") for t in thresholds] + [(r, "max regression") for r in regressions]:
        if item.metric not in known:
            raise ConfigError(f"{option} {str(item)!r}: {item.metric!r} is not a {task} metric "
                              f"(known for {task}: {', '.join(known)})")


@dataclass(frozen=True, kw_only=True)
class EvaluatorConfig:
    """Everything one Evaluator run needs. `thresholds`/`max_regressions` take parsed objects or their text.

    `slice_by` names value columns of the examples (metadata or label); each distinct value gets
    its own metrics. `baseline` None: thresholds only (regression checks are skipped and noted).
    `memory_mb`: the activations budget of one model call; `batch_size` None sizes the batch from it
    (`core.batch_memory`), an explicit one is checked against it before scoring starts.
    `gate`: one of GATE_RULES. `regression_tolerance`: an amount, None (no default gate) or "auto" (the
    rule's DEFAULT_TOLERANCES entry, resolved here to a number). `bootstrap_resamples`, `bootstrap_seed`: the
    bootstrap of the 95% intervals (intervals.py); 0 resamples computes none, which only `point` allows.
    """

    model: str
    examples: str
    output: str
    split: str = "eval"
    baseline: str | None = None
    thresholds: tuple[Threshold, ...] = ()
    max_regressions: tuple[Regression, ...] = ()
    slice_by: tuple[str, ...] = ()
    batch_size: int | None = None
    memory_mb: float = SCORING_BUDGET_MB
    regression_tolerance: float | str | None = AUTO_TOLERANCE  # None: no default gate
    gate: str = DEFAULT_GATE_RULE
    bootstrap_resamples: int = DEFAULT_RESAMPLES
    bootstrap_seed: int = DEFAULT_SEED

    def __post_init__(self) -> None:
        # Accept "accuracy>=0.9" strings for convenience; store the parsed objects.
        object.__setattr__(self, "thresholds", tuple(
            t if isinstance(t, Threshold) else Threshold.parse(t) for t in self.thresholds))
        object.__setattr__(self, "max_regressions", tuple(
            r if isinstance(r, Regression) else Regression.parse(r) for r in self.max_regressions))
        object.__setattr__(self, "slice_by", tuple(dict.fromkeys(self.slice_by)))
        if self.batch_size is not None and (isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int)
                                            or self.batch_size < 1):
            raise ConfigError(f"batch_size must be an integer >= 1, got {self.batch_size!r} "
                              "(None sizes the batch by memory_mb)")
        require_positive("memory_mb", self.memory_mb, "megabytes")
        if not self.split:
            raise ConfigError(f"split must be a split name such as 'eval', got {self.split!r}")
        self._check_gate()
        tolerance = self.regression_tolerance
        if tolerance == AUTO_TOLERANCE:
            tolerance = DEFAULT_TOLERANCES[self.gate]
            object.__setattr__(self, "regression_tolerance", tolerance)
        if tolerance is not None and (isinstance(tolerance, bool) or not isinstance(tolerance, (int, float))
                                      or not math.isfinite(tolerance) or tolerance < 0):
            raise ConfigError(f"regression_tolerance must be a finite number >= 0, None (off) or 'auto', "
                              f"got {tolerance!r}")
        named = [r.metric for r in self.max_regressions]
        repeated = sorted({m for m in named if named.count(m) > 1})
        if repeated:
            raise ConfigError(f"max regression given more than once for {repeated}")
        require_apart(self.output, examples=self.examples, model=self.model, baseline=self.baseline)

    def _check_gate(self) -> None:
        if self.gate not in GATE_RULES:
            raise ConfigError(f"gate must be one of {', '.join(GATE_RULES)}, got {self.gate!r}")
        for name in ("bootstrap_resamples", "bootstrap_seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{name} must be an integer >= 0, got {value!r}")
        resamples = self.bootstrap_resamples
        if 0 < resamples < MIN_RESAMPLES:
            raise ConfigError(f"bootstrap_resamples {resamples} is too few for a 95% interval: give at least "
                              f"{MIN_RESAMPLES} (default {DEFAULT_RESAMPLES}), or 0 for no intervals")
        if resamples == 0 and self.gate != "point":
            raise ConfigError(f"gate {self.gate!r} decides on 95% intervals: bootstrap_resamples must be >= "
                              f"{MIN_RESAMPLES}, not 0 (or use gate 'point')")

    def regressions(self) -> tuple[Regression, ...]:
        """The regression checks that apply with a baseline: every explicit one, and the default gate on
        each threshold metric that none names."""
        named = {r.metric for r in self.max_regressions}
        if self.regression_tolerance is None:
            return self.max_regressions
        implicit = tuple(Regression(metric, self.regression_tolerance, DEFAULT_GATE) for metric in
                         dict.fromkeys(t.metric for t in self.thresholds) if metric not in named)
        return self.max_regressions + implicit

    def check_inputs(self) -> None:
        """Checks that touch storage, at the start of a run: complete examples, exported models."""
        check_examples(self.examples, transform_ok=True)
        check_model(self.model)
        if self.baseline is not None:
            check_model(self.baseline, "baseline")
