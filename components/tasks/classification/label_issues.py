"""Class labels' likely label errors for the Evaluator's list (evaluator/label_list.py): confident learning over
the candidate's class probabilities (`core.label_issues.find_label_issues`, rule `noise_rate`), ranked by
self-confidence (the model's probability of the given label), lowest first; the suggested label is the model's
arg-max.

>>> from shardflow.evaluator.slicing import Scores
>>> scores = Scores(num_classes=2)
>>> scores.add(np.array([0, 0, 3, 3, 1, 3]), np.zeros(6), {})       # labels 0, 0, 1, 1, 0, 1
>>> scores.add_probabilities(np.array([0, 0, 1, 1, 0, 1]),
...                          np.array([[.9, .1], [.8, .2], [.2, .8], [.1, .9], [.05, .95], [.3, .7]]))
>>> issues = class_issues(scores)
>>> issues.positions.tolist(), issues.given.tolist(), issues.suggested.tolist()
([4], [0], [1])
"""
from __future__ import annotations

import numpy as np

from ...core.errors import ShardflowError
from ...core.label_issues import find_label_issues
from ...evaluator.label_list import IssueList
from ...evaluator.slicing import Scores

RULE = "noise_rate"  # cleanlab's default, prune_by_noise_rate (core/label_issues.py)


def class_issues(scores: Scores) -> IssueList:
    """The candidate's issues from what scoring kept (`Scores.add_probabilities`)."""
    probabilities = scores.example_probabilities()
    if probabilities is None:
        raise ShardflowError("no class probabilities were kept while scoring: cannot list label issues")
    labels = scores.example_cells().astype(np.int64) // scores.num_classes
    # A label unseen in training (the OOV id, past the served classes) has no probability to weigh: those
    # examples are counted in the report's OOV row, not judged here.
    seen = np.flatnonzero(labels < probabilities.shape[1])
    found = find_label_issues(labels[seen], probabilities[seen], rule=RULE)
    rows = seen[found.rows]
    return IssueList(rows, labels[rows], found.suggested, found.self_confidence,
                     f"confident learning ({RULE}), ranked by self-confidence, lowest first")
