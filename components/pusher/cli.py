"""`shardflow push`: translates command-line flags into a PusherConfig. Nothing else.

    shardflow push --model runs/train/model --evaluation runs/evaluation --serving-dir s3://b/serving \
        [--infra-validation runs/infra] [--replace gated|any]

Exit status: 0 when pushed, 1 when the evaluation did not bless the model or, with
--infra-validation, the infra validation did not INFRA_BLESS it, or when the served model is no
longer the baseline the evaluation gated it against (nothing changes), 2 on a bad option.
"""
from __future__ import annotations

import argparse

from .config import GATED, REPLACE_MODES, PusherConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--model", required=True, help="the exported model directory (shardflow train's OUTPUT/model)")
    add("--evaluation", required=True, help="the Evaluator's output that blessed it (BLESSED / NOT_BLESSED)")
    add("--serving-dir", required=True, help="where versions <N>/ and CURRENT.json live (path or URI)")
    add("--infra-validation", default="", metavar="DIR",
        help="shardflow infra-validate's output: push only when INFRA_BLESSED, with its TF Serving warm-up file")
    add("--replace", default=GATED, choices=REPLACE_MODES,
        help="gated (default): move CURRENT.json only while it names the baseline the evaluation gated the model "
             "against (nothing served, for an evaluation without one); any: replace whatever is served")


def config_from_args(args: argparse.Namespace, extra: list[str]) -> PusherConfig:
    del extra  # not a Beam command: always empty (shardflow.cli and the pipeline steps refuse unknown flags)
    return PusherConfig(model=args.model, evaluation=args.evaluation, serving_dir=args.serving_dir,
                        infra_validation=args.infra_validation, replace=args.replace)
