"""tf_keras's own code is left as it is by TensorFlow's autograph, as TensorFlow leaves the `keras` package's.

`model.fit` traces its train step with autograph on: every Python function the step calls is converted
(parsed, rewritten, compiled) unless a rule in `autograph.core.config.CONVERSION_RULES` says not to.
TensorFlow 2.16's rules skip `tensorflow` and `keras` (Keras 2 was written to run unconverted), but not
`tf_keras`, the same Keras 2 under another name that TF_USE_LEGACY_KERAS selects. So each training
process converted tf_keras's training, layer-call, loss, metric and preprocessing code again:
~13 s of a photo Trainer's first epoch with augmentation (epoch 1 18 s → 1 s, the same weights),
~3 s on the digits. The user's own functions (a model's `call`, a custom `train_step`) are still converted.

    leave_tf_keras_unconverted()   # once per process, before the first `fit`; idempotent

`CONVERSION_RULES` is module state of a private TensorFlow module (TensorFlow is pinned);
tests/trainer/test_keras_autograph.py fails if a TensorFlow upgrade moves it.
"""
from __future__ import annotations

from tensorflow.python.autograph.core import config as autograph_config

_PACKAGE = "tf_keras"


def leave_tf_keras_unconverted() -> None:
    """Adds a do-not-convert rule for tf_keras ahead of autograph's own rules, once."""
    rules = autograph_config.CONVERSION_RULES
    if any(isinstance(rule, autograph_config.DoNotConvert) and rule.matches(_PACKAGE) for rule in rules):
        return
    autograph_config.CONVERSION_RULES = (autograph_config.DoNotConvert(_PACKAGE), *rules)
