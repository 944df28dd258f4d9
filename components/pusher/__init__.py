"""Push: copy a blessed model to a serving directory TF Serving watches, then repoint CURRENT.json.

    from shardflow.pusher import PusherConfig, run, resolve_latest

    pushed = run(PusherConfig(model="s3://b/runs/train/model", evaluation="s3://b/runs/eval",
                              serving_dir="s3://b/serving"))
    pushed.version, pushed.location      # 3, 's3://b/serving/3'
    resolve_latest("s3://b/serving")      # 's3://b/serving/3' ('' when nothing was pushed yet)
"""
from .config import LATEST, PusherConfig
from .executor import (SERVING_POINTER, PushResult, push_model, read_pointer, resolve_latest, resolve_model_reference,
                       run)

__all__ = ["LATEST", "PushResult", "PusherConfig", "SERVING_POINTER", "push_model", "read_pointer", "resolve_latest",
           "resolve_model_reference", "run"]
