"""The served model takes the photo as the user has it: any size, any channel layout ingest accepts, EXIF-rotated.

The graph's pixels (`core.serving_image`) are compared with ExampleGen's Pillow pixels on the same
files, and a trained model answers original files through both signatures with the class it gives
the stored examples (what the Evaluator scores).
"""
from __future__ import annotations

import base64
import io
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from helpers_images import exif_with_orientation, write_csv
from shardflow.core.manifest import read_manifest
from shardflow.core.model_info import IMAGE_INPUT, IMAGE_SIGNATURE, SERVING_INPUT, SERVING_SIGNATURE
from shardflow.core.reader import shard_files
from shardflow.core.serving_image import canonical_pixels
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen
from shardflow.example_gen.images import ImageRules, decode
from shardflow.trainer import ExportOptions, FitOptions, InputOptions, TrainerConfig
from shardflow.trainer import run as train

MAX_PIXELS = 10_000_000


def _photo(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """Smooth colour gradients with noise: photo-like content whose resize is not trivial."""
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 / width, y * 255 / height, (x + y) * 127 / (width + height)], axis=-1)
    return np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)


def _encoded(pixels: np.ndarray, image_format: str, mode: str | None = None, **save: object) -> bytes:
    image = Image.fromarray(pixels)
    image = image.convert(mode) if mode else image
    out = io.BytesIO()
    image.save(out, image_format, **save)
    return out.getvalue()


def _graph(data: bytes, shape: tuple[int, int, int]) -> np.ndarray:
    return canonical_pixels(tf.constant(data), shape, exif=True).numpy()


@pytest.mark.parametrize("image_format,mode,channels", [
    ("JPEG", None, "rgb"), ("PNG", None, "rgb"), ("PNG", "RGBA", "rgb"), ("PNG", "L", "rgb"), ("PNG", "P", "rgb"),
    ("JPEG", None, "gray"), ("PNG", None, "gray")])
def test_graph_pixels_match_ingest(image_format: str, mode: str | None, channels: str) -> None:
    rng = np.random.default_rng(3)
    for height, width in ((90, 120), (37, 50), (24, 32)):
        data = _encoded(_photo(rng, height, width), image_format, mode, **({"quality": 90} if image_format == "JPEG" else {}))
        shape = (24, 32, 3 if channels == "rgb" else 1)
        ingest = decode(data, ImageRules(MAX_PIXELS, channels=channels, resize=shape[:2]))
        served = _graph(data, shape)
        error = np.abs(served.astype(np.int32) - ingest.astype(np.int32))
        if (height, width) == shape[:2]:
            assert error.max() == 0, (image_format, mode, channels)  # no resize: exactly ingest's pixels
        else:
            assert error.mean() < 1.5 and error.max() <= 24, (image_format, mode, channels, error.mean(), error.max())


@pytest.mark.parametrize("orientation", [2, 3, 4, 5, 6, 7, 8])
def test_exif_orientation_is_applied_as_ingest_applies_it(orientation: int) -> None:
    pixels = _photo(np.random.default_rng(orientation), 24, 40)
    data = _encoded(pixels, "JPEG", quality=95, exif=exif_with_orientation(orientation))
    upright = decode(data, ImageRules(MAX_PIXELS, channels="rgb"))
    shape = upright.shape
    served = _graph(data, shape)
    assert np.abs(served.astype(np.int32) - upright.astype(np.int32)).max() == 0
    assert _graph(_encoded(pixels, "JPEG", quality=95), (24, 40, 3)).shape == (24, 40, 3)  # no EXIF: as stored


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[bytes], list[int]]:
    """Red-ish vs blue-ish photos of 40-90 px, ingested as 32x32 RGB JPEGs; a LeNet trained briefly."""
    root = tmp_path_factory.mktemp("serving")
    rng = np.random.default_rng(0)
    rows, originals, labels = [], [], []
    for number in range(48):
        label = number % 2
        pixels = _photo(rng, int(rng.integers(40, 90)), int(rng.integers(40, 90)))
        pixels[..., 0 if label else 2] //= 4  # label 1: little red; label 0: little blue
        data = _encoded(pixels, "JPEG", quality=90)
        (root / f"{number}.jpg").write_bytes(data)
        rows.append((f"{number}.jpg", label, "train" if number < 40 else "eval"))
        originals.append(data)
        labels.append(label)
    for split in ("train", "eval"):
        write_csv(root / f"{split}.csv", ["image", "label"], [r[:2] for r in rows if r[2] == split])
    examples = root / "examples"
    example_gen(ExampleGenConfig(indexes=(IndexSpec(str(root / "train.csv"), "train"),
                                          IndexSpec(str(root / "eval.csv"), "eval")),
                                 data_root=str(root), output=str(examples), resize=(("*", (32, 32)),),
                                 channels=(("*", "rgb"),), storage=(("*", "jpeg"),)), echo=lambda _: None)
    train(TrainerConfig(input=InputOptions(examples=str(examples), batch_size=8, input_probe_batches=2),
                        fit=FitOptions(steps=40, learning_rate=3e-3), export=ExportOptions(output=str(root / "m"))),
          echo=lambda _: None)
    return root / "m" / "model", examples, originals[40:], labels[40:]


