"""Errors shared by every component: one base class that carries the command's exit status.

`shardflow`'s main prints any ShardflowError as one line and exits with its `exit_code`: a user's
mistake never shows a traceback, and no CLI adapter maps exceptions to exit codes itself.

>>> ConfigError("bad").exit_code, ShardflowError("failed").exit_code
(2, 1)
"""
from __future__ import annotations


class ShardflowError(Exception):
    """A failure the user can act on, reported as one line; exit 1 (the run failed) unless a subclass says otherwise."""

    exit_code = 1


class ConfigError(ShardflowError, ValueError):
    """An option with a bad value; the message names the option and the value. Exit 2."""

    exit_code = 2
