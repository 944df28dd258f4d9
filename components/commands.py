"""The components' commands, one row each: the `shardflow` command registers these (components/cli.py), and
a pipeline step that runs a command finds it here (pipelines/steps.py, pipelines/step_bodies.py).

A row's `cli` module has `add_arguments(parser)` and `config_from_args(args, extra)`, and its package an
`executor` module with `run(config)`; `Command.main` is every command's one entry point: the config from
the flags, the checks that read storage before the heavy imports, then `run`.
`passes_beam_options`: flags the command does not define that are Beam pipeline options go on to Beam
(`extra`); any other unknown flag is refused (core/flag_parser.check_extra), as for every other command.

    COMMANDS["train"].cli.config_from_args(args, extra)
"""
from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

from .data_service import cli as data_service_cli
from .deployer import cli as deploy_cli
from .deployer import promote_cli
from .deployer import rollback_cli as followed_rollback_cli
from .evaluator import cli as evaluator_cli
from .example_gen import cli as example_gen_cli
from .infra_validator import cli as infra_validator_cli
from .label_finder import cli as label_finder_cli
from .predict import cli as predict_cli
from .pusher import cli as pusher_cli
from .trainer import cli as trainer_cli
from .transform import cli as transform_cli
from .tracking import clean_cli as clean_serving_cli
from .tracking import cli as tracking_cli
from .tuner import cli as tuner_cli
from .validation import cli as validation_cli


@dataclass(frozen=True)
class Command:
    """`shardflow NAME`: its help line, its adapter module, whether Beam's own options pass through, and
    whether a pipeline step runs it (an on-demand command, such as find-label-issues, is run by hand)."""

    name: str
    help: str
    cli: ModuleType
    passes_beam_options: bool = False
    pipeline_step: bool = True
    exit_status: Callable[[Any], int] = lambda result: 0  # the status of a run that returned (failures raise)
    executor: str = "executor"  # the module of the cli's package whose run(config) does the work

    def main(self, args: argparse.Namespace, extra: list[str]) -> int:
        """Runs the command; failures raise (shardflow.cli's main gives the exit status)."""
        config = self.cli.config_from_args(args, extra)
        config.check_inputs()  # a wrong location is reported before the heavy imports (TensorFlow, Beam)
        run = importlib.import_module(f".{self.executor}", self.cli.__package__).run  # imported only when it runs
        return self.exit_status(run(config))


# In the order `shardflow --help` lists them.
COMMANDS: dict[str, Command] = {command.name: command for command in (
    Command("example-gen", "CSV indexes of files → sharded TFRecords (Beam)", example_gen_cli, True),
    Command("transform", "full-pass preprocessing of examples with tf.Transform (Beam)", transform_cli, True),
    Command("validate", "TFDV checks of every split against train's schema and statistics", validation_cli),
    Command("train", "stream shards through tf.data into a Keras model, export it", trainer_cli),
    Command("tune", "search the Trainer's hyperparameters (KerasTuner): best_hyperparameters.json for train",
            tuner_cli),
    Command("evaluate", "score a split, compare with a baseline, bless or not", evaluator_cli),
    Command("infra-validate", "load the model in a TensorFlow-only process as TF Serving would: call, time, "
            "warm-up file", infra_validator_cli),
    Command("push", "copy a blessed model to a serving directory, repoint CURRENT.json and TF Serving's config",
            pusher_cli, exit_status=lambda result: result.exit_code),
    Command("rollback", "serve an earlier pushed version again (CURRENT.json, TF Serving's config and, with "
            "--inference-service, KServe's)", followed_rollback_cli, pipeline_step=False, executor="rollback"),
    Command("deploy", "make a KServe InferenceService serve the version CURRENT.json names (or it as a canary)",
            deploy_cli, pipeline_step=False),
    Command("promote", "serve the canary: CURRENT.json and the KServe InferenceService together", promote_cli,
            pipeline_step=False, executor="promote"),
    Command("clean-serving", "remove what killed pushes left in a serving directory; --keep K: old versions too",
            clean_serving_cli, pipeline_step=False, executor="clean_serving"),
    Command("predict", "batch inference of a served model over a CSV index or examples (Beam RunInference)",
            predict_cli, True),
    Command("find-label-issues", "rank the train split's likely label errors: K fold models' out-of-fold "
            "probabilities, confident learning", label_finder_cli, pipeline_step=False),
    Command("track", "send a run output's finished runs to MLflow, make its registry follow CURRENT.json",
            tracking_cli, pipeline_step=False),
    Command("data-service", "a tf.data service dispatcher or worker: the Trainer's input on CPU workers",
            data_service_cli, pipeline_step=False),
)}
