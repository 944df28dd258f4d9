"""Push: copy a blessed model to a serving directory, then repoint CURRENT.json and TF Serving's models.config.

    from shardflow.pusher import PusherConfig, run, resolve_latest

    pushed = run(PusherConfig(model="s3://b/runs/train/model", evaluation="s3://b/runs/eval",
                              serving_dir="s3://b/serving"))
    pushed.version, pushed.location      # 3, 's3://b/serving/3/model/3' (pusher/layout.py)
    resolve_latest("s3://b/serving")      # 's3://b/serving/3/model/3' ('' when nothing was pushed yet)

The pointer moves only while it names the baseline the evaluation gated the model against; a refused
push is `pushed=False` with one reason (`ServingChanged`'s line from `push_model`). TF Serving serves the
version the pointer names (tf_serving.py); `rollback` serves an earlier one again, `clean` removes what
killed pushes left (cleanup.py).
"""
from .config import ANY, GATED, LATEST, REPLACE_MODES, CleanServingConfig, PusherConfig, RollbackConfig, ServingChanged
from .executor import PushResult, push_model, resolve_latest, resolve_model_reference, run, served_model_for
from .serving import SERVING_POINTER, read_pointer
from .tf_serving import MODEL_CONFIG, TfServing

__all__ = ["ANY", "CleanServingConfig", "GATED", "LATEST", "MODEL_CONFIG", "PushResult", "PusherConfig",
           "REPLACE_MODES", "RollbackConfig", "SERVING_POINTER", "ServingChanged", "TfServing", "push_model",
           "read_pointer", "resolve_latest", "resolve_model_reference", "run", "served_model_for"]
