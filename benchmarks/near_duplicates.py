"""Near-duplicate detection measured: recall on altered copies, false pairs on distinct images, search and hash cost.

    python -m benchmarks.run_all --only near_duplicates                       # 300 originals per kind, 100k and 1M hashes
    python -m benchmarks.run_all --only near_duplicates --nd-originals 100 --nd-hashes 100k

Originals of five kinds: crops of scikit-learn's two sample photographs (96-300 px), photo tiles
(100-px crops of them upscaled to 160 px; crops or tiles of one photo overlapping by more than 30 %
IoU are not counted as distinct), drawings (random rectangles, ellipses, lines and text on a random
background, PIL.ImageDraw), drawings on gradients (filled ellipses and rectangles on a noisy
two-colour gradient) and near-uniform images (linear gradients between two random colours in a
random direction, and flat colours; both with Gaussian noise of σ 1-4). Flat colours are drawn at
least 40 grey levels apart in some channel: closer flat colours are, to any perceptual measure and
to these hashes, within the ±10 % brightness alteration of each other. Each original gets one copy
per alteration: JPEG re-encode at quality 60-95, resize 0.5-1.5×, crop of up to 5 % per dimension,
brightness ±3-10 %, all four together, and `sides` (issue 46's: up to 5 % cut from each side,
0.5-1.5×, ±10 %, JPEG 60-95). The originals and their copies are made by testkit/
(`near_duplicate_images`, `image_alterations`), which the tests share.

A pair is "near" as ExampleGen decides it (`core.perceptual_hash.near_kinds`): dct hashes within the
distance, or both images near-uniform and their tones within it, or a centre hash (of the central
frame) within the distance of the other's dct or centre hash and their tones within it; "uncorroborated"
figures (the rule before issue 46) drop the third.
"""
from __future__ import annotations

import io
import time
from typing import Any, Callable

import numpy as np
from PIL import Image

from shardflow.core.hamming_search import near_pairs, popcount
from shardflow.core.perceptual_hash import image_hashes, near_kinds
from shardflow.core.tone_hash import is_structured
from testkit.image_alterations import ALTERATIONS, alter
from testkit.near_duplicate_images import KINDS, SIDE, distinct_pairs, originals_of, photos

DISTANCES = (6, 8, 10, 12, 14)


