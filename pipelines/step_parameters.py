"""The pipeline's per-step parameters, derived from the step table and the commands' own flags: nothing
here names a step's option.

Each step with options (steps.py's `StepOptions`) has one list parameter taking any flag of its command
(`evaluate_options`; `shardflow run --evaluate-args "--memory-mb 128"`), and each flag its command marks
with `expose` (core/pipeline_flags.py) is a parameter of its own (typed and defaulted from the flag).
From them come the compiled pipeline's parameters (pipeline.py), `shardflow run`'s step flags
(pipelines/cli.py) and LocalRunConfig's fields (local_run.py).

    [(p.name, p.kind, p.default) for p in step_parameters()][:2]
    # [("example_gen_options", list, []), ("validation_options", list, [])] ...
"""
from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass
from typing import Any

from ..core.pipeline_flags import ExposedFlag
from .steps import STEPS, Step


@dataclass(frozen=True)
class StepParameter:
    """One pipeline parameter of a step: its name, type (list, bool, int, float, str) and pipeline default;
    `flag`: the exposed flag it stands for (None: the step's options)."""

    name: str
    kind: type
    default: Any
    step: Step
    flag: ExposedFlag | None = None


def step_parameters() -> list[StepParameter]:
    """Every step's options parameter and exposed flags, in the table's order."""
    found: list[StepParameter] = []
    for step in STEPS:
        if step.options is None:
            continue
        found.append(StepParameter(step.options.param, list, list(step.options.default), step))
        found += [StepParameter(flag.param, flag.kind, flag.default, step, flag) for flag in step.exposed]
    return found


def add_step_arguments(parser: argparse.ArgumentParser) -> None:
    """`shardflow run`'s flags for the steps; each defaults to None: the pipeline's default."""
    for parameter in step_parameters():
        if parameter.flag is None:
            options, command = parameter.step.options, parameter.step.command.name
            default = f" (default '{shlex.join(options.default)}')" if options.default else ""
            example = f", e.g. {options.example}" if options.example else ""
            parser.add_argument(options.run_flag, dest=parameter.name, default=None, metavar="FLAGS",
                                help=f"`shardflow {command}` flags, one string{example}{default}")
        else:
            _add_like(parser, parameter.flag)


def _add_like(parser: argparse.ArgumentParser, flag: ExposedFlag) -> None:
    """The command's own flag under `shardflow run`'s name: same type, choices and help, default None."""
    action = flag.action
    kwargs: dict[str, Any] = {"dest": flag.param, "default": None, "help": action.help}
    if flag.kind is bool:
        kwargs["action"] = "store_true"
    else:
        kwargs.update(type=action.type, choices=action.choices, metavar=action.metavar)
        if flag.kind is list:
            kwargs.update(action="extend", nargs="+")
    parser.add_argument(flag.run_flag, **kwargs)


def step_values(args: argparse.Namespace) -> dict[str, Any]:
    """The step parameters `shardflow run` was given (options split as a shell would), by parameter name."""
    given: dict[str, Any] = {}
    for parameter in step_parameters():
        value = getattr(args, parameter.name)
        if value is None or (parameter.kind is bool and not value):
            continue
        if parameter.flag is None:
            value = shlex.split(value)
        given[parameter.name] = tuple(value) if isinstance(value, list) else value
    return given
