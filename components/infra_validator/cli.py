"""`shardflow infra-validate`: translates command-line flags into an InfraValidatorConfig. Nothing else.

    shardflow infra-validate --model runs/train/model --evaluation runs/eval --output runs/infra \
        [--batch-sizes 1,8,32] [--tolerance 1e-4] [--warmup-requests 256] [--timeout 600] \
        [--latency-calls 10] [--latency-seconds 0.5]

Exit 0 whether the model is INFRA_BLESSED or not (the verdict is in OUTPUT/INFRA_BLESSED or
OUTPUT/INFRA_NOT_BLESSED, as the Evaluator's); 1 when the validation itself fails; 2 for a bad option.
"""
from __future__ import annotations

import argparse

from ..core.batch_memory import DEFAULT_BUDGET_MB
from .config import DEFAULT_LATENCY_CALLS, DEFAULT_LATENCY_SECONDS, InfraValidatorConfig, parse_batch_sizes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--model", required=True, help="the exported model directory (shardflow train's OUTPUT/model)")
    add("--evaluation", required=True, help="the Evaluator's output for it (its canaries and probabilities)")
    add("--output", required=True,
        help="output directory: infra_validation.json, assets.extra/tf_serving_warmup_requests, "
             "INFRA_BLESSED or INFRA_NOT_BLESSED")
    add("--batch-sizes", default="1,8,32", help="batch sizes whose latency is measured (default 1,8,32)")
    add("--tolerance", type=float, default=1e-4,
        help="largest allowed |probability − the Evaluator's| (default 1e-4)")
    add("--warmup-requests", type=int, default=256, help="PredictionLog records in the warm-up file (default 256)")
    add("--memory-mb", type=float, default=DEFAULT_BUDGET_MB,
        help=f"activations budget of one call, in MB (default {DEFAULT_BUDGET_MB}): a batch size over it fails the "
             "validation before it is run")
    add("--timeout", type=float, default=600.0, help="seconds the probe process may take (default 600)")
    add("--latency-calls", type=int, default=DEFAULT_LATENCY_CALLS,
        help=f"timed calls per signature and batch size (default {DEFAULT_LATENCY_CALLS})")
    add("--latency-seconds", type=float, default=DEFAULT_LATENCY_SECONDS,
        help=f"fewer timed calls (at least 3) once this many seconds went to one batch size "
             f"(default {DEFAULT_LATENCY_SECONDS:g})")


def config_from_args(args: argparse.Namespace, extra: list[str]) -> InfraValidatorConfig:
    del extra  # not a Beam command: always empty (shardflow.cli and the pipeline steps refuse unknown flags)
    return InfraValidatorConfig(model=args.model, evaluation=args.evaluation, output=args.output,
                                batch_sizes=parse_batch_sizes(args.batch_sizes), tolerance=args.tolerance,
                                warmup_requests=args.warmup_requests, timeout=args.timeout,
                                latency_calls=args.latency_calls, latency_seconds=args.latency_seconds,
                                memory_mb=args.memory_mb)