def _hashed(images: list[Image.Image]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dct, centre, tone) arrays."""
    return tuple(np.array(values, dtype=np.int64) for values in zip(*(image_hashes(image) for image in images)))


def quality(originals: int, seed: int = 7) -> dict[str, Any]:
    """Recall per kind and alteration, and false pairs among distinct originals, at each distance."""
    rng = np.random.default_rng(seed)
    images, boxes = originals_of(rng, originals)
    hashes = {kind: _hashed(ims) for kind, ims in images.items()}
    copies = {f"{kind}/{alteration}": (hashes[kind], _hashed([alter(image, alteration, rng) for image in ims]))
              for kind, ims in images.items() for alteration in ALTERATIONS}
    every = tuple(np.concatenate([hashes[kind][n] for kind in KINDS]) for n in range(3))
    owner = np.repeat(np.arange(len(KINDS)), originals)
    first, second = distinct_pairs(boxes)
    pairs = (first, second, tuple(v[first] for v in every), tuple(v[second] for v in every))
    by_distance = {}
    for limit in DISTANCES:
        row = _rates(copies, pairs, owner, limit, True)
        without = _rates(copies, pairs, owner, limit, False)
        by_distance[str(limit)] = {**row, "uncorroborated": {key: without[key] for key in (
            "recall", "false_pair_rate", "flagged_share", "flagged_by")}}
    return {"originals_per_kind": originals, "copies": originals * len(KINDS) * len(ALTERATIONS),
            "near_uniform_share": {kind: float(np.mean(~is_structured(hashes[kind][2]))) for kind in KINDS},
            "by_distance": by_distance}


def _rates(copies: dict[str, tuple[tuple[np.ndarray, np.ndarray], ...]], pairs: tuple[Any, ...], owner: np.ndarray,
           limit: int, centre: bool) -> dict[str, Any]:
    """Recall per kind/alteration and false pairs by pair of kinds, by `near_kinds` within `limit` (`centre`:
    with the centre hash)."""
    recall = {key: float(np.mean(near_kinds(*found, limit, centre) >= 0)) for key, found in copies.items()}
    first, second, left, right = pairs
    near = near_kinds(left, right, limit, centre) >= 0
    keys = np.sort(np.stack([owner[first], owner[second]]), axis=0)
    counted = {"/".join(sorted((KINDS[a], KINDS[b]))): (int(np.sum(near & (keys[0] == a) & (keys[1] == b))),
                                                        int(np.sum((keys[0] == a) & (keys[1] == b))))
               for a in range(len(KINDS)) for b in range(a, len(KINDS))}
    flagged = np.unique(np.concatenate([first[near], second[near]]))
    originals = len(owner) // len(KINDS)
    return {"recall": float(np.mean(list(recall.values()))), "recall_by": recall,
            "false_pair_rate": float(near.sum()) / max(1, len(near)),
            "false_pairs_by": {key: f"{n}/{total}" for key, (n, total) in sorted(counted.items())},
            # distinct images in at least one false pair: what a user would wrongly drop
            "flagged_share": len(flagged) / len(owner),
            "flagged_by": {kind: f"{int(np.sum(owner[flagged] == k))}/{originals}" for k, kind in enumerate(KINDS)}}


def hash_cost(repeats: int = 2000) -> dict[str, float]:
    """µs to hash one 224×224 RGB photo crop, beside Pillow's decode of the same image as JPEG q90 and PNG."""
    image = photos(np.random.default_rng(1), 1)[0][0].resize((SIDE, SIDE))
    encoded = {}
    for fmt in ("JPEG", "PNG"):
        buffer = io.BytesIO()
        image.save(buffer, fmt, quality=90)
        encoded[fmt] = buffer.getvalue()

    def per_call(call: Callable[[], object]) -> float:
        best = float("inf")
        for _ in range(3):  # best of three: the machine is shared
            started = time.perf_counter()
            for _ in range(repeats):
                call()
            best = min(best, (time.perf_counter() - started) / repeats * 1e6)
        return round(best, 1)

    image.load()
    return {"hash_us": per_call(lambda: image_hashes(image)),
            "decode_jpeg_us": per_call(lambda: Image.open(io.BytesIO(encoded["JPEG"])).load()),
            "decode_png_us": per_call(lambda: Image.open(io.BytesIO(encoded["PNG"])).load())}


def search_cost(count: int, radius: int, planted: int = 1000, seed: int = 3) -> dict[str, Any]:
    """Seconds to find every pair within `radius` among the hashes of `count` images holding `planted` near pairs,
    searched as ExampleGen searches them: each image's dct hash (random) and centre hash together (`near_groups`).
    A centre hash is its image's dct hash with 0-18 bits flipped (issue 46's set: quartiles 4, 6 and 10 bits, 90 %
    within 18): most are within the radius of their own dct hash, pairs the search finds too."""
    rng = np.random.default_rng(seed)
    hashes = rng.integers(-(1 << 63), (1 << 63) - 1, size=count, dtype=np.int64)
    sources, targets = rng.choice(count, size=(2, planted), replace=False)
    hashes[targets] = _flipped(rng, hashes[sources], radius)
    values = np.concatenate([hashes, _flipped(rng, hashes, 18)])
    started = time.perf_counter()
    first, second, bits, truncated = near_pairs(values, radius)
    seconds = time.perf_counter() - started
    found = set(zip(first.tolist(), second.tolist()))
    planted_found = sum((min(s, t), max(s, t)) in found for s, t in zip(sources.tolist(), targets.tolist()))
    assert np.all(popcount((values[first] ^ values[second]).view(np.uint64)) == bits)
    return {"hashes": count, "values": len(values), "radius": radius, "seconds": round(seconds, 2),
            "pairs": len(found), "planted": planted, "planted_found": planted_found, "truncated": truncated}


