"""Label issues measured on photos with 5 % of labels flipped: shardflow's lists against cleanlab's.

    python -m benchmarks.run_all --only label_issues                     # 6,000 train, 5,000 eval photos
    python -m benchmarks.run_all --only label_issues --li-train 2k --li-eval 1k --li-epochs 6   # quick

The photos (`label_photos`): crops of the two sample photographs labelled by the strip they were
cut from (8 classes), ingested at 64×64. 5 % of the train rows and 5 % of the eval rows get another
label at random; the changed rows are the ground truth. Then, with the `shardflow` command:

1. **Eval split, every run.** `train` (LeNet, `--li-epochs`) on the noisy train split, then
   `evaluate`: its `label_issues.jsonl` is scored by (index file, row) against the flipped rows.
   The same model's probabilities of the eval split (`shardflow predict`, in the split's order,
   mapped to rows by ExampleGen's provenance) go to shardflow's `find_label_issues` and to
   cleanlab's (`filter_by="prune_by_noise_rate"`, its default, and `"confident_learning"`): the
   contender, on the same probabilities.
2. **Train split, on demand.** `find-label-issues --folds 3` with the same training flags; its list,
   and cleanlab's on the same out-of-fold probabilities.
3. **Cost.** The Evaluator's own timing (metrics.json): the bootstrap's and the label issues'
   seconds against its total, at the eval split's size.

cleanlab 2.7.1 is AGPL-3.0, so it is not a dependency of shardflow: `make bench` installs it into
`.bench-deps/`, which only this benchmark puts on its path.

Targets (issue 32): a model of accuracy ≥ 0.9 on the true labels; precision ≥ 0.8 and recall ≥ 0.7
on each split, and at least cleanlab's on both with the same probabilities; the additions cost
≤ 10 % of the Evaluator's wall time at 5,000 eval photos.
"""
from __future__ import annotations

import csv
import importlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from .label_photos import CLASSES, ensure_labelled_photos, plant_flips
from .monitor import child_env

FLIP_SHARE = 0.05
REPO = Path(__file__).resolve().parent.parent
BENCH_DEPS = REPO / ".bench-deps"


def shardflow(*args: str, log: Path) -> float:
    """Runs `shardflow ARGS`; returns its wall seconds; raises with the log's tail when it fails."""
    started = time.perf_counter()
    with open(log, "w") as out:
        code = subprocess.call([sys.executable, "-m", "shardflow", *args], stdout=out, stderr=subprocess.STDOUT,
                               env=child_env())
    if code:
        tail = "".join(open(log).readlines()[-5:])
        raise RuntimeError(f"shardflow {args[0]} failed (exit {code}); {log}:\n{tail}")
    return time.perf_counter() - started


def scored(found: set[tuple[str, int]] | set[int], truth: set) -> dict[str, Any]:
    """Precision and recall of a list of flagged rows against the planted ones.

    >>> scored({1, 2, 3, 4}, {2, 3, 9})
    {'listed': 4, 'true': 2, 'precision': 0.5, 'recall': 0.667}
    """
    true = len(found & truth)
    return {"listed": len(found), "true": true, "precision": round(true / max(1, len(found)), 3),
            "recall": round(true / max(1, len(truth)), 3)}


def read_labels(index: Path) -> np.ndarray:
    with open(index, newline="") as source:
        return np.array([int(label) for _, label in list(csv.reader(source))[1:]])


def listed_rows(jsonl: Path, index_name: str) -> set[int]:
    """The rows of `index_name` a label_issues.jsonl lists."""
    rows = set()
    with open(jsonl) as source:
        for line in source:
            issue = json.loads(line)
            if Path(issue["index"]).name == index_name:
                rows.add(int(issue["row"]))
    return rows


def from_bench_deps(*modules: str) -> list[Any] | str:
    """`modules` imported from .bench-deps/ (where `make bench` installs the contenders), or why they were not."""
    sys.path.insert(0, str(BENCH_DEPS))
    try:
        return [importlib.import_module(module) for module in modules]
    except ImportError as error:
        return f"cleanlab not importable ({error}); `make bench` installs it into .bench-deps/"
    finally:
        sys.path.remove(str(BENCH_DEPS))


def cleanlab_rows(labels: np.ndarray, probabilities: np.ndarray) -> dict[str, np.ndarray] | str:
    """cleanlab's lists (positions) by its two main filters, or why cleanlab could not run."""
    found = from_bench_deps("cleanlab.filter")
    if isinstance(found, str):
        return found
    (cleanlab_filter,) = found
    return {name: np.flatnonzero(cleanlab_filter.find_label_issues(labels, probabilities, filter_by=name, n_jobs=1))
            for name in ("prune_by_noise_rate", "confident_learning")}


