"""The Evaluator benchmark's measuring process: Evaluator vs Keras `predict`, side by side, one process.

    python -m benchmarks.evaluator_bench --examples EX --out DIR [--batch-size 512] [--repeats 3]

EX is an ExampleGen output whose "eval" split holds the examples (28×28 gray, labels 0..9). Not
measured: `shardflow train` trains a LeNet for TRAIN_EXAMPLES examples' worth of steps on that
split (so its accuracy means something) and exports it; the same weights are loaded into a Keras
LeNet for `predict`, and every example is decoded into memory as float32 / 255. Then, `--repeats` times in turn:
  evaluator  `shardflow.evaluator.run` on EX: the whole run (model load, streaming the split from
             its shards through the serving signature, metrics, plot, outputs) and its scoring
             phase alone (first batch requested → last batch counted);
  predict    `model.predict` on the in-memory float tensors at the same batch size.
Figures: best and median examples/s of each side, the first (cold) run of each, the median of
the ratios of back-to-back pairs, and the median ratio of CPU seconds (the whole Evaluator run
against predict: on a shared machine CPU time moves less than wall time). The last stdout line is a JSON report; the Evaluator's accuracy is checked against the one of
predict's outputs (same model, same examples: they must agree).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from shardflow.core.process_defaults import apply_process_defaults

apply_process_defaults()  # as the command and a pipeline step, before TensorFlow is imported

TRAIN_EXAMPLES = 4000


def _load_all(examples: Path) -> tuple[Any, Any]:
    """Every eval example decoded: float32 [N, 28, 28, 1] in [0, 1] and int64 labels."""
    import numpy as np

    from shardflow.core.input_stream import StreamOptions, build_stream

    pixels, labels = [], []
    for batch in build_stream(examples, "eval", StreamOptions(batch_size=4096)):
        pixels.append(batch["x"].numpy().astype(np.float32) / 255.0)
        labels.append(batch["y"].numpy())
    return np.concatenate(pixels), np.concatenate(labels)


def _trained_model(examples: Path, out: Path) -> tuple[Any, Path]:
    """`shardflow train` (LeNet, a short run on the eval split) → its export and the same weights in Keras."""
    from shardflow.trainer import ExportOptions, FitOptions, InputOptions, ModelOptions, TrainerConfig
    from shardflow.trainer import run as train
    from shardflow.trainer.export import warm_start
    from shardflow.trainer.models import lenet

    config = TrainerConfig(input=InputOptions(examples=str(examples), batch_size=64, train_split="eval",
                                              eval_split=None, input_probe_batches=5),
                           model=ModelOptions(name="lenet"), fit=FitOptions(steps=TRAIN_EXAMPLES // 64),
                           export=ExportOptions(output=str(out / "train")))
    summary = train(config, echo=lambda line: print(line, file=sys.stderr))
    model = lenet("x", (28, 28, 1), 10)  # the Trainer's model, for `predict` on in-memory tensors
    warm_start(model, summary["model"])
    return model, Path(summary["model"])


def _evaluate(model_dir: Path, examples: Path, out: Path, batch_size: int) -> dict[str, Any]:
    from shardflow.evaluator import EvaluatorConfig, run

    started, cpu = time.perf_counter(), time.process_time()
    outcome = run(EvaluatorConfig(model=str(model_dir), examples=str(examples), output=str(out),
                                  batch_size=batch_size), echo=lambda line: print(line, file=sys.stderr))
    total, cpu = time.perf_counter() - started, time.process_time() - cpu
    timing = outcome.metrics["timing"]
    return {"total_s": total, "cpu_s": cpu, "scoring_s": timing["scoring_seconds"], "examples": outcome.metrics["num_examples"],
            "accuracy": outcome.metrics["overall"]["accuracy"], "log_loss": outcome.metrics["overall"]["log_loss"]}


def _predict(model: Any, pixels: Any, labels: Any, batch_size: int) -> dict[str, Any]:
    import numpy as np

    started, cpu = time.perf_counter(), time.process_time()
    probabilities = model.predict(pixels, batch_size=batch_size, verbose=0)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    truth = np.clip(probabilities[np.arange(len(labels)), labels], np.finfo(np.float32).eps, 1)
    return {"total_s": seconds, "cpu_s": cpu, "examples": len(pixels),
            "accuracy": float((probabilities.argmax(axis=1) == labels).mean()),
            "log_loss": float(-np.log(truth.astype(np.float64)).mean())}


def measure(examples: Path, out: Path, batch_size: int, repeats: int) -> dict[str, Any]:
    pixels, labels = _load_all(examples)
    model, model_dir = _trained_model(examples, out)
    runs = []
    for repeat in range(repeats):
        print(f"repeat {repeat + 1}/{repeats}", file=sys.stderr, flush=True)
        runs.append({"repeat": repeat, "evaluator": _evaluate(model_dir, examples, out / "eout", batch_size),
                     "predict": _predict(model, pixels, labels, batch_size)})
    return {"examples": int(len(labels)), "batch_size": batch_size, "repeats": repeats, "runs": runs,
            **_summary(runs)}


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Best and median examples/s of each side, and the median of the back-to-back pairs' ratios.

    The paired ratio is the steadier figure on a shared machine: a busy phase slows both runs of a
    pair alike, while best-of can pair one side's lucky moment with the other's unlucky one.
    """
    import statistics

    count = runs[0]["evaluator"]["examples"]
    scoring = [count / r["evaluator"]["scoring_s"] for r in runs]
    whole = [count / r["evaluator"]["total_s"] for r in runs]
    predict = [count / r["predict"]["total_s"] for r in runs]
    first = runs[0]
    return {
        "evaluator_scoring_per_s": max(scoring), "evaluator_total_per_s": max(whole), "predict_per_s": max(predict),
        "median_evaluator_scoring_per_s": statistics.median(scoring),
        "median_evaluator_total_per_s": statistics.median(whole), "median_predict_per_s": statistics.median(predict),
        "first_evaluator_scoring_per_s": scoring[0], "first_predict_per_s": predict[0],
        "paired_ratio_median": statistics.median(s / p for s, p in zip(scoring, predict)),
        "paired_ratio_whole_run_median": statistics.median(w / p for w, p in zip(whole, predict)),
        # CPU seconds (all threads) per example: less sensitive than wall time to other users' load.
        "cpu_ratio_whole_run_median": statistics.median(r["predict"]["cpu_s"] / r["evaluator"]["cpu_s"] for r in runs),
        "accuracy": {"evaluator": first["evaluator"]["accuracy"], "predict": first["predict"]["accuracy"]},
        "log_loss": {"evaluator": first["evaluator"]["log_loss"], "predict": first["predict"]["log_loss"]},
        "accuracy_agrees": all(abs(r["evaluator"]["accuracy"] - r["predict"]["accuracy"]) < 1e-9 for r in runs),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.evaluator_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    report = measure(args.examples, args.out, args.batch_size, args.repeats)
    print(json.dumps(report), flush=True)
    return 0 if report["accuracy_agrees"] else 1


if __name__ == "__main__":
    sys.exit(main())