def _example(data: bytes) -> bytes:
    feature = {"image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[data]))}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def test_both_signatures_answer_original_files_with_the_class_of_the_stored_example(trained: tuple) -> None:
    model_dir, examples, originals, labels = trained
    served = tf.saved_model.load(str(model_dir))
    records = [r.numpy() for r in tf.data.TFRecordDataset(shard_files(examples, read_manifest(examples), "eval"))]
    stored = served.signatures[SERVING_SIGNATURE](**{SERVING_INPUT: tf.constant(records)})["class_ids"].numpy()
    assert (stored == np.array(labels)).mean() >= 0.75  # the model learned the colours
    as_files = served.signatures[IMAGE_SIGNATURE](**{IMAGE_INPUT: tf.constant(originals)})["class_ids"].numpy()
    in_examples = served.signatures[SERVING_SIGNATURE](
        **{SERVING_INPUT: tf.constant([_example(d) for d in originals])})["class_ids"].numpy()
    np.testing.assert_array_equal(as_files, stored)
    np.testing.assert_array_equal(in_examples, stored)


def test_serving_image_takes_b64_png_and_gray_files(trained: tuple) -> None:
    model_dir, _, originals, _ = trained
    served = tf.saved_model.load(str(model_dir)).signatures[IMAGE_SIGNATURE]
    pixels = np.asarray(Image.open(io.BytesIO(originals[0])))
    sent = base64.b64encode(_encoded(pixels, "PNG")).decode("ascii")  # what a REST client puts in {"b64": ...}
    png = served(**{IMAGE_INPUT: tf.constant([base64.b64decode(sent)])})
    jpeg = served(**{IMAGE_INPUT: tf.constant([originals[0]])})
    assert png["class_ids"].numpy()[0] == jpeg["class_ids"].numpy()[0]
    np.testing.assert_allclose(png["probabilities"].numpy(), jpeg["probabilities"].numpy(), atol=0.05)
    gray = served(**{IMAGE_INPUT: tf.constant([_encoded(pixels, "PNG", "L")])})
    assert gray["probabilities"].shape == (1, 2)


@pytest.mark.parametrize("image_format,mode,size,fits", [
    ("JPEG", None, (24, 32), True), ("JPEG", None, (25, 32), False), ("JPEG", "L", (24, 32), False),
    ("PNG", None, (24, 32), True), ("PNG", "RGBA", (24, 32), False), ("PNG", "P", (24, 32), False),
    ("PNG", None, (32, 24), False)])
def test_files_at_the_stored_layout_are_recognised_from_their_headers(image_format: str, mode: str | None,
                                                                      size: tuple[int, int], fits: bool) -> None:
    from shardflow.core.serving_image import at_stored_layout

    data = _encoded(_photo(np.random.default_rng(1), *size), image_format, mode)
    assert bool(at_stored_layout(tf.constant(data), (24, 32, 3), exif=True)) is fits
    rotated = _encoded(_photo(np.random.default_rng(1), 24, 32), "JPEG", exif=exif_with_orientation(3))
    assert not bool(at_stored_layout(tf.constant(rotated), (24, 32, 3), exif=True))
