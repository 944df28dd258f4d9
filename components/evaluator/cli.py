"""`shardflow evaluate`: translates command-line flags into an EvaluatorConfig. Nothing else.

    shardflow evaluate --model runs/train/model --examples runs/examples --output runs/eval \
        [--split eval] [--baseline runs/blessed/model] [--threshold 'accuracy>=0.9' ...] \
        [--max-regression accuracy=0.01 ...] [--regression-tolerance auto|0.03|off] [--slice-by site ...] \
        [--gate non-inferiority|point|strict] [--bootstrap-resamples 1000] [--bootstrap-seed 0] \
        [--memory-mb 1024 | --batch-size N]

Exit 0 whether the model is blessed or not (the verdict is in EOUT/BLESSED or EOUT/NOT_BLESSED);
1 when the evaluation itself fails (unreadable model, label missing, ...); 2 for a bad option.
"""
from __future__ import annotations

import argparse

from ..core.batch_memory import SCORING_BUDGET_MB
from ..core.flag_parser import config_from_flags
from ..core.pipeline_flags import expose
from .config import (AUTO_TOLERANCE, DEFAULT_GATE_RULE, DEFAULT_THRESHOLDS, DEFAULT_TOLERANCES, GATE_RULES,
                     EvaluatorConfig, parse_tolerance)
from .intervals import DEFAULT_RESAMPLES, DEFAULT_SEED


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--model", required=True, help="exported model directory (SavedModel + shardflow_model.json)")
    add("--examples", required=True, help="ExampleGen output directory (with manifest.json)")
    add("--split", default="eval", help="split to score (default eval)")
    add("--output", required=True,
        help="output directory: metrics.json, confusion_matrix.png, blessing.json, BLESSED or NOT_BLESSED")
    add("--baseline", help="an earlier (blessed) model, scored on the same examples for comparison")
    # A pipeline run's default threshold is its target kind's (pipelines/run_target.py); a compiled one's this.
    expose(add("--threshold", action="extend", nargs="+", default=[], metavar="METRIC>=VALUE",
               help="e.g. 'accuracy>=0.9', 'log_loss<0.3', 'mean_iou>0.5' (quote: > is a shell redirection); "
                    "repeatable"), "eval_thresholds", default=[DEFAULT_THRESHOLDS["classification"]])
    expose(add("--max-regression", action="extend", nargs="+", default=[], metavar="METRIC=AMOUNT",
               help="largest allowed worsening against --baseline, e.g. accuracy=0.01; repeatable"), "max_regressions")
    defaults = ", ".join(f"{rule} {amount:g}" for rule, amount in DEFAULT_TOLERANCES.items())
    expose(add("--regression-tolerance", default=AUTO_TOLERANCE, metavar="AMOUNT|auto|off",
               help="with --baseline, each --threshold metric may be at most this much worse than the baseline's "
                    f"unless --max-regression names it (default auto: the gate rule's, {defaults}); 'off': no "
                    "default gate"))
    expose(add("--gate", default=DEFAULT_GATE_RULE, choices=GATE_RULES,
        help=f"what decides (default {DEFAULT_GATE_RULE}): point = the point estimates; non-inferiority = the 95%% "
             "interval of the paired candidate - baseline difference must exclude a worsening beyond the allowance; "
             "strict = that, and each --threshold on its interval's pessimistic bound"), "eval_gate")
    expose(add("--bootstrap-resamples", type=int, default=DEFAULT_RESAMPLES, metavar="B",
               help=f"resamples of the eval examples for the 95%% intervals (default {DEFAULT_RESAMPLES}; 0: no "
                    "intervals, only with --gate point)"))
    expose(add("--bootstrap-seed", type=int, default=DEFAULT_SEED,
               help=f"the resamples' seed (default {DEFAULT_SEED})"))
    expose(add("--slice-by", action="extend", nargs="+", default=[], metavar="COLUMN",
               help="also compute every metric per value of this column of the examples; repeatable"))
    add("--memory-mb", type=float, default=SCORING_BUDGET_MB,
        help=f"activations budget of one model call, in MB (default {SCORING_BUDGET_MB}): the batch holds as many "
             "examples as fit, measured on the first examples")
    add("--batch-size", type=int, default=None,
        help="examples per model call instead of sizing by --memory-mb; refused when it cannot fit that budget")


def config_from_args(args: argparse.Namespace, extra: list[str]) -> EvaluatorConfig:
    del extra  # not a Beam command: always empty (shardflow.cli and the pipeline steps refuse unknown flags)
    return config_from_flags(EvaluatorConfig, args, thresholds=tuple(args.threshold),
                             max_regressions=tuple(args.max_regression),
                             regression_tolerance=parse_tolerance(args.regression_tolerance))