def same_probabilities(labels: np.ndarray, probabilities: np.ndarray, rows: np.ndarray,
                       truth: set[int]) -> dict[str, Any]:
    """shardflow's and cleanlab's lists on the same probabilities, scored by CSV row."""
    from shardflow.core.label_issues import find_label_issues

    out = {f"shardflow {rule}": scored({int(rows[p]) for p in find_label_issues(labels, probabilities, rule=rule).rows},
                                       truth)
           for rule in ("noise_rate", "off_diagonal")}
    contender = cleanlab_rows(labels, probabilities)
    if isinstance(contender, str):
        return {**out, "cleanlab": contender}
    return {**out, **{f"cleanlab {name}": scored({int(rows[p]) for p in found}, truth)
                      for name, found in contender.items()}}


def split_rows(examples: Path, split: str) -> np.ndarray:
    """The CSV row of each example of `split`, in the split's order (ExampleGen's provenance)."""
    from shardflow.core.example_rows import read_example_rows
    from shardflow.core.manifest import read_manifest

    return read_example_rows(examples, read_manifest(examples), split).row


def prepare(work: Path, train: int, evaluated: int) -> dict[str, Any]:
    """The photos, both noisy indexes and their planted rows, and ExampleGen's output over the noisy ones."""
    root = ensure_labelled_photos(work / "label_photos", train=train, eval=evaluated)
    truth = {split: plant_flips(root / f"{split}.csv", root / f"{split}-noisy.csv", FLIP_SHARE, seed=seed)
             for split, seed in (("train", 2), ("eval", 1))}
    examples = work / "li-examples"
    shardflow("example-gen", "--index", f"train={root / 'train-noisy.csv'}", "--index",
              f"eval={root / 'eval-noisy.csv'}", "--data-root", str(root), "--output", str(examples),
              "--resize", "64x64", "--channels", "rgb", "--storage", "jpeg", log=work / "li-example-gen.log")
    return {"root": root, "truth": truth, "examples": examples}


def eval_split(data: dict[str, Any], work: Path, train_args: list[str]) -> dict[str, Any]:
    """Train once; the Evaluator's list; shardflow and cleanlab on the same eval probabilities; the cost."""
    root, examples, truth = data["root"], data["examples"], data["truth"]["eval"]
    model = work / "li-model"
    train_s = shardflow("train", "--examples", str(examples), "--output", str(model), *train_args,
                        log=work / "li-train.log")
    evaluation = work / "li-eval"
    evaluate_s = shardflow("evaluate", "--model", str(model / "model"), "--examples", str(examples),
                           "--output", str(evaluation), "--threshold", "accuracy>=0", log=work / "li-evaluate.log")
    metrics = json.loads((evaluation / "metrics.json").read_text())
    predictions = work / "li-predict"
    shardflow("predict", "--model", str(model / "model"), "--examples", str(examples), "--split", "eval",
              "--top-k", str(CLASSES), "--format", "parquet", "--output", str(predictions), log=work / "li-predict.log")
    probabilities = split_probabilities([predictions], examples, "eval", CLASSES)
    rows = split_rows(examples, "eval")
    given = read_labels(root / "eval-noisy.csv")[rows - 1]
    true_labels = read_labels(root / "eval.csv")[rows - 1]
    return {"train_s": round(train_s, 1), "evaluate_s": round(evaluate_s, 1),
            "accuracy_true_labels": round(float((probabilities.argmax(1) == true_labels).mean()), 4),
            "accuracy_given_labels": round(float((probabilities.argmax(1) == given).mean()), 4),
            "evaluator": scored(listed_rows(evaluation / "label_issues.jsonl", "eval-noisy.csv"), truth),
            "same_probabilities": same_probabilities(given, probabilities, rows, truth),
            "timing": metrics["timing"]}


def split_probabilities(predict_dirs: list[Path], examples: Path, split: str, classes: int) -> np.ndarray:
    """float [N, C] in the split's order, from `shardflow predict --format parquet --top-k C` outputs that
    together cover the split (one for the eval split, one per fold for the train split)."""
    from shardflow.core.manifest import read_manifest
    from shardflow.label_finder.out_of_fold import read_predictions, shard_starts

    starts = shard_starts(read_manifest(examples).splits[split])
    parts = [read_predictions(str(folder), starts, classes) for folder in predict_dirs]
    out = np.full((sum(len(positions) for positions, _ in parts), classes), np.nan)
    for positions, probabilities in parts:
        out[positions] = probabilities
    return out


