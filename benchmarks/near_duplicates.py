"""Near-duplicate detection measured: recall on altered copies, false pairs on distinct images, search and hash cost.

    python -m benchmarks.run_all --only near_duplicates                       # 300 originals per kind, 100k and 1M hashes
    python -m benchmarks.run_all --only near_duplicates --nd-originals 100 --nd-hashes 100k

Originals of three kinds: crops of scikit-learn's two sample photographs (96-300 px, pairs whose
crops overlap by more than 30 % IoU are not counted as distinct), drawings (random rectangles,
ellipses, lines and text on a random background, PIL.ImageDraw) and near-uniform images (linear
gradients between two random colours in a random direction, and flat colours; both with Gaussian
noise of σ 1-4). Flat colours are drawn at least 40 grey levels apart in some channel: closer flat
colours are, to any perceptual measure and to these hashes, within the ±10 % brightness alteration
of each other. Each original gets one copy per alteration: JPEG re-encode at quality 60-95, resize
0.5-1.5×, crop of up to 5 % per dimension, brightness ±3-10 %, and all four together.

A pair is "near" as ExampleGen decides it: dct hashes within the distance, or both images
near-uniform and their tone hashes within the same distance (`core.tone_hash.tone_distance`).
"""
from __future__ import annotations

import io
import time
from typing import Any, Callable

import numpy as np
from PIL import Image, ImageDraw, ImageEnhance

from shardflow.core.hamming_search import near_pairs, popcount
from shardflow.core.perceptual_hash import distance as hamming, image_hashes
from shardflow.core.tone_hash import tone_distance

KINDS = ("photo", "drawing", "near_uniform")
ALTERATIONS = ("jpeg", "resize", "crop", "brightness", "combined")
DISTANCES = (6, 8, 10, 12, 14)
SIDE = 224


def photos(rng: np.random.Generator, count: int) -> tuple[list[Image.Image], list[tuple[int, ...]]]:
    """Crops of the sample photographs and their boxes (photo number, left, top, right, bottom)."""
    from sklearn.datasets import load_sample_images

    sources = [Image.fromarray(a) for a in load_sample_images().images]
    images, boxes = [], []
    for _ in range(count):
        number = int(rng.integers(len(sources)))
        source = sources[number]
        width = int(rng.integers(96, 300))
        height = min(int(width * rng.uniform(0.75, 1.33)), source.height - 1)
        left, top = int(rng.integers(source.width - width)), int(rng.integers(source.height - height))
        images.append(source.crop((left, top, left + width, top + height)))
        boxes.append((number, left, top, left + width, top + height))
    return images, boxes


def _colour(rng: np.random.Generator) -> tuple[int, int, int]:
    return tuple(int(v) for v in rng.integers(0, 256, 3))  # type: ignore[return-value]


