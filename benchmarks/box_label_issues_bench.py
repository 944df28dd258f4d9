"""Box label issues on the demo shapes with planted faults: find-label-issues' list against cleanlab's
`object_detection` on the same out-of-fold detections.

    python -m benchmarks.run_all --only box_label_issues                                  # 1,000 images, 30 faults
    python -m benchmarks.run_all --only box_label_issues --bli-images 400 --bli-faults 4  # quick

The set: `demo_boxes.write_boxes(count)` (96 px shapes on photo crops, 80 % train, ingested at `--bli-side`, 96 by default), and in its train index
`--bli-faults` faults of each kind (box_faults.py: boxes removed, classes swapped, boxes shifted by half
their size), each in its own image. Then:

1. **shardflow.** `shardflow example-gen`, then `shardflow find-label-issues --folds 3 --keep-models` (the
   tiny CenterNet, `--bli-epochs`); its `label_issues.jsonl` scored issue by issue against the faults
   (box_faults.score_box_issues), and image by image (an image listed that holds a fault).
2. **cleanlab** (2.7.1, AGPL-3.0: installed by `make bench` into .bench-deps/, never imported by shardflow):
   `object_detection.filter.find_label_issues` (images flagged) and `rank.get_label_quality_scores`
   (images ranked), on the same fold models' detections (folds/<k>/predictions) and the same given boxes,
   in pixels (its distance term is in pixels). It lists images, not boxes: both are scored by image.
3. **Seconds** of each scorer alone on those detections, and the command's wall and CPU seconds.
"""
from __future__ import annotations

import json
import resource
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .box_faults import plant_box_faults, recall_by_kind, score_box_issues
from .label_issues_bench import from_bench_deps, shardflow

FOLDS = 3
EPOCHS = 10  # the fold models (docs/label-issues.md#boxes): 10 epochs of 533 images in the detector's batches of 4, flipped
# ExampleGen's --resize: the demo's own size. At 64 px (the shapes' 12-40 px become 8-27 px) a fold model trains in
# ~2/3 the CPU; on the same 30 faults the list found 19 at 64 px and 19 at 96 px unflipped, 22 at 96 px with the
# detector's default flip (docs/label-issues.md#figures-boxes).
SIDE = 96
TRAIN_FLAGS = ("--eval-split", "", "--input-probe-batches", "1",
               "--deterministic")


def prepare(work: Path, images: int, per_kind: int, side: int = SIDE) -> dict[str, Any]:
    """The demo boxes, the faulted train index, ExampleGen's output over it and the eval index."""
    from shardflow.demo_boxes import write_boxes

    data = work / "bli-data"
    write_boxes(data, count=images)
    faults = plant_box_faults(data / "train.csv", data / "train-faults.csv", per_kind=per_kind)
    examples = work / "bli-examples"
    shardflow("example-gen", "--index", f"train={data / 'train-faults.csv'}", "--index", f"eval={data / 'eval.csv'}",
              "--data-root", str(data), "--output", str(examples), "--near-duplicates", "off", "--resize", f"{side}x{side}",
              log=work / "bli-example-gen.log")
    return {"data": data, "faults": faults, "examples": examples}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def find(data: dict[str, Any], work: Path, epochs: int) -> dict[str, Any]:
    """find-label-issues on the faulted set: its list, scored, and its cost."""
    out = work / "bli-issues"
    cpu = children_cpu()
    seconds = shardflow("find-label-issues", "--examples", str(data["examples"]), "--output", str(out), "--folds",
                        str(FOLDS), "--epochs", str(epochs), *TRAIN_FLAGS, "--keep-models",
                        log=work / "bli-find-label-issues.log")
    issues = [json.loads(line) for line in (out / "label_issues.jsonl").read_text().splitlines()]
    summary = json.loads((out / "label_issues.json").read_text())
    faults = data["faults"]
    return {"out": out, "issues": issues, "summary": summary, "seconds": round(seconds, 1),
            "cpu_seconds": round(children_cpu() - cpu, 1), "listed": score_box_issues(issues, faults),
            "recall_by_kind": recall_by_kind(issues, faults),
            "top": {n: score_box_issues(issues[:n], faults) for n in (len(faults), 2 * len(faults))}}


