"""The metrics the Trainer logs per epoch (history.json, TensorBoard), per task.

Segmentation logs mean IoU and mean Dice beside pixel accuracy, which the background class
dominates. Both are defined as the Evaluator defines them (tasks/segmentation/evaluation.py): from the
confusion matrix of the epoch's pixels, per class IoU = TP / (TP + FP + FN) and Dice =
2TP / (2TP + FP + FN), averaged over the classes present in a mask or a prediction.

>>> import numpy as np
>>> dice = MeanDice(num_classes=2, sparse_y_pred=False)
>>> _ = dice.update_state(np.array([[0, 1, 1]]), np.array([[[0.9, 0.1], [0.2, 0.8], [0.7, 0.3]]]))
>>> round(float(dice.result()), 4)  # background: 2*1/(2+1) = 0.6667, object: 2*1/(1+2) = 0.6667
0.6667
"""
from __future__ import annotations

import tensorflow as tf
import tf_keras as keras


class MeanDice(keras.metrics.MeanIoU):
    """Mean Dice over the classes that occur, from the same running confusion matrix as MeanIoU."""

    def result(self) -> tf.Tensor:
        confusion = tf.cast(self.total_cm, self._dtype)
        true_positives = tf.linalg.tensor_diag_part(confusion)
        denominator = tf.reduce_sum(confusion, axis=0) + tf.reduce_sum(confusion, axis=1)
        occurring = tf.reduce_sum(tf.cast(tf.not_equal(denominator, 0), self._dtype))
        return tf.math.divide_no_nan(tf.reduce_sum(tf.math.divide_no_nan(2 * true_positives, denominator)),
                                     occurring)


def training_metrics(task_kind: str, num_classes: int) -> list[keras.metrics.Metric]:
    """`accuracy` (per pixel for masks); for segmentation also `mean_iou` and `mean_dice`."""
    metrics: list[keras.metrics.Metric] = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
    if task_kind == "segmentation":
        metrics += [keras.metrics.MeanIoU(num_classes, name="mean_iou", sparse_y_pred=False),
                    MeanDice(num_classes, name="mean_dice", sparse_y_pred=False)]
    return metrics
