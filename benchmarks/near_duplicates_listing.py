"""Near-duplicate pairs through ExampleGen, end to end: is every flagged pair in near_duplicates.jsonl?

Train: `originals` images of each kind (benchmarks/near_duplicates.py's photo crops, drawings,
near-uniform images, photo tiles and drawings on gradients). Eval: one altered copy of every second
original (the alterations in turn), and as many fresh distinct images (photo crops and tiles
overlapping a train one by more than 30 % IoU are left out). Every image is saved as a 128×128 PNG (lossless: ExampleGen hashes the pixels
this module hashes). ExampleGen runs on them with the default distance; its list is compared with
every cross-split pair the same rule flags by brute force over the same files:

- `missing` / `extra`: flagged pairs not in the list, listed pairs not flagged (both must be 0);
- `recall`: planted copies listed; `fresh_flagged_share`: fresh eval images in any listed pair.
"""
from __future__ import annotations

import csv
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from shardflow.core.perceptual_hash import image_hashes, near_kinds
from testkit.image_alterations import ALTERATIONS, alter
from testkit.near_duplicate_images import box_overlap, originals_of

SIDE = 128


def _fresh(rng: np.random.Generator, count: int, taken: list[tuple[int, ...] | None]) -> dict[str, list[Image.Image]]:
    """`count` originals of each kind, but photo crops and tiles overlapping one of `taken` by more than 30 % IoU."""
    images, boxes = originals_of(rng, count)
    taken = [box for box in taken if box is not None]
    return {kind: [image for image, box in zip(ims, boxes[n * count:(n + 1) * count])
                   if box is None or all(box_overlap(box, other) <= 0.3 for other in taken)]
            for n, (kind, ims) in enumerate(images.items())}


def _save(image: Image.Image, root: Path, name: str) -> str:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    image.convert("RGB").resize((SIDE, SIDE), Image.Resampling.BILINEAR).save(path)
    return name


def write_set(root: Path, originals: int, seed: int = 13) -> dict[str, list[str]]:
    """train.csv and eval.csv under `root`; returns the train, copy and fresh paths (copy i of train 2i)."""
    rng = np.random.default_rng(seed)
    train_images, boxes = originals_of(rng, originals)
    fresh_images = _fresh(rng, originals // 2, boxes)
    paths: dict[str, list[str]] = {"train": [], "copy": [], "fresh": []}
    for kind, images in train_images.items():
        for i, image in enumerate(images):
            paths["train"].append(_save(image, root, f"train/{kind}_{i}.png"))
            if i % 2 == 0:
                alteration = ALTERATIONS[(i // 2) % len(ALTERATIONS)]
                paths["copy"].append(_save(alter(image, alteration, rng), root, f"eval/{kind}_{i}_{alteration}.png"))
        paths["fresh"] += [_save(image, root, f"eval/fresh_{kind}_{i}.png") for i, image in enumerate(fresh_images[kind])]
    for split, names in (("train", paths["train"]), ("eval", paths["copy"] + paths["fresh"])):
        with open(root / f"{split}.csv", "w", newline="") as out:
            csv.writer(out).writerows([["image", "label"]] + [[name, 0] for name in names])
    return paths


def listing(originals: int, work: Path, distance: int) -> dict[str, Any]:
    """ExampleGen's list against the brute-force pairs (module docstring)."""
    from shardflow.example_gen import ExampleGenConfig, IndexSpec, run

    root = work / "near_duplicates_listing"
    paths = write_set(root / "data", originals)
    started = time.perf_counter()
    manifest = run(ExampleGenConfig(
        indexes=(IndexSpec(str(root / "data" / "train.csv"), "train"), IndexSpec(str(root / "data" / "eval.csv"), "eval")),
        data_root=str(root / "data"), output=str(root / "out"), near_duplicate_distance=distance,
        beam_args=("--direct_running_mode=in_memory",), progress_seconds=3600.0), echo=lambda _: None)
    seconds = time.perf_counter() - started
    report = manifest.extra["near_duplicates"]
    with open(root / "out" / report["file"]) as lines:
        listed = [json.loads(line) for line in lines]
    pairs = {tuple(sorted(o["path"] for o in pair["occurrences"])) for pair in listed}  # (eval/…, train/…)
    flagged = _flagged(root / "data", paths["copy"] + paths["fresh"], paths["train"], distance)
    planted = {(copy, paths["train"][_train_of(copy, paths["train"])]) for copy in paths["copy"]}
    fresh_flagged = {e for e, _ in pairs if e in set(paths["fresh"])}
    return {"originals_per_kind": originals, "train": len(paths["train"]), "copies": len(paths["copy"]),
            "fresh": len(paths["fresh"]), "example_gen_seconds": round(seconds, 1), "count": report["count"],
            "listed": len(listed), "distinct_listed": len(pairs), "flagged": len(flagged),
            "missing": len(flagged - pairs), "extra": len(pairs - flagged),
            "recall": len(planted & pairs) / len(planted), "fresh_flagged_share": len(fresh_flagged) / len(paths["fresh"])}


def _flagged(data: Path, evals: list[str], train: list[str], distance: int) -> set[tuple[str, str]]:
    """Every (eval, train) pair of files the rule flags (`near_kinds`, brute force over all pairs)."""
    hashes = {name: image_hashes(Image.open(data / name)) for name in evals + train}
    first, second = (np.repeat(evals, len(train)), np.tile(train, len(evals)))
    arrays = [tuple(np.array([hashes[name][n] for name in names], dtype=np.int64) for n in range(3))
              for names in (first, second)]
    near = near_kinds(arrays[0], arrays[1], distance) >= 0
    return set(zip(first[near].tolist(), second[near].tolist()))


def _train_of(copy: str, train: list[str]) -> int:
    """The train row a copy was made from: eval/{kind}_{i}_{alteration}.png ← train/{kind}_{i}.png."""
    kind_and_number = copy.split("/", 1)[1].rsplit("_", 1)[0]
    return train.index(f"train/{kind_and_number}.png")
