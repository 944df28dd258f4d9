"""Errors shared by every component: one base class that carries the command's exit status.

`shardflow`'s main prints any ShardflowError as one line and exits with its `exit_code`: a user's
mistake never shows a traceback, and no CLI adapter maps exceptions to exit codes itself.

>>> ConfigError("bad").exit_code, ShardflowError("failed").exit_code, RetryableError("lost").exit_code
(2, 1, 75)
"""
from __future__ import annotations


class ShardflowError(Exception):
    """A failure the user can act on, reported as one line; exit 1 (the run failed) unless a subclass says otherwise."""

    exit_code = 1


# A verdict, not a failure: the command did its work and decided no (a push whose model is not blessed).
EXIT_REFUSED = 3
# A failure worth retrying as it is (sysexits' EX_TEMPFAIL): another writer got there first (a push's lost race).
EXIT_RETRY = 75


class RetryableError(ShardflowError):
    """A failure the same command, run again, may not meet (another writer got there first). Exit 75."""

    exit_code = EXIT_RETRY


class ConfigError(ShardflowError, ValueError):
    """An option with a bad value; the message names the option and the value. Exit 2."""

    exit_code = 2
