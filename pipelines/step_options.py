"""Every step's options checked up front, through each command's own parser and config, running nothing.

`shardflow run` and a compiled pipeline's first task call `check_step_options`: a bad option stops the
run before its first step, not hours later, and the error names the option as the user wrote it
(`RUN_FLAGS` for `shardflow run`, `PIPELINE_PARAMETERS` for `shardflow compile --param`). The steps,
their argv and their labels are the step table's (steps.py).
"""
from __future__ import annotations

import os
from typing import Any

from ..core.errors import ConfigError
from .step_bodies import StepFailed, parse_step_argv
from .steps import Places, checked_steps, labels as step_labels

# What the user wrote for each command's options, named in errors: `shardflow run`'s flags, or the
# pipeline parameters `shardflow compile --param` bakes ("index": what the index says, read before any step).
RUN_FLAGS = step_labels("run")
PIPELINE_PARAMETERS = step_labels("pipeline")


def check_step_options(p: dict[str, Any], labels: dict[str, str] = RUN_FLAGS) -> dict[str, Any]:
    """Every step's options (`p`: the pipeline's parameters) through that command's own parser and config
    constructor, running nothing: a bad option stops the run before its first step, not hours later.

    Returns each command's config by command name. Raises ConfigError naming the option (`labels`) and
    the command's own message. The paths given to the configs are placeholders under the run directory,
    never read (configs check files only in run()).
    """
    at = os.path.join(os.path.dirname(p["run_record_dir"]), "option-check")
    places = Places(*(os.path.join(at, name) for name in ("input", "output", "model")))
    configs = {}
    for step in checked_steps():
        command = step.command
        try:
            argv = step.argv(p, places)
            if argv is None:  # not in this run (no tune options, no predict index)
                continue
            args, extra = parse_step_argv(command.name, command.cli, argv, command.passes_beam_options)
            configs[command.name] = command.cli.config_from_args(args, extra)
        except StepFailed as err:
            raise ConfigError(f"{labels[step.name]}: {err}") from err
        except ConfigError as err:
            raise ConfigError(f"{labels[step.name]}: shardflow {command.name}: {err}") from err
    return configs
