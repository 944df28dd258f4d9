"""Near-duplicate leakage: perceptual hashes and the Hamming search.

Images are generated here (testkit/near_duplicate_images.py: crops of scikit-learn's sample photos,
PIL drawings, gradients and flat colours). Recall and false-pair rates are measured by the
benchmark, not asserted here; these tests check the properties the report relies on. ExampleGen's
report of the pairs is in test_near_duplicate_report.py.
"""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from helpers_images import near_duplicate_originals
from shardflow.core import hamming_search
from shardflow.core.perceptual_hash import distance, image_hashes
from shardflow.core.tone_hash import is_structured, tone_distance
from shardflow.example_gen.config import DEFAULT_NEAR_DUPLICATE_DISTANCE
from testkit import image_alterations as altered
from testkit.near_duplicate_images import drawings

pytestmark = pytest.mark.unit  # in process, small generated data, no server: make test-fast runs it

LIMIT = DEFAULT_NEAR_DUPLICATE_DISTANCE
SIDE = 96


@pytest.fixture(scope="module")
def originals() -> dict[str, list[Image.Image]]:
    return near_duplicate_originals(SIDE)


def test_altered_copies_are_near(originals: dict[str, list[Image.Image]]) -> None:
    rng = np.random.default_rng(5)
    for kind, images in originals.items():
        for image in images[:6]:
            hashes = image_hashes(image)
            assert distance(hashes[0], image_hashes(image)[0]) == 0  # deterministic
            for alteration in ("jpeg", "resize", "brightness"):
                assert altered.is_near(hashes, image_hashes(altered.alter(image, alteration, rng)), LIMIT), (kind, alteration)
    # A mirrored drawing is not a copy to these hashes (no flip-invariance is claimed).
    drawing = originals["drawing"][0]
    assert not altered.is_near(image_hashes(drawing), image_hashes(drawing.transpose(Image.Transpose.FLIP_LEFT_RIGHT)), LIMIT)


def test_distinct_images_are_far_and_near_uniform_ones_do_not_collide(originals: dict[str, list[Image.Image]]) -> None:
    hashes = {kind: [image_hashes(image) for image in images] for kind, images in originals.items()}
    everything = hashes["photo"] + hashes["drawing"] + hashes["near_uniform"]
    assert not [(a, b) for i, a in enumerate(everything) for b in everything[i + 1:] if altered.is_near(a, b, LIMIT)]
    tones = [tone for *_, tone in hashes["near_uniform"]]
    assert not any(is_structured(tone) for tone in tones)  # gradients and flat colours pair by their tones
    # Not one distinct pair within the limit (the hash this one replaced put 1 pair in 6 of these within it).
    assert min(tone_distance(a, b, LIMIT) for i, a in enumerate(tones) for b in tones[i + 1:]) > LIMIT
    # Textured images' tones are flagged: their mean colour alone is no evidence of a copy.
    assert sum(not is_structured(tone) for *_, tone in hashes["photo"] + hashes["drawing"]) <= 1