def by_image(listed: Sequence[str], faults: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Images listed (paths, in rank order, each once) against the images holding a fault."""
    shown, truth = list(dict.fromkeys(listed)), {f["path"] for f in faults}
    hits = sum(path in truth for path in shown)
    return {"images": len(shown), "hits": hits, "precision": round(hits / max(len(shown), 1), 4),
            "recall": round(len(truth & set(shown)) / max(len(truth), 1), 4)}


def same_detections(found: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """Both scorers on the fold models' detections; scored by image, timed alone."""
    from shardflow.core.box_issues import class_thresholds, find_box_issues
    from shardflow.core.example_rows import read_example_rows
    from shardflow.core.manifest import read_manifest
    from shardflow.label_finder.box_reading import given_annotations, per_image, read_detections
    from shardflow.label_finder.out_of_fold import shard_starts

    examples, manifest = str(data["examples"]), read_manifest(data["examples"])
    starts = shard_starts(manifest.splits["train"])
    parts = [read_detections(str(found["out"] / "folds" / str(k) / "predictions"), starts)[1] for k in range(FOLDS)]
    given = given_annotations(examples, manifest, "train")
    detections = per_image(np.concatenate(parts), len(given))
    paths = read_example_rows(examples, manifest, "train").paths
    started = time.perf_counter()
    ours = find_box_issues(given, detections, class_thresholds(given, detections))
    ours_s = time.perf_counter() - started
    out = {"shardflow find_box_issues": {**by_image([paths[i.image] for i in ours], data["faults"]),
                                         "seconds": round(ours_s, 3)}}
    side = int(manifest.features["image"].shape[0]) if "image" in manifest.features else SIDE
    contender = cleanlab_lists(given, detections, side)
    if isinstance(contender, str):
        return {**out, "cleanlab": contender}
    flagged, ranked, seconds = contender
    planted = len({f["path"] for f in data["faults"]})
    out["cleanlab find_label_issues"] = {**by_image([paths[i] for i in flagged], data["faults"]),
                                         "seconds": round(seconds["find_label_issues"], 3)}
    out["cleanlab get_label_quality_scores, top 2x faulted images"] = {
        **by_image([paths[i] for i in ranked[:2 * planted]], data["faults"]),
        "seconds": round(seconds["get_label_quality_scores"], 3)}
    ours_images = list(dict.fromkeys(i.image for i in ours))
    out["shardflow, top 2x faulted images"] = by_image([paths[i] for i in ours_images[:2 * planted]], data["faults"])
    return out


def cleanlab_lists(given: list, detections: list, side: int) -> tuple[np.ndarray, np.ndarray, dict[str, float]] | str:
    """cleanlab's flagged images and its ranking (positions) and seconds, or why it could not run."""
    found = from_bench_deps("cleanlab.object_detection.filter", "cleanlab.object_detection.rank")
    if isinstance(found, str):
        return found
    find_label_issues, get_label_quality_scores = found[0].find_label_issues, found[1].get_label_quality_scores
    ids = sorted({int(c) for g in given for c in g.classes} | {int(c) for d in detections for c in d.classes})
    index = {k: i for i, k in enumerate(ids)}

    def xyxy(boxes: np.ndarray) -> np.ndarray:  # normalised (ymin, xmin, ymax, xmax) → pixel (x1, y1, x2, y2)
        return (np.asarray(boxes, np.float64).reshape(-1, 4)[:, [1, 0, 3, 2]] * side).astype(np.float32)

    labels = [{"bboxes": xyxy(g.boxes[~g.crowd]), "labels": np.array([index[int(c)] for c in g.classes[~g.crowd]],
                                                                     np.int64)} for g in given]
    predictions = [[np.hstack([xyxy(d.boxes[d.classes == k]), d.scores[d.classes == k, None]]
                              ).astype(np.float32).reshape(-1, 5) for k in ids] for d in detections]
    seconds = {}
    started = time.perf_counter()
    flagged = find_label_issues(labels, predictions, return_indices_ranked_by_score=True)
    seconds["find_label_issues"] = time.perf_counter() - started
    started = time.perf_counter()
    ranked = np.argsort(get_label_quality_scores(labels, predictions), kind="stable")
    seconds["get_label_quality_scores"] = time.perf_counter() - started
    return np.asarray(flagged), ranked, seconds
