"""Tracking: a `shardflow run`'s records in MLflow (a parent run, a nested run per step) and its pushed models in
MLflow's registry, following CURRENT.json. The files stay the record; MLflow is rebuilt from them.

    from shardflow.tracking import TrackConfig, run
    run(TrackConfig(output="runs/digits", tracking_uri="http://127.0.0.1:5000"))
"""
from .config import TrackConfig
from .executor import run

__all__ = ["TrackConfig", "run"]
