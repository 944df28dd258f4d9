"""`shardflow tune`: translates command-line flags into a TunerConfig. Nothing else.

    shardflow tune --examples runs/transform --output runs/tune [--space 'learning_rate=log:1e-4:1e-1' ...] \
        [--algorithm random|hyperband] [--max-trials 8] [--trial-epochs 2] [--objective val_accuracy] \
        [--train-args "--model mobilenet_v2 --weights w.h5 --batch-size 32"]

Then `shardflow train ... --hyperparameters runs/tune/best_hyperparameters.json`.
"""
from __future__ import annotations

import argparse
import shlex

from ..core.errors import ConfigError
from ..core.flag_parser import FlagParser, config_from_flags
from ..trainer import cli as trainer_cli
from .config import ALGORITHMS, TunerConfig
from .space import DEFAULT_SPACE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--examples", required=True, help="Transform output or ExampleGen output (as for shardflow train)")
    add("--output", required=True, help="best_hyperparameters.json, trials/<id>/ (each a training output), oracle/")
    add("--space", action="append", default=[], metavar="NAME=KIND:ARGS",
        help="a dimension: KIND log:LO:HI, float:LO:HI, int:LO:HI or choice:A,B,...; repeatable "
             f"(default {' '.join(DEFAULT_SPACE)})")
    add("--algorithm", choices=ALGORITHMS, default="random", help="random search or Hyperband (default random)")
    add("--max-trials", type=int, default=8, help="random search's trial budget (default 8)")
    add("--trial-epochs", type=int, default=2, help="epochs per trial; Hyperband's largest (default 2)")
    add("--objective", help="the metric to optimize (default val_accuracy; val_mean_iou for masks, val_loss for boxes; "
                                 "*loss: minimized)")
    add("--hyperband-factor", type=int, default=3)
    add("--seed", type=int, default=0)
    add("--train-args", default="", help="`shardflow train` flags every trial uses, one string")


def config_from_args(args: argparse.Namespace, extra: list[str]) -> TunerConfig:
    del extra  # not a Beam command: always empty (shardflow.cli and the pipeline steps refuse unknown flags)
    base = _trainer_args(shlex.split(args.train_args) + ["--examples", args.examples, "--output", args.output,
                                                         "--epochs", str(args.trial_epochs)])
    return config_from_flags(TunerConfig, args, base=trainer_cli.config_from_args(base, []),
                             space=tuple(args.space) or DEFAULT_SPACE)


def _trainer_args(argv: list[str]) -> argparse.Namespace:
    parser = FlagParser(prog="shardflow train", add_help=False, error=lambda message: ConfigError(f"--train-args: {message}"))
    trainer_cli.add_arguments(parser)
    args, extra = parser.parse_known_args(argv)
    if extra:
        raise ConfigError(f"--train-args: shardflow train: unknown option {extra[0]}")
    for flag in ("examples", "output", "steps", "epochs", "hyperparameters"):
        if argv.count(f"--{flag}") > (1 if flag in ("examples", "output", "epochs") else 0):
            raise ConfigError(f"--train-args: --{flag} is set by shardflow tune itself")
    return args
