"""Issue 46: cropped copies of drawings on gradients and of small photo tiles, whose dct hashes drift past the
distance, are found through the centre hash (of the central frame) where their tones corroborate it; recoloured
copies and distinct images are not.

Images come from testkit/near_duplicate_images.py (seeded), hashed as ExampleGen hashes them after
issue 46's `--resize 128x128 --channels rgb`: decoded, RGB, bilinear to 128×128.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from helpers_images import write_csv
from shardflow.core.perceptual_hash import _centre_bits, distance, image_hashes, near_kind, near_kinds
from shardflow.core.tone_hash import STRUCTURED, is_structured, tone_distance
from shardflow.example_gen import ExampleGenConfig, IndexSpec, run
from shardflow.example_gen.config import DEFAULT_NEAR_DUPLICATE_DISTANCE
from shardflow.example_gen.near_duplicates import PAIRS_FILE
from testkit import near_duplicate_images as images

pytestmark = pytest.mark.unit  # in process, small generated data, no server: make test-fast runs it

LIMIT = DEFAULT_NEAR_DUPLICATE_DISTANCE
SIDE = 128  # issue 46's --resize


def _ingested(data: bytes | Image.Image) -> Image.Image:
    image = Image.open(io.BytesIO(data)) if isinstance(data, bytes) else data
    return image.convert("RGB").resize((SIDE, SIDE), Image.Resampling.BILINEAR)


def _hashes(data: bytes | Image.Image) -> tuple[int, int, int]:
    return image_hashes(_ingested(data))


def _recoloured(data: bytes) -> bytes:
    """The same luma, its chroma mirrored (Cb, Cr → 255 − Cb, 255 − Cr): other colours, the same dct input."""
    y, cb, cr = Image.open(io.BytesIO(data)).convert("YCbCr").split()
    image = Image.merge("YCbCr", (y, cb.point(lambda v: 255 - v), cr.point(lambda v: 255 - v))).convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=95)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def issue_pairs() -> list[tuple[Image.Image, bytes]]:
    """30 photo tiles and 30 drawings on gradients, each with issue 46's altered copy (JPEG bytes)."""
    rng = np.random.default_rng(1)
    tiles, _ = images.photo_tiles(rng, 30)
    return [(original, images.sides_jpeg(original, rng)) for original in tiles + images.drawings_on_gradient(rng, 30)]


def _framed(a: tuple[int, int, int], b: tuple[int, int, int]) -> int:
    """The fewest bits between two images' hashes of which one at least is a centre hash."""
    return int(_centre_bits(tuple(np.array([v]) for v in a), tuple(np.array([v]) for v in b))[0])


def test_cropped_copies_the_dct_hash_misses_are_found_by_their_centre_hashes(issue_pairs: list[tuple[Image.Image, bytes]]
                                                                     ) -> None:
    hashed = [(_hashes(original), _hashes(copy)) for original, copy in issue_pairs]
    before = [near_kind(a, b, LIMIT, centre=False) for a, b in hashed]  # the rule before issue 46
    after = [near_kind(a, b, LIMIT) for a, b in hashed]
    assert sum(k is not None for k in before) <= 0.85 * len(hashed)  # measured 49 of 60 (issue 46: 92 of 100)
    assert sum(k is not None for k in after) >= 0.93 * len(hashed)  # measured 57 of 60
    added = [(a, b) for (a, b), old, new in zip(hashed, before, after) if old is None and new is not None]
    assert len(added) >= 5 and all(near_kind(a, b, LIMIT) == "centre" for a, b in added)
    assert all(distance(a[0], b[0]) > LIMIT >= _framed(a, b) for a, b in added)  # dct alone: too far
    assert all(is_structured(a[2]) and tone_distance(a[2], b[2], LIMIT) <= LIMIT for a, b in added)


def test_the_tones_decide_in_the_band(issue_pairs: list[tuple[Image.Image, bytes]]) -> None:
    """A copy found by its centre hash, recoloured (its luma kept), is no longer a copy where its hashes stay
    where they were: dct too far, a centre hash within the distance."""
    corroborated = [(o, c) for o, c in issue_pairs if near_kind(_hashes(o), _hashes(c), LIMIT) == "centre"]
    recoloured = [(_hashes(original), _hashes(_recoloured(copy))) for original, copy in corroborated]
    in_band = [(a, b) for a, b in recoloured if distance(a[0], b[0]) > LIMIT >= _framed(a, b)]
    assert len(in_band) >= 3 and all(near_kind(a, b, LIMIT) is None for a, b in in_band)


