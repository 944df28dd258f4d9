"""Every step's options checked up front, through each command's own parser and config, running nothing.

`shardflow run` and a compiled pipeline's first task call `check_step_options`: a bad option stops the
run before its first step, not hours later, and the error names the option as the user wrote it
(`RUN_FLAGS` for `shardflow run`, `PIPELINE_PARAMETERS` for `shardflow compile --param`).
"""
from __future__ import annotations

import os
from typing import Any

from ..core.errors import ConfigError
from ..evaluator import cli as evaluator_cli
from ..example_gen import cli as example_gen_cli
from ..infra_validator import cli as infra_validator_cli
from ..predict import cli as predict_cli
from ..trainer import cli as trainer_cli
from ..transform import cli as transform_cli
from ..tuner import cli as tuner_cli
from ..validation import cli as validation_cli
from .launchers import (StepFailed, evaluate_argv, example_gen_argv, infra_validate_argv, parse_step_argv,
                        predict_argv, train_argv, transform_argv, tune_argv, validate_argv)

# What the user wrote for each command's options, named in errors: `shardflow run`'s flags, or the
# pipeline parameters `shardflow compile --param` bakes ("index": what the index says, read before any step).
RUN_FLAGS = {"index": "--index/--example-gen-args", "example-gen": "--example-gen-args/--beam-args",
             "validate": "--drift-threshold/--validation-schema/--validate-args",
             "transform": "--transform-args/--beam-args", "train": "--train-args", "tune": "--tune-args",
             "evaluate": "--threshold/--max-regression/--regression-tolerance/--slice-by",
             "infra-validate": "--infra-validate-args", "predict": "--predict-index/--predict-args/--beam-args"}
PIPELINE_PARAMETERS = {"index": "index/example_gen_options", "example-gen": "example_gen_options/beam_args",
                       "validate": "drift_threshold/validation_schema/validation_options",
                       "transform": "transform_options/beam_args", "train": "train_options", "tune": "tune_options",
                       "evaluate": "eval_thresholds/max_regressions/regression_tolerance/slice_by",
                       "infra-validate": "infra_validation_options",
                       "predict": "predict_index/predict_options/beam_args"}


def check_step_options(p: dict[str, Any], labels: dict[str, str] = RUN_FLAGS) -> dict[str, Any]:
    """Every step's options (`p`: the pipeline's parameters) through that command's own parser and config
    constructor, running nothing: a bad option stops the run before its first step, not hours later.

    Returns each command's config by command name. Raises ConfigError naming the option (`labels`) and
    the command's own message. The paths given to the configs are placeholders under the run directory,
    never read (configs check files only in run()).
    """
    at = os.path.join(os.path.dirname(p["run_record_dir"]), "option-check")
    given, out, model = (os.path.join(at, name) for name in ("input", "output", "model"))
    steps = [("example-gen", example_gen_cli, True,
              example_gen_argv(p["index"], p["data_root"], p["example_gen_options"], p["beam_args"], out)),
             ("validate", validation_cli, False,
              validate_argv(given, out, p["drift_threshold"], p["validation_warn_only"], p["validation_schema"],
                             p.get("validation_options", []))),
             ("transform", transform_cli, True, transform_argv(given, p["transform_options"], p["beam_args"], out)),
             ("train", trainer_cli, False, train_argv(given, p["train_options"], out)),
             *([("tune", tuner_cli, False, tune_argv(given, p["tune_options"], p["train_options"], out))]
               if p.get("tune_options") else []),
             ("evaluate", evaluator_cli, False,
              evaluate_argv(model, given, p["eval_thresholds"], p["max_regressions"],
                             p.get("regression_tolerance", "0.01"), p["slice_by"], out)),
             ("infra-validate", infra_validator_cli, False,
              infra_validate_argv(model, given, p.get("infra_validation_options", []), out)),
             *([("predict", predict_cli, True, predict_argv(model, p["predict_index"], p.get("predict_data_root")
                                                             or p["data_root"], p.get("predict_options", []),
                                                             p["beam_args"], out))]
               if p.get("predict_index") else [])]
    configs = {}
    for command, cli, takes_beam_options, argv in steps:
        try:
            args, extra = parse_step_argv(command, cli, argv, takes_beam_options)
            configs[command] = cli.config_from_args(args, extra)
        except StepFailed as err:
            raise ConfigError(f"{labels[command]}: {err}") from err
        except ConfigError as err:
            raise ConfigError(f"{labels[command]}: shardflow {command}: {err}") from err
    return configs