def train_split(data: dict[str, Any], work: Path, train_args: list[str], folds: int) -> dict[str, Any]:
    """find-label-issues --folds K on the noisy train split; cleanlab on the same out-of-fold probabilities."""
    root, examples, truth = data["root"], data["examples"], data["truth"]["train"]
    found = work / "li-folds"
    seconds = shardflow("find-label-issues", "--examples", str(examples), "--output", str(found), "--folds", str(folds),
                        "--keep-models", *train_args, log=work / "li-find-label-issues.log")
    summary = json.loads((found / "label_issues.json").read_text())
    probabilities = split_probabilities([found / "folds" / str(k) / "predictions" for k in range(folds)], examples,
                                        "train", CLASSES)
    rows = split_rows(examples, "train")
    given = read_labels(root / "train-noisy.csv")[rows - 1]
    true_labels = read_labels(root / "train.csv")[rows - 1]
    return {"seconds": round(seconds, 1), "out_of_fold_accuracy_given": summary["out_of_fold_accuracy"],
            "out_of_fold_accuracy_true_labels": round(float((probabilities.argmax(1) == true_labels).mean()), 4),
            "find_label_issues": scored(listed_rows(found / "label_issues.jsonl", "train-noisy.csv"), truth),
            "same_probabilities": same_probabilities(given, probabilities, rows, truth)}


def _target(text: str, measured: str, met: bool) -> dict[str, Any]:
    return {"target": text, "measured": measured, "met": bool(met)}


def _list_targets(split: str, listed: dict[str, Any], same: dict[str, Any]) -> list[dict[str, Any]]:
    ours, theirs = same["shardflow noise_rate"], same.get("cleanlab prune_by_noise_rate")
    out = [_target(f"{split}: precision ≥ 0.8, recall ≥ 0.7", f"{listed['precision']:.3f}, {listed['recall']:.3f}",
                   listed["precision"] >= 0.8 and listed["recall"] >= 0.7)]
    if isinstance(theirs, dict):
        out.append(_target(f"{split}: ≥ cleanlab's find_label_issues on both, same probabilities",
                           f"{ours['precision']:.3f}/{ours['recall']:.3f} vs {theirs['precision']:.3f}/"
                           f"{theirs['recall']:.3f}",
                           ours["precision"] >= theirs["precision"] and ours["recall"] >= theirs["recall"]))
    return out


def targets(evaluated: dict[str, Any], trained: dict[str, Any], eval_size: int) -> list[dict[str, Any]]:
    timing = evaluated["timing"]
    added = (timing.get("intervals_seconds") or 0) + (timing.get("label_issues_seconds") or 0)
    share = added / timing["total_seconds"]
    return [_target("model accuracy ≥ 0.9 on the true eval labels", f"{evaluated['accuracy_true_labels']:.4f}",
                    evaluated["accuracy_true_labels"] >= 0.9),
            *_list_targets("eval split (Evaluator)", evaluated["evaluator"], evaluated["same_probabilities"]),
            *_list_targets("train split (--folds 3)", trained["find_label_issues"], trained["same_probabilities"]),
            _target(f"bootstrap + label issues ≤ 10 % of the Evaluator's wall at {eval_size:,} eval photos",
                    f"{added:.2f} s of {timing['total_seconds']:.1f} s = {share:.1%}", share <= 0.10)]


def _lists_table(same: dict[str, Any], listed_name: str, listed: dict[str, Any]) -> list[str]:
    lines = ["| list | listed | planted found | precision | recall |", "|---|---:|---:|---:|---:|"]
    for name, score in [(listed_name, listed), *same.items()]:
        if isinstance(score, str):
            lines.append(f"| {name} | {score} | | | |")
        else:
            lines.append(f"| {name} | {score['listed']} | {score['true']} | {score['precision']:.3f} | "
                         f"{score['recall']:.3f} |")
    return lines


def markdown(result: dict[str, Any]) -> str:
    evaluated, trained = result["eval_split"], result["train_split"]
    lines = [f"Eval split ({result['eval']:,} photos, {result['flip_share']:.0%} flipped; model accuracy "
             f"{evaluated['accuracy_true_labels']:.4f} on the true labels, {evaluated['accuracy_given_labels']:.4f} on "
             "the given ones):", ""]
    lines += _lists_table(evaluated["same_probabilities"], "Evaluator's label_issues.jsonl", evaluated["evaluator"])
    lines += ["", f"Train split ({result['train']:,} photos, `find-label-issues --folds {result['folds']}`, "
                  f"{trained['seconds']:.0f} s; out-of-fold accuracy {trained['out_of_fold_accuracy_true_labels']:.4f} "
                  "on the true labels):", ""]
    lines += _lists_table(trained["same_probabilities"], "find-label-issues' label_issues.jsonl",
                          trained["find_label_issues"])
    lines += ["", "| target | measured | met |", "|---|---:|:---:|"]
    lines += [f"| {t['target']} | {t['measured']} | {'yes' if t['met'] else '**no**'} |" for t in result["targets"]]
    return "\n".join(lines)
