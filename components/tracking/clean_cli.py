"""`shardflow clean-serving`: the Pusher's flags (pusher/clean_cli.py); its run is tracking's (clean_serving.py), which
adds the registry alias's version to the protected ones when --tracking-uri is given.
"""
from __future__ import annotations

from ..pusher.clean_cli import add_arguments, config_from_args

__all__ = ["add_arguments", "config_from_args"]