def test_the_centre_hash_pairs_no_distinct_images() -> None:
    """60 distinct originals of each of the benchmark's five kinds: the centre hash adds no pair (no distinct
    pair's centre hash comes within the distance: their tones are not even asked)."""
    originals, boxes = images.originals_of(np.random.default_rng(5), 60)
    hashed = [_hashes(image) for kind_images in originals.values() for image in kind_images]
    every = [np.array([h[n] for h in hashed], dtype=np.int64) for n in range(3)]
    first, second = images.distinct_pairs(boxes)
    pairs = tuple(v[first] for v in every), tuple(v[second] for v in every)
    np.testing.assert_array_equal(near_kinds(*pairs, LIMIT) >= 0, near_kinds(*pairs, LIMIT, centre=False) >= 0)


def test_tones_are_flagged_by_structure() -> None:
    flat, drawing = image_hashes(Image.new("RGB", (64, 64), (30, 200, 40))), _hashes(images.drawings_on_gradient(
        np.random.default_rng(0), 1)[0])
    assert not is_structured(flat[2]) and is_structured(drawing[2])
    assert tone_distance(flat[2] | STRUCTURED, flat[2]) == 0  # the flag is not part of the tone


def test_example_gen_lists_centre_copies_and_not_recoloured_ones(issue_pairs: list[tuple[Image.Image, bytes]],
                                                                        tmp_path: Path) -> None:
    """Issue 46's command on the 60 originals, their copies and the corroborated copies recoloured: the list is
    the rule's (`near_kinds` over every eval × train pair of the same files), with each pair's kind."""
    train, evals = [], []
    for i, (original, copy) in enumerate(issue_pairs):
        train.append(f"train/{i}.png")
        evals.append((f"eval/{i}.jpg", copy))
        if near_kind(_hashes(original), _hashes(copy), LIMIT) == "centre":
            evals.append((f"eval/{i}_recoloured.jpg", _recoloured(copy)))
        (tmp_path / "train").mkdir(exist_ok=True)
        original.save(tmp_path / train[-1])
    (tmp_path / "eval").mkdir(exist_ok=True)
    for name, data in evals:
        (tmp_path / name).write_bytes(data)
    indexes = tuple(IndexSpec(str(write_csv(tmp_path / f"{split}.csv", ["image", "label"], [[p, 0] for p in names])),
                              split) for split, names in (("train", train), ("eval", [name for name, _ in evals])))
    run(ExampleGenConfig(indexes=indexes, data_root=str(tmp_path), output=str(tmp_path / "out"),
                                    resize=(("*", (SIDE, SIDE)),), channels=(("*", "rgb"),),
                                    beam_args=("--direct_running_mode=in_memory",)), echo=lambda _: None)
    listed = {(pair["occurrences"][0]["path"], pair["occurrences"][1]["path"]): pair["hash"]
              for pair in map(json.loads, (tmp_path / "out" / PAIRS_FILE).read_text().splitlines())}
    hashed = {name: _hashes((tmp_path / name).read_bytes()) for name in train + [name for name, _ in evals]}
    left, right = np.repeat([name for name, _ in evals], len(train)), np.tile(train, len(evals))
    arrays = [tuple(np.array([hashed[name][n] for name in names], dtype=np.int64) for n in range(3))
              for names in (left, right)]
    kinds = near_kinds(arrays[0], arrays[1], LIMIT)
    assert listed == {(e, t): ("dct", "tone", "centre")[k] for e, t, k in zip(left, right, kinds) if k >= 0}
    assert sum(kind == "centre" for kind in listed.values()) >= 5
    originals = {e: f"train/{e[5:].split('_')[0]}.png" for e, _ in evals}
    in_band = [(e, originals[e]) for e, _ in evals if "recoloured" in e
               and distance(hashed[e][0], hashed[originals[e]][0]) > LIMIT >= _framed(hashed[e], hashed[originals[e]])]
    assert len(in_band) >= 3 and not set(in_band) & set(listed)  # recoloured: their tones veto them
