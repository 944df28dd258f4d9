"""Served answers held to the Evaluator's for the same canaries: the judgement of kinds whose canary outputs are
probabilities (labels [N, C], masks [N, H, W, C]); their tasks' `judge_served` calls `judge_probabilities`.

Part of the engine the task packages plug into (docs/architecture.md, rule 9), as the Evaluator's confusion.py
is for scoring: each signature's saved `probabilities` (`<outputs>/<signature>.npz`) against the Evaluator's
canary_predictions.npy, NaN on either side failing, one reason per signature over the tolerance naming its
worst canary.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np


def _compare(check: Any) -> tuple[dict[str, float], list[str]]:
    """max |probability − the Evaluator's| per signature, and a reason for each over the tolerance."""
    deltas, reasons, tolerance = {}, [], check.config.tolerance
    expected = np.asarray(check.canaries.probabilities, np.float64)
    for name in sorted(check.signatures):
        served = np.load(os.path.join(check.outputs, f"{name}.npz"))["probabilities"].astype(np.float64)
        if served.shape != expected.shape:
            reasons.append(f"{name}: probabilities of shape {served.shape}, the Evaluator's are {expected.shape}")
            continue
        difference = np.abs(served - expected)
        difference[np.isnan(difference)] = np.inf  # a NaN on either side fails
        worst = float(difference.max())
        deltas[name] = worst
        if not worst <= tolerance:
            canary = int(np.unravel_index(np.argmax(difference), difference.shape)[0])
            reasons.append(f"{name}: probabilities differ from the Evaluator's by up to {worst:.3g} "
                           f"(canary {canary}), more than the tolerance {tolerance:g}")
    return deltas, reasons


def judge_probabilities(check: Any) -> tuple[dict[str, float], list[str], list[str]]:
    """`check` (tasks.base.ServedCheck) judged: (max differences per signature, [reasons against], [what passed]),
    a `ServedJudgement`'s fields (this module imports no task: the tasks import it)."""
    deltas, reasons = _compare(check)
    tolerance, canaries = check.config.tolerance, len(check.canaries.records)
    passed = [f"{name}: max |Δ| {deltas[name]:.3g} from the Evaluator's probabilities on "
              f"{canaries} canaries (tolerance {tolerance:g})" for name in sorted(deltas)]
    return deltas, reasons, passed
