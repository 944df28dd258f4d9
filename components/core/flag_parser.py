"""An argparse parser whose mistakes raise a ShardflowError instead of exiting the process.

For a command's flags given as one string inside another command (`--train-args "..."` of `shardflow tune`,
a pipeline step's options): the mistake becomes the one-line error of the outer command, with its exit code.

>>> from shardflow.core.errors import ConfigError
>>> parser = FlagParser(prog="shardflow train", error=lambda message: ConfigError(f"--train-args: {message}"))
>>> _ = parser.add_argument("--epochs", type=int, required=True)
>>> parser.parse_args([])
Traceback (most recent call last):
...
shardflow.core.errors.ConfigError: --train-args: shardflow train: error: the following arguments are required: --epochs
"""
from __future__ import annotations

import argparse
from typing import Any, Callable, NoReturn

from .errors import ConfigError, ShardflowError


class FlagParser(argparse.ArgumentParser):
    """`error(message)` builds the exception raised for "PROG: error: MESSAGE" (default: a ConfigError)."""

    def __init__(self, *args: Any, error: Callable[[str], ShardflowError] = ConfigError, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._make_error = error

    def error(self, message: str) -> NoReturn:
        raise self._make_error(f"{self.prog}: error: {message}")