def _flipped(rng: np.random.Generator, hashes: np.ndarray, most: int) -> np.ndarray:
    """Each hash with 0-`most` of its 64 bits flipped (uniformly many)."""
    flips = rng.random((len(hashes), 64)).argsort(axis=1) < rng.integers(0, most + 1, size=(len(hashes), 1))
    masks = np.packbits(flips.astype(np.uint8), axis=1).view(">u8")[:, 0].astype(np.uint64)
    return (hashes.view(np.uint64) ^ masks).view(np.int64)


def measure(originals: int, hash_counts: list[int], radius: int) -> dict[str, Any]:
    return {"quality": quality(originals), "hash_cost": hash_cost(),
            "search": [search_cost(count, radius) for count in hash_counts]}


def markdown(result: dict[str, Any], chosen: int) -> str:
    quality_ = result["quality"]
    chosen_row = quality_["by_distance"][str(chosen)]
    kinds = list(quality_["near_uniform_share"])  # as measured: results before issue 46 hold three kinds
    alterations = list(dict.fromkeys(key.split("/", 1)[1] for key in chosen_row["recall_by"]))
    lines = [f"{quality_['originals_per_kind']} originals per kind, {quality_['copies']} altered copies; "
             f"share hashed as near-uniform: {quality_['near_uniform_share']}", "",
             "| distance | recall | false-pair rate | distinct images flagged | worst kind/alteration |",
             "|---:|---:|---:|---:|---|"]
    for limit, row in quality_["by_distance"].items():
        worst = min(row["recall_by"].items(), key=lambda item: item[1])
        share = f"{row['flagged_share']:.2%}" if "flagged_share" in row else "—"  # not measured before 2026-11-26
        lines.append(f"| {limit} | {row['recall']:.3f} | {row['false_pair_rate']:.4%} | {share} | {worst[0]} {worst[1]:.3f} |")
    lines += ["", f"At the default distance {chosen}:", "", "| kind | " + " | ".join(alterations) + " |",
              "|---|" + "---:|" * len(alterations)]
    for kind in kinds:
        recall = [f"{chosen_row['recall_by'][f'{kind}/{a}']:.3f}" for a in alterations]
        lines.append(f"| {kind} | " + " | ".join(recall) + " |")
    if "uncorroborated" in chosen_row:
        without = chosen_row["uncorroborated"]
        by_kind = ", ".join(f"{k} {v}" for k, v in without["flagged_by"].items())
        lines += ["", f"Without the centre hash (dct within the distance, or near-uniform tones): recall "
                      f"{without['recall']:.3f}, false-pair rate {without['false_pair_rate']:.4%}, distinct images "
                      f"flagged {without['flagged_share']:.2%} ({by_kind})"]
    lines += ["", "false pairs by kinds: " + ", ".join(f"{k} {v}" for k, v in chosen_row["false_pairs_by"].items())]
    if "flagged_by" in chosen_row:
        lines += ["", "distinct images flagged by kind: " + ", ".join(f"{k} {v}" for k, v in chosen_row["flagged_by"].items())]
    lines += ["",
              "| images | hashes searched | radius | search s | pairs found | planted found |",
              "|---:|---:|---:|---:|---:|---:|"]
    for row in result["search"]:
        lines.append(f"| {row['hashes']:,} | {row.get('values', row['hashes']):,} | {row['radius']} | {row['seconds']} | "
                     f"{row['pairs']:,} | "
                     f"{row['planted_found']}/{row['planted']} |")
    cost = result["hash_cost"]
    lines += ["", f"hash: {cost['hash_us']} µs per 224×224 RGB image; Pillow decode of the same image: "
              f"JPEG q90 {cost['decode_jpeg_us']} µs, PNG {cost['decode_png_us']} µs"]
    return "\n".join(lines)
