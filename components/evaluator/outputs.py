"""What the Evaluator hands to the other components: its output files' names, and the error raised instead of them.

Apart from config.py so that the task packages (components/tasks/<kind>/), which write some of these files and
raise the error, import neither the config nor the registry that config.py reads (no import cycle).

>>> METRICS, BLESSED, CANARY_DETECTION_COLUMNS[-1]
('metrics.json', 'BLESSED', 'class')
"""
from __future__ import annotations

from ..core.errors import ShardflowError

# The Evaluator's output files: the executor writes them; infra validation, Push and the pipeline read them.
METRICS, PLOT, BLESSING = "metrics.json", "confusion_matrix.png", "blessing.json"
RELIABILITY_PLOT = "reliability_diagram.png"  # classifiers only
BLESSED, NOT_BLESSED = "BLESSED", "NOT_BLESSED"  # the verdict: exactly one of them, written last
CANARIES, CANARY_PREDICTIONS = "canaries.tfrecord", "canary_predictions.npy"  # what infra validation replays
LABEL_ISSUES, LABEL_ISSUES_SHEET = "label_issues.jsonl", "label_issues.png"  # the split's likely label errors
DETECTIONS_PLOT, PRECISION_RECALL_PLOT = "detections.png", "precision_recall.png"  # detectors only
# A detector's canary_predictions.npy: float32 [N, MAX_DETECTIONS, 6], each served detection's columns (rows past
# num_detections are zeros, as served): boxes normalised, the score, the class as a label map id (from 1).
CANARY_DETECTION_COLUMNS = ("ymin", "xmin", "ymax", "xmax", "score", "class")
# The key of metrics.json and blessing.json naming the baseline the verdict was gated against (a local one made
# absolute), or NO_BASELINE: Push moves the serving pointer only while that is still what is served.
GATED_AGAINST, NO_BASELINE = "gated_against", "none"


class EvaluationError(ShardflowError, RuntimeError):
    """The evaluation could not be done: unreadable model, label missing from the examples, bad labels, ..."""
