"""The tf.data service's servers for the Trainer's input: a dispatcher and CPU workers.

    from shardflow.data_service import DispatcherServerConfig, run
    run(DispatcherServerConfig(port=5050, journal="/vol/journal"))   # serves until SIGTERM
"""
from typing import Any

from .config import DispatcherServerConfig, WorkerServerConfig


def __getattr__(name: str) -> Any:
    """The executor imports TensorFlow: only when a server starts."""
    if name in ("run", "start"):
        from . import executor

        return getattr(executor, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DispatcherServerConfig", "WorkerServerConfig", "run", "start"]
