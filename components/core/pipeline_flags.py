"""A command's flag that a pipeline run exposes: declared once, beside the flag, in the command's cli module.

    expose(add("--rule", default="strict", choices=RULES, help=...), "card_rule")

From that one mark, pipelines/ derives the pipeline parameter (`card_rule`, typed and defaulted from the
flag), `shardflow run`'s flag (`--rule`), the LocalRunConfig field, the up-front check and the step's argv
(`ExposedFlag.argv`). A mark names no pipeline module, and no pipeline module names a flag. Every other
flag of a command reaches a pipeline run through the step's one options parameter
(`--evaluate-args "--memory-mb 256"`), parsed by the command's own parser.

>>> import argparse
>>> def add_arguments(parser):
...     expose(parser.add_argument("--copies", type=int, default=0, help="how many"))
...     expose(parser.add_argument("--dry-run", action="store_true"), "card_dry_run", "--card-dry-run")
...     expose(parser.add_argument("--tag", action="extend", nargs="+", default=[]), "card_tags")
>>> copies, dry, tag = exposed_flags(add_arguments)
>>> copies.param, copies.run_flag, copies.kind, copies.default, copies.argv(1000.0)  # an IR's ints read as floats
('copies', '--copies', <class 'int'>, 0, ['--copies', '1000'])
>>> dry.param, dry.run_flag, dry.argv(True), dry.argv(False)
('card_dry_run', '--card-dry-run', ['--dry-run'], [])
>>> tag.kind, tag.argv(["a>=1", "b"])
(<class 'list'>, ['--tag', 'a>=1', '--tag', 'b'])
>>> dry.argv("true"), tag.argv('["a>=1"]')
(['--dry-run'], ['--tag', 'a>=1'])
"""
from __future__ import annotations

import argparse
import functools
import json
from dataclasses import dataclass
from typing import Any, Callable

_COMMAND_DEFAULT = object()


@dataclass(frozen=True)
class Exposure:
    """Under which names a pipeline run exposes a flag, and the pipeline's default when not the command's."""

    param: str
    run_flag: str
    default: Any


def expose(action: argparse.Action, param: str | None = None, run_flag: str | None = None,
           default: Any = _COMMAND_DEFAULT) -> argparse.Action:
    """Marks `action` (what `parser.add_argument` returned) as a pipeline parameter: `param` (default: the
    flag's dest), `shardflow run`'s `run_flag` (default: the flag itself), the pipeline's `default`."""
    action.exposure = Exposure(param or action.dest, run_flag or action.option_strings[-1],  # type: ignore[attr-defined]
                               action.default if default is _COMMAND_DEFAULT else default)
    return action


@dataclass(frozen=True)
class ExposedFlag:
    """A command's exposed flag: its argparse action and its exposure."""

    action: argparse.Action
    exposure: Exposure

    @property
    def flag(self) -> str:
        return self.action.option_strings[-1]

    @property
    def param(self) -> str:
        return self.exposure.param

    @property
    def run_flag(self) -> str:
        return self.exposure.run_flag

    @property
    def kind(self) -> type:
        """The parameter's type: bool (a switch), list (a repeatable flag), int, float or str."""
        if isinstance(self.action, argparse._StoreTrueAction):
            return bool
        if isinstance(self.action, (argparse._AppendAction, argparse._ExtendAction)):
            return list
        return self.action.type if self.action.type in (int, float) else str

    @property
    def default(self) -> Any:
        """The pipeline's default, of the parameter's type ('' for an unset text flag)."""
        value = self.exposure.default
        if value is None and self.kind in (str, list):
            return "" if self.kind is str else []
        return list(value) if self.kind is list else value

    def argv(self, value: Any) -> list[str]:
        """The command's tokens for a pipeline parameter's value; none for an unset one (None, '', []). A value
        may arrive as its text (a backend substituting a placeholder into a string): "true", '["a", "b"]'."""
        if isinstance(value, str) and self.kind in (bool, list):
            value = value.lower() == "true" if self.kind is bool else json.loads(value) if value.startswith("[") \
                else [value] if value else []
        if self.kind is bool:
            return [self.flag] if value else []
        if self.kind is list:
            return [token for item in value or () for token in (self.flag, str(item))]
        if value is None or value == "":
            return []
        return [self.flag, str(int(float(value))) if self.kind is int else str(value)]


@functools.cache  # asked for by every pipeline parameter, label and step argv: one parser per command
def exposed_flags(add_arguments: Callable[[argparse.ArgumentParser], None]) -> tuple[ExposedFlag, ...]:
    """The flags a command's `add_arguments` marks with `expose`, in its order."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    return tuple(ExposedFlag(action, action.exposure) for action in parser._actions if hasattr(action, "exposure"))
