"""`shardflow predict`: translates command-line flags into a PredictConfig. Nothing else.

    shardflow predict --model runs/serving --index new.csv --data-root photos --output preds \
        [--format csv|parquet] [--top-k 3] [--min-score 0.3] [--prediction-log] [--memory-mb 1024 | --batch-size N] [Beam options]
    shardflow predict --model runs/train/model --examples runs/examples --split eval --output preds

Exit 0 when every row was predicted or rejected (rejects are in OUTPUT/rejects.jsonl); 1 when the
run fails; 2 for a bad option.
"""
from __future__ import annotations

import argparse

from ..core.batch_memory import SCORING_BUDGET_MB
from .config import DEFAULT_BATCH, DEFAULT_MIN_SCORE, FORMATS, PredictConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--model", required=True,
        help="a model exported by shardflow train, or a serving directory (or its CURRENT.json) from shardflow push")
    add("--index", help="CSV index of the files to predict (the image column named as in training)")
    add("--data-root", help="directory (or s3:// / gs:// prefix) the index's paths are relative to")
    add("--examples", help="instead of --index: an ExampleGen output directory")
    add("--split", default="eval", help="with --examples: the split to predict (default eval)")
    add("--output", required=True, help="output directory: predictions/, rejects.jsonl, masks/, predict.json")
    add("--format", choices=FORMATS, default="csv", help="prediction table format (default csv)")
    add("--top-k", type=int, default=3, help="classes listed per row, best first (default 3)")
    add("--min-score", type=float, default=DEFAULT_MIN_SCORE,
        help=f"boxes scoring less are not written (default {DEFAULT_MIN_SCORE:g}: even odds, the boxes "
             "a person would keep; 0 writes every box)")
    add("--prediction-log", action="store_true", help="also write TFX-style PredictionLog TFRecords")
    add("--memory-mb", type=float, default=SCORING_BUDGET_MB,
        help=f"activations budget of one model call, in MB (default {SCORING_BUDGET_MB}): a call holds as many "
             f"examples as fit, at most {DEFAULT_BATCH}, measured on the first examples")
    add("--batch-size", type=int, default=None,
        help=f"examples per model call (default: sized by --memory-mb, at most {DEFAULT_BATCH}); "
             "refused when it cannot fit --memory-mb")
    add("--max-batch-mb", type=float, default=64.0, help="bytes of examples per model call at most (default 64)")
    add("--rows-per-chunk", type=int, help="CSV rows per work unit (default: from the row count)")


def config_from_args(args: argparse.Namespace, extra: list[str]) -> PredictConfig:
    """`extra` are Beam's own options (--runner, --direct_num_workers, ...)."""
    return PredictConfig(model=args.model, output=args.output, index=args.index, data_root=args.data_root,
                         examples=args.examples, split=args.split, format=args.format, top_k=args.top_k,
                         prediction_log=args.prediction_log, batch_size=args.batch_size,
                         max_batch_mb=args.max_batch_mb, memory_mb=args.memory_mb, rows_per_chunk=args.rows_per_chunk,
                         min_score=args.min_score,
                         beam_args=tuple(extra))