def _near_uniform(side: int, start: tuple[int, ...], end: tuple[int, ...] | None = None,
                  angle: float = 0.0) -> Image.Image:
    """A flat colour (no `end`) or a linear gradient from `start` to `end` along `angle`, with noise σ 2
    (its own: the same noise in two images would give them the same dct bits)."""
    y, x = np.mgrid[0:side, 0:side] / (side - 1.0)
    ramp = np.cos(angle) * (x - 0.5) + np.sin(angle) * (y - 0.5)
    ramp = ((ramp - ramp.min()) / max(ramp.max() - ramp.min(), 1e-9))[..., None]
    pixels = np.array(start, float) * (1 - ramp) + np.array(end or start, float) * ramp
    pixels = pixels + np.random.default_rng([*start, *(end or start), round(angle * 100)]).normal(0, 2, pixels.shape)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def test_near_uniform_images_pair_with_their_copies_not_with_each_other() -> None:
    """Flat colours and gradients that a hash of mean luma and chroma confuses: two colours 15-25 % apart in
    brightness but not in proportion, a colour and its own 25 % brighter version, one mean colour as a flat
    image and as gradients (luma or chroma only, in three directions, and reversed). None is paired with
    another; each one's copies brightened or darkened by 10 %, re-encoded, resized and cropped still are."""
    rng = np.random.default_rng(8)
    dark, light = (100, 100, 100), (160, 160, 160)
    images = [_near_uniform(96, (81, 185, 184)), _near_uniform(96, (96, 211, 229)),
              _near_uniform(96, (120, 60, 160)), _near_uniform(96, (150, 75, 200)), _near_uniform(96, (130, 130, 130)),
              _near_uniform(96, dark, light), _near_uniform(96, dark, light, np.pi / 2), _near_uniform(96, light, dark),
              _near_uniform(96, dark, light, np.pi / 4), _near_uniform(96, (160, 110, 130), (100, 150, 130))]
    hashes = [image_hashes(image) for image in images]
    assert not any(is_structured(tone) for *_, tone in hashes)
    paired = [(i, j) for i in range(len(hashes)) for j in range(i + 1, len(hashes))
              if altered.is_near(hashes[i], hashes[j], LIMIT)]
    assert paired == []  # the tone hash this one replaced paired 12 of these 45
    for image, original in zip(images, hashes):
        copies = [altered.brightness(image, 0.9), altered.brightness(image, 1.1), altered.jpeg(image, 70),
                  altered.resize(image, 0.6), altered.crop(image, rng), altered.alter(image, "combined", rng)]
        assert all(altered.is_near(original, image_hashes(copy), LIMIT) for copy in copies)


def test_hashes_take_every_decoded_form() -> None:
    rgb = drawings(np.random.default_rng(2), 1, 48)[0]
    gray = rgb.convert("L")
    sixteen = np.asarray(gray).astype(np.uint16) * 257
    assert image_hashes(gray)[0] == image_hashes(Image.fromarray(sixteen))[0]
    assert distance(image_hashes(rgb)[0], image_hashes(np.repeat(sixteen[..., None], 3, axis=2))[0]) <= 2
    assert distance(image_hashes(rgb)[0], image_hashes(rgb.convert("RGBA"))[0]) == 0


def _brute_force(hashes: np.ndarray, radius: int) -> tuple[np.ndarray, ...]:
    first, second = np.triu_indices(len(hashes), 1)
    bits = hamming_search.popcount(hashes.view(np.uint64)[first] ^ hashes.view(np.uint64)[second])
    keep = bits <= radius
    return first[keep], second[keep], bits[keep]


def _planted(rng: np.random.Generator, count: int, radius: int) -> np.ndarray:
    hashes = rng.integers(-(1 << 63), (1 << 63) - 1, size=count, dtype=np.int64)
    for _ in range(count // 4):  # pairs at every distance up to two beyond the radius
        source, target = rng.integers(count, size=2)
        flips = rng.choice(64, size=int(rng.integers(0, radius + 3)), replace=False)
        mask = sum(1 << int(f) for f in flips)
        hashes[target] = (hashes[source:source + 1].view(np.uint64) ^ np.uint64(mask)).view(np.int64)[0]
    hashes[: count // 20] = hashes[0]  # a cluster of identical hashes
    return hashes


@pytest.mark.parametrize("radius", [0, 2, 5, 10, 12, 16])
def test_the_search_equals_brute_force(radius: int) -> None:
    hashes = _planted(np.random.default_rng(radius), 600, radius)
    *found, truncated = hamming_search.near_pairs(hashes, radius)
    expected = _brute_force(hashes, radius)
    assert not truncated and len(expected[0]) > 30
    for got, want in zip(found, expected):
        np.testing.assert_array_equal(got, want)


def test_the_search_is_the_same_in_small_batches_and_stops_at_its_pair_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    hashes = _planted(np.random.default_rng(1), 400, 10)
    expected = _brute_force(hashes, 10)
    monkeypatch.setattr(hamming_search, "BATCH", 5)
    *found, truncated = hamming_search.near_pairs(hashes, 10)
    assert not truncated and all(np.array_equal(g, w) for g, w in zip(found, expected))
    first, _, _, truncated = hamming_search.near_pairs(hashes, 10, max_pairs=50)
    assert truncated and len(first) == 50
