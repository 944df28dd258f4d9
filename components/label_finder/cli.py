"""`shardflow find-label-issues`: translates command-line flags into a LabelFinderConfig. Nothing else.

    shardflow find-label-issues --examples runs/examples --output runs/label-issues --epochs 10 \
        [--folds 3] [--rule noise_rate|off_diagonal] [--keep-models] [any other `shardflow train` flag]
    (boxes: [--box-iou 0.5] [--pictures 100])

Every `shardflow train` flag is defined here by the Trainer's own `add_arguments` and becomes a
TrainerConfig through its own `config_from_args`, so the fold models take exactly train's options,
checked as train checks them; `--output` is this command's output (the fold models go inside it).
"""
from __future__ import annotations

import argparse

from ..core.batch_memory import SCORING_BUDGET_MB
from ..trainer import cli as trainer_cli
from ..core.box_issues import DEFAULT_IOU
from .config import DEFAULT_PICTURES, RULES, LabelFinderConfig

OUTPUT_HELP = ("label_issues.jsonl (ranked), label_issues.json (the summary), pictures/ (boxes), "
               "folds/<k>/ with --keep-models")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    trainer_cli.add_arguments(parser)  # the fold models' options: every train flag
    for action in parser._actions:
        if "--output" in action.option_strings:
            action.help = OUTPUT_HELP
    add = parser.add_argument
    add("--folds", type=int, default=3, help="K: each fold's rows are predicted by a model trained on the other "
                                             "K-1 folds of --train-split (default 3; folds seeded by --seed)")
    add("--rule", choices=RULES, default="noise_rate",
        help="confident learning's rule (default noise_rate, as cleanlab's prune_by_noise_rate)")
    add("--keep-models", action="store_true", help="keep each fold's model and predictions under OUTPUT/folds/<k>/")
    add("--memory-mb", type=float, default=SCORING_BUDGET_MB,
        help=f"activations budget of one prediction call, in MB (default {SCORING_BUDGET_MB})")
    add("--box-iou", type=float, default=DEFAULT_IOU,
        help=f"boxes: the IoU at which a detection covers a given box (default {DEFAULT_IOU})")
    add("--pictures", type=int, default=DEFAULT_PICTURES,
        help=f"boxes: a PNG for each of the first N listed images, under OUTPUT/pictures/ (default {DEFAULT_PICTURES})")


def config_from_args(args: argparse.Namespace, extra: list[str]) -> LabelFinderConfig:
    del extra  # not a Beam command: always empty (shardflow.cli refuses unknown flags)
    return LabelFinderConfig(train=trainer_cli.config_from_args(args, []), output=args.output, folds=args.folds,
                             rule=args.rule, keep_models=args.keep_models, memory_mb=args.memory_mb,
                             box_iou=args.box_iou, pictures=args.pictures)
