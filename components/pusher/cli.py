"""`shardflow push`: translates command-line flags into a PusherConfig. Nothing else.

    shardflow push --model runs/train/model --evaluation runs/evaluation --serving-dir s3://b/serving \
        [--infra-validation runs/infra] [--replace gated|any] [--model-name shardflow] [--serving-base-path P]

Exit status: 0 when pushed (or its content already served); 3 when a verdict refused it (the evaluation, or with
--infra-validation the infra validation, did not bless this model: final); 75 when another push moved the
serving pointer since the model was gated (nothing changes; a rerun evaluates against what is served now);
2 on a bad option or a store that does not enforce conditional writes; 1 when the push failed.
"""
from __future__ import annotations

import argparse

from .config import GATED, REPLACE_MODES, STALE_CLAIM_SECONDS, PusherConfig
from .tf_serving import TfServing


def add_serving_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags every command that moves the serving pointer takes (push, rollback, clean-serving)."""
    add = parser.add_argument
    add("--serving-dir", required=True, help="where versions <N>/, CURRENT.json and models.config live (path or URI)")
    add("--model-name", default=TfServing.name, help="the model's name in TF Serving's models.config (default "
                                                     "%(default)s)")
    add("--serving-base-path", default="", metavar="PATH",
        help="the serving directory as TF Serving reads it, written into models.config (default: --serving-dir)")
    add("--stale-claims-after", type=float, default=STALE_CLAIM_SECONDS, metavar="SECONDS",
        help="another host's unfinished push older than this is abandoned and its copy removed (default "
             "%(default)g; a killed push on this host is seen at once)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--model", required=True, help="the exported model directory (shardflow train's OUTPUT/model)")
    add("--evaluation", required=True, help="the Evaluator's output that blessed it (BLESSED / NOT_BLESSED)")
    add_serving_arguments(parser)
    add("--infra-validation", default="", metavar="DIR",
        help="shardflow infra-validate's output: push only when INFRA_BLESSED, with its TF Serving warm-up file")
    add("--replace", default=GATED, choices=REPLACE_MODES,
        help="gated (default): move CURRENT.json only while it names the baseline the evaluation gated the model "
             "against (nothing served, for an evaluation without one); any: replace whatever is served")


def tf_serving_from_args(args: argparse.Namespace) -> TfServing:
    return TfServing(args.model_name, args.serving_base_path)


def config_from_args(args: argparse.Namespace, extra: list[str]) -> PusherConfig:
    del extra  # not a Beam command: always empty (shardflow.cli and the pipeline steps refuse unknown flags)
    return PusherConfig(model=args.model, evaluation=args.evaluation, serving_dir=args.serving_dir,
                        infra_validation=args.infra_validation, replace=args.replace,
                        tf_serving=tf_serving_from_args(args), stale_claims_after=args.stale_claims_after)