def drawings(rng: np.random.Generator, count: int, side: int = SIDE) -> list[Image.Image]:
    images = []
    for _ in range(count):
        image = Image.new("RGB", (side, side), _colour(rng))
        draw = ImageDraw.Draw(image)
        for _ in range(int(rng.integers(3, 9))):
            x0, y0 = (int(v) for v in rng.integers(0, side * 9 // 10, 2))
            x1, y1 = x0 + int(rng.integers(side // 20, side // 2)), y0 + int(rng.integers(side // 20, side // 2))
            shape = int(rng.integers(4))
            if shape == 0:
                draw.rectangle((x0, y0, x1, y1), fill=_colour(rng))
            elif shape == 1:
                draw.ellipse((x0, y0, x1, y1), fill=_colour(rng))
            elif shape == 2:
                draw.line((x0, y0, x1, y1), fill=_colour(rng), width=int(rng.integers(2, 10)))
            else:
                draw.text((x0, y0), "".join(chr(int(c)) for c in rng.integers(65, 91, 5)), fill=_colour(rng))
        images.append(image)
    return images


def near_uniform(rng: np.random.Generator, count: int, side: int = SIDE) -> list[Image.Image]:
    """Gradients (even numbers) and flat colours (odd), both with slight noise."""
    y, x = np.mgrid[0:side, 0:side] / (side - 1.0)
    images, flats = [], []
    for number in range(count):
        start = np.array(_colour(rng), dtype=float)
        if number % 2:
            while any(np.abs(start - flat).max() < 40 for flat in flats):
                start = np.array(_colour(rng), dtype=float)
            flats.append(start)
            pixels = np.broadcast_to(start, (side, side, 3)).astype(float)
        else:
            angle = rng.uniform(0, 2 * np.pi)
            ramp = np.cos(angle) * (x - 0.5) + np.sin(angle) * (y - 0.5)
            ramp = ((ramp - ramp.min()) / (ramp.max() - ramp.min()))[..., None]
            pixels = start * (1 - ramp) + np.array(_colour(rng), dtype=float) * ramp
        pixels = pixels + rng.normal(0, rng.uniform(1, 4), pixels.shape)
        images.append(Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)))
    return images


def jpeg(image: Image.Image, quality: int) -> Image.Image:
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, "JPEG", quality=quality)
    return Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")


def resize(image: Image.Image, scale: float) -> Image.Image:
    return image.resize((max(8, round(image.width * scale)), max(8, round(image.height * scale))),
                        Image.Resampling.BILINEAR)


def crop(image: Image.Image, rng: np.random.Generator, fraction: float = 0.05) -> Image.Image:
    """Up to `fraction` of each dimension cut, split at random between the two sides."""
    cut_x, cut_y = round(image.width * fraction * rng.uniform()), round(image.height * fraction * rng.uniform())
    left, top = int(rng.integers(cut_x + 1)), int(rng.integers(cut_y + 1))
    return image.crop((left, top, image.width - (cut_x - left), image.height - (cut_y - top)))


def brightness(image: Image.Image, factor: float) -> Image.Image:
    return ImageEnhance.Brightness(image).enhance(factor)


def _factor(rng: np.random.Generator) -> float:
    return float(rng.uniform(0.9, 0.97) if rng.random() < 0.5 else rng.uniform(1.03, 1.1))


def alter(image: Image.Image, alteration: str, rng: np.random.Generator) -> Image.Image:
    if alteration == "jpeg":
        return jpeg(image, int(rng.integers(60, 96)))
    if alteration == "resize":
        return resize(image, float(rng.uniform(0.5, 1.5)))
    if alteration == "crop":
        return crop(image, rng)
    if alteration == "brightness":
        return brightness(image, _factor(rng))
    if alteration == "combined":
        image = resize(crop(image, rng), float(rng.uniform(0.5, 1.5)))
        return jpeg(brightness(image, _factor(rng)), int(rng.integers(60, 96)))
    raise ValueError(f"unknown alteration {alteration!r}")


def is_near(a: tuple[int, int | None], b: tuple[int, int | None], limit: int) -> bool:
    """ExampleGen's rule (see the module docstring)."""
    if hamming(a[0], b[0]) <= limit:
        return True
    return a[1] is not None and b[1] is not None and tone_distance(a[1], b[1], limit) <= limit


def _overlap(a: tuple[int, ...], b: tuple[int, ...]) -> float:
    if a[0] != b[0]:
        return 0.0
    width, height = max(0, min(a[3], b[3]) - max(a[1], b[1])), max(0, min(a[4], b[4]) - max(a[2], b[2]))
    inter = width * height
    return inter / ((a[3] - a[1]) * (a[4] - a[2]) + (b[3] - b[1]) * (b[4] - b[2]) - inter)


def quality(originals: int, seed: int = 7) -> dict[str, Any]:
    """Recall per kind and alteration, and false pairs among distinct originals, at each distance."""
    rng = np.random.default_rng(seed)
    photo_images, boxes = photos(rng, originals)
    images = {"photo": photo_images, "drawing": drawings(rng, originals), "near_uniform": near_uniform(rng, originals)}
    hashes = {kind: [image_hashes(image) for image in ims] for kind, ims in images.items()}
    copies = {(kind, alteration): [image_hashes(alter(image, alteration, rng)) for image in ims]
              for kind, ims in images.items() for alteration in ALTERATIONS}
    everything = [(kind, h) for kind in KINDS for h in hashes[kind]]
    by_distance = {}
    for limit in DISTANCES:
        recall = {f"{kind}/{alteration}": float(np.mean([is_near(h, c, limit) for h, c in zip(hashes[kind], found)]))
                  for (kind, alteration), found in copies.items()}
        false, pairs, flagged = {}, {}, set()
        for i in range(len(everything)):
            for j in range(i + 1, len(everything)):
                if i < originals and j < originals and _overlap(boxes[i], boxes[j]) > 0.3:
                    continue  # overlapping crops of one photo: not distinct
                key = "/".join(sorted((everything[i][0], everything[j][0])))
                pairs[key] = pairs.get(key, 0) + 1
                near = is_near(everything[i][1], everything[j][1], limit)
                false[key] = false.get(key, 0) + int(near)
                flagged |= {i, j} if near else set()
        by_distance[str(limit)] = {
            "recall": float(np.mean(list(recall.values()))), "recall_by": recall,
            "false_pair_rate": sum(false.values()) / max(1, sum(pairs.values())),
            "false_pairs_by": {key: f"{false[key]}/{pairs[key]}" for key in sorted(pairs)},
            # distinct images in at least one false pair: what a user would wrongly drop
            "flagged_share": len(flagged) / len(everything),
            "flagged_by": {kind: f"{sum(everything[i][0] == kind for i in flagged)}/{originals}" for kind in KINDS},
        }
    return {"originals_per_kind": originals, "copies": originals * len(KINDS) * len(ALTERATIONS),
            "near_uniform_share": {kind: float(np.mean([h[1] is not None for h in hashes[kind]])) for kind in KINDS},
            "by_distance": by_distance}


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
    """Seconds to find every pair within `radius` among `count` random hashes holding `planted` near pairs."""
    rng = np.random.default_rng(seed)
    hashes = rng.integers(-(1 << 63), (1 << 63) - 1, size=count, dtype=np.int64)
    sources, targets = rng.choice(count, size=(2, planted), replace=False)
    for source, target in zip(sources, targets):
        flips = rng.choice(64, size=int(rng.integers(0, radius + 1)), replace=False)
        hashes[target] = hashes[source] ^ np.int64(sum(1 << int(f) for f in flips) - (1 << 64 if 63 in flips else 0))
    started = time.perf_counter()
    first, second, bits, truncated = near_pairs(hashes, radius)
    seconds = time.perf_counter() - started
    found = set(zip(first.tolist(), second.tolist()))
    planted_found = sum((min(s, t), max(s, t)) in found for s, t in zip(sources.tolist(), targets.tolist()))
    assert np.all(popcount((hashes[first] ^ hashes[second]).view(np.uint64)) == bits)
    return {"hashes": count, "radius": radius, "seconds": round(seconds, 2), "pairs": len(found),
            "planted": planted, "planted_found": planted_found, "truncated": truncated}


def measure(originals: int, hash_counts: list[int], radius: int) -> dict[str, Any]:
    return {"quality": quality(originals), "hash_cost": hash_cost(),
            "search": [search_cost(count, radius) for count in hash_counts]}


def markdown(result: dict[str, Any], chosen: int) -> str:
    quality_ = result["quality"]
    lines = [f"{quality_['originals_per_kind']} originals per kind, {quality_['copies']} altered copies; "
             f"share hashed as near-uniform: {quality_['near_uniform_share']}", "",
             "| distance | recall | false-pair rate | distinct images flagged | worst kind/alteration |",
             "|---:|---:|---:|---:|---|"]
    for limit, row in quality_["by_distance"].items():
        worst = min(row["recall_by"].items(), key=lambda item: item[1])
        share = f"{row['flagged_share']:.2%}" if "flagged_share" in row else "—"  # not measured before 2026-11-26
        lines.append(f"| {limit} | {row['recall']:.3f} | {row['false_pair_rate']:.4%} | {share} | {worst[0]} {worst[1]:.3f} |")
    chosen_row = quality_["by_distance"][str(chosen)]
    lines += ["", f"At the default distance {chosen}:", "", "| kind | " + " | ".join(ALTERATIONS) + " |",
              "|---|" + "---:|" * len(ALTERATIONS)]
    for kind in KINDS:
        lines.append(f"| {kind} | " + " | ".join(f"{chosen_row['recall_by'][f'{kind}/{a}']:.3f}" for a in ALTERATIONS) + " |")
    lines += ["", "false pairs by kinds: " + ", ".join(f"{k} {v}" for k, v in chosen_row["false_pairs_by"].items())]
    if "flagged_by" in chosen_row:
        lines += ["", "distinct images flagged by kind: " + ", ".join(f"{k} {v}" for k, v in chosen_row["flagged_by"].items())]
    lines += ["",
              "| hashes | radius | search s | pairs found | planted found |", "|---:|---:|---:|---:|---:|"]
    for row in result["search"]:
        lines.append(f"| {row['hashes']:,} | {row['radius']} | {row['seconds']} | {row['pairs']:,} | "
                     f"{row['planted_found']}/{row['planted']} |")
    cost = result["hash_cost"]
    lines += ["", f"hash: {cost['hash_us']} µs per 224×224 RGB image; Pillow decode of the same image: "
              f"JPEG q90 {cost['decode_jpeg_us']} µs, PNG {cost['decode_png_us']} µs"]
    return "\n".join(lines)
