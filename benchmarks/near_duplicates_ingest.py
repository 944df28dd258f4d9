"""Issue 46's set through `shardflow example-gen`: recall on altered copies, false flags on distinct images.

    python -m benchmarks.near_duplicates_ingest --work /tmp/nd_ingest --seeds 46 47 48
    PYTHONPATH=/tmp/old python -m benchmarks.near_duplicates_ingest --work /tmp/nd_old   # another shardflow

Train: 200 originals at 160 px, saved as PNG: photo tiles, drawings on gradients and flat colours
(`near_duplicate_images`), 2 : 2 : 1. Eval: an altered copy (`sides`: up to 5 % cut per side,
0.5-1.5×, brightness ±10 %, JPEG 60-95, saved at its altered size) of every second original, 100,
and 150 fresh distinct images of the same kinds (tiles overlapping a train tile by more than 30 %
IoU and flat colours within 40 levels of a train one are drawn again). ExampleGen runs as the issue
ran it (`--resize 128x128 --channels rgb --near-duplicates warn`, in a child process of the
interpreter running this module, so PYTHONPATH picks the shardflow measured). Recall: copies listed
with their original in near_duplicates.jsonl; false flags: fresh images in any listed pair.
"""
from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from testkit import near_duplicate_images as images

MIX = ("photo_tile", "drawing_on_gradient", "drawing_on_gradient", "photo_tile", "flat")  # 2 : 2 : 1


def _originals(rng: np.random.Generator, count: int, taken: dict[str, list[Any]]) -> list[tuple[str, Any]]:
    """`count` originals of MIX's kinds in turn; tiles and flat colours apart from (and added to) `taken`'s."""
    kinds = [MIX[i % len(MIX)] for i in range(count)]
    tiles, boxes = images.photo_tiles(rng, kinds.count("photo_tile"), avoid=taken["boxes"])
    flats, colours = images.flats(rng, kinds.count("flat"), avoid=taken["colours"])
    taken["boxes"] += boxes
    taken["colours"] += colours
    made = {"photo_tile": iter(tiles), "flat": iter(flats),
            "drawing_on_gradient": iter(images.drawings_on_gradient(rng, kinds.count("drawing_on_gradient")))}
    return [(kind, next(made[kind])) for kind in kinds]


def write_set(root: Path, seed: int, train: int = 200, fresh: int = 150) -> dict[str, list[str]]:
    """train.csv and eval.csv under `root`; returns the train, copy and fresh paths (copy i of train 2i)."""
    rng = np.random.default_rng(seed)
    taken: dict[str, list[Any]] = {"boxes": [], "colours": []}
    originals = _originals(rng, train, taken)
    distinct = _originals(rng, fresh, taken)
    for folder in ("train", "eval"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    paths: dict[str, list[str]] = {"train": [], "copy": [], "fresh": []}
    for i, (kind, image) in enumerate(originals):
        paths["train"].append(f"train/{kind}_{i}.png")
        image.save(root / paths["train"][-1])
        if i % 2 == 0:
            paths["copy"].append(f"eval/{kind}_{i}.jpg")
            (root / paths["copy"][-1]).write_bytes(images.sides_jpeg(image, rng))
    for i, (kind, image) in enumerate(distinct):
        paths["fresh"].append(f"eval/fresh_{kind}_{i}.png")
        image.save(root / paths["fresh"][-1])
    for split, names in (("train", paths["train"]), ("eval", paths["copy"] + paths["fresh"])):
        with open(root / f"{split}.csv", "w", newline="") as out:
            csv.writer(out).writerows([["image", "label"]] + [[name, 0] for name in names])
    return paths


def example_gen(root: Path, output: Path) -> None:
    """The issue's command, in a child process of this interpreter."""
    subprocess.run([sys.executable, "-m", "shardflow", "example-gen", "--index", f"train={root / 'train.csv'}",
                    "--index", f"eval={root / 'eval.csv'}", "--data-root", str(root), "--output", str(output),
                    "--resize", "128x128", "--channels", "rgb", "--near-duplicates", "warn"],
                   check=True, stdout=subprocess.DEVNULL)


def scored(paths: dict[str, list[str]], listed: list[dict[str, Any]]) -> dict[str, Any]:
    """Recall on the copies and false flags on the fresh images, from near_duplicates.jsonl's lines."""
    pairs = {tuple(sorted(o["path"] for o in line["occurrences"])) for line in listed}  # (eval/…, train/…)
    found = [(copy, f"train/{copy[5:-4]}.png") in pairs for copy in paths["copy"]]
    fresh = set(paths["fresh"])
    flagged = {path for pair in pairs for path in pair if path in fresh}
    missed = [copy for copy, hit in zip(paths["copy"], found) if not hit]
    return {"copies": len(found), "found": sum(found), "missed": missed,
            "fresh": len(fresh), "fresh_flagged": sorted(flagged),
            "hashes": sorted({line["hash"] for line in listed})}


def measure(work: Path, seed: int) -> dict[str, Any]:
    root = work / f"set-{seed}"
    paths = write_set(root / "data", seed)
    example_gen(root / "data", root / "out")
    with open(root / "out" / "near_duplicates.jsonl") as lines:
        return {"seed": seed, **scored(paths, [json.loads(line) for line in lines])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.near_duplicates_ingest", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="a fresh folder for the sets and outputs")
    parser.add_argument("--seeds", type=int, nargs="+", default=[46], help="one set per seed (default 46)")
    args = parser.parse_args(argv)
    results = [measure(args.work, seed) for seed in args.seeds]
    for result in results:
        print(json.dumps(result))
    found, copies = sum(r["found"] for r in results), sum(r["copies"] for r in results)
    flagged, fresh = sum(len(r["fresh_flagged"]) for r in results), sum(r["fresh"] for r in results)
    print(f"copies listed {found}/{copies} ({found / copies:.1%}); fresh images flagged {flagged}/{fresh}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
