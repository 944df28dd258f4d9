"""An argparse parser whose mistakes raise a ShardflowError instead of exiting the process, and the one check
of the flags a command's parser did not know (`check_extra`: the `shardflow` command and every pipeline step).

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
import dataclasses
from typing import Any, Callable, NoReturn, Sequence, TypeVar

from .beam_options import flag_tokens, unknown_flags, unknown_option_message
from .errors import ConfigError, ShardflowError


class FlagParser(argparse.ArgumentParser):
    """`error(message)` builds the exception raised for "PROG: error: MESSAGE" (default: a ConfigError)."""

    def __init__(self, *args: Any, error: Callable[[str], ShardflowError] = ConfigError, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._make_error = error

    def error(self, message: str) -> NoReturn:
        raise self._make_error(f"{self.prog}: error: {message}")


def option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every option string `parser` defines (`--epochs`, `-h`, ...)."""
    return [s for action in parser._actions for s in action.option_strings]


def refuse_unknown_flags(command: str, tokens: Sequence[str], known: Sequence[str], passes_beam_options: bool) -> None:
    """ConfigError naming the first flag in `tokens` that `command` does not define (`known`: its option strings;
    an abbreviation of one counts, as argparse takes it) and, for a command that passes Beam's options on, that
    Beam does not define either: Beam would only warn and the run would go on with the default."""
    flags = unknown_flags(tokens) if passes_beam_options else flag_tokens(tokens)
    for flag in flags:
        if not any(option.startswith(flag.partition("=")[0]) for option in known):
            raise ConfigError(unknown_option_message(flag, command, known, passes_beam_options))


def check_extra(command: str, extra: Sequence[str], known: Sequence[str], passes_beam_options: bool) -> None:
    """What `command`'s parser left over (`parse_known_args`): Beam's own options when the command passes them
    on; anything else is a ConfigError, an unknown flag named with the closest known one.

    >>> check_extra("train", ["--epohcs", "3"], ["--epochs", "--steps"], False)
    Traceback (most recent call last):
    ...
    shardflow.core.errors.ConfigError: unknown option --epohcs (not a shardflow train option); did you mean --epochs?
    """
    refuse_unknown_flags(command, extra, known, passes_beam_options)
    if extra and not passes_beam_options:
        raise ConfigError(f"unrecognized arguments: {' '.join(extra)}")


Config = TypeVar("Config")


def config_from_flags(config_class: type[Config], args: argparse.Namespace, **converted: Any) -> Config:
    """The config whose fields come from the flags of the same name (argparse's dests; a repeatable flag's list
    as a tuple), and `converted`: the fields a flag gives under another name or that need converting.
    A flag is named once, in `add_arguments`, when its dest is the field's name.

    >>> @dataclasses.dataclass(frozen=True)
    ... class Seen:
    ...     output: str
    ...     slice_by: tuple = ()
    ...     fail: bool = True
    >>> config_from_flags(Seen, argparse.Namespace(output="o", slice_by=["a"], warn_only=True), fail=False)
    Seen(output='o', slice_by=('a',), fail=False)
    """
    names = {field.name for field in dataclasses.fields(config_class)}
    given = {name: tuple(value) if isinstance(value, list) else value
             for name, value in vars(args).items() if name in names}
    return config_class(**{**given, **converted})
