"""Masks' likely label errors for the Evaluator's list (evaluator/label_list.py): each image's share of pixels
whose given class the model confidently rejects (`MaskRejections`), highest first. An image is listed when its
share is at least MASK_MIN_SHARE and MASK_MEDIAN_TIMES times the split's median share: a model disagrees with
some boundary pixels of every mask, a mislabeled region stands out from them. Its `given` is the class with the
most pixels predicted as another class, its `suggested` the class predicted most where another was given.

>>> max(MASK_MIN_SHARE, MASK_MEDIAN_TIMES * 0.02), max(MASK_MIN_SHARE, MASK_MEDIAN_TIMES * 0.05)  # the cutoff
(0.1, 0.15000000000000002)
"""
from __future__ import annotations

import numpy as np

from ...evaluator.label_list import IssueList
from ...evaluator.slicing import Scores

MASK_MIN_SHARE = 0.1  # at least a tenth of the image's pixels confidently given another class,
MASK_MEDIAN_TIMES = 3.0  # and three times the split's median image


def mask_issues(scores: Scores) -> IssueList:
    shares = scores.rejections.scores() if scores.rejections is not None else np.zeros(0)
    cutoff = max(MASK_MIN_SHARE, MASK_MEDIAN_TIMES * float(np.median(shares))) if len(shares) else 1.0
    listed = np.flatnonzero(shares >= cutoff)
    listed = listed[np.argsort(-shares[listed], kind="stable")]
    counts = scores.example_cells()[listed]  # int32 [K, 3, C]: true positives, false positives, false negatives
    given = counts[:, 2].argmax(axis=1) if len(listed) else np.zeros(0, np.int64)
    suggested = counts[:, 1].argmax(axis=1) if len(listed) else np.zeros(0, np.int64)
    method = (f"share of pixels whose given class is confidently rejected, listed from "
              f"{cutoff:.3f} (at least {MASK_MIN_SHARE} and {MASK_MEDIAN_TIMES:g}x the median image), highest first")
    return IssueList(listed.astype(np.int64), given.astype(np.int64), suggested.astype(np.int64),
                     shares[listed].astype(np.float64), method)
