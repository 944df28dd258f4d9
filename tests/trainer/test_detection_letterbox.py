"""A letterboxed detector's served boxes (issue 65): `serving_image` letterboxes a photo of any size and aspect as
ExampleGen did and answers boxes normalised to the photo it was sent; `serving_default` answers in the stored
frame; class-aware non-maximum suppression drops a class's duplicates only, with an op old TF Serving has.

The served graph is the Trainer's own (export.serving_functions on a task resolved from a real ExampleGen
output); the model is a stand-in whose maps put one box exactly on the red pixels it is given, so where a box
comes back depends only on the serving graph's letterboxing and its undoing.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from shardflow.core.box_schema import MAX_DETECTIONS
from shardflow.core.letterbox import letterboxed_boxes
from shardflow.core.model_info import IMAGE_SIGNATURE, SERVING_SIGNATURE
from shardflow.demo_boxes import write_boxes
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen
from shardflow.trainer.config import InputOptions
from shardflow.trainer.detection_outputs import suppress_duplicates
from shardflow.trainer.export import serving_functions
from shardflow.trainer.features import RawToModel
from shardflow.trainer.task import resolve_task

STORED, STRIDE = 64, 4


class RedBox:
    """Detector maps (stride 4) with one peak, of class 0, at the red pixels' extent: its box is that extent."""

    def __call__(self, inputs: dict[str, tf.Tensor], training: bool = False) -> dict[str, tf.Tensor]:
        image = next(iter(inputs.values()))
        red = (image[..., 0] > 0.6) & (image[..., 1] < 0.35) & (image[..., 2] < 0.35)  # [B, H, W]
        rows, cols = tf.reduce_any(red, axis=2), tf.reduce_any(red, axis=1)
        edges = [self._edges(rows), self._edges(cols)]  # (first, one past the last) pixel, [B] each
        centre = [(low + high) / 2 / STRIDE for low, high in edges]  # in grid cells
        cell = [tf.cast(tf.floor(c), tf.int32) for c in centre]
        grid = STORED // STRIDE
        heatmap = 0.9 * tf.one_hot(cell[0] * grid + cell[1], grid * grid)[..., None]
        batch = tf.shape(image)[0]
        heatmap = tf.concat([tf.reshape(heatmap, [batch, grid, grid, 1]), tf.zeros([batch, grid, grid, 2])], -1)
        per_cell = lambda values: tf.tile(tf.stack(values, -1)[:, None, None, :], [1, grid, grid, 1])  # noqa: E731
        offset = per_cell([c - tf.floor(c) for c in centre])
        size = per_cell([(high - low) / STORED for low, high in edges])
        return {"heatmap": heatmap, "size": size, "offset": offset}

    @staticmethod
    def _edges(present: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        index = tf.range(tf.shape(present)[1], dtype=tf.float32)[None, :]
        low = tf.reduce_min(tf.where(present, index, 1e9), axis=1)
        return low, tf.reduce_max(tf.where(present, index + 1, -1e9), axis=1)


@pytest.fixture(scope="module")
def letterboxed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """demo_boxes' mixed photos (10: any size and aspect, gray, EXIF-turned) through ExampleGen at 64 x 64."""
    root = tmp_path_factory.mktemp("letterbox")
    write_boxes(root / "data", count=10, seed=2, mixed=True)
    indexes = tuple(IndexSpec(str(root / "data" / f"{s}.csv"), s) for s in ("train", "eval"))
    example_gen(ExampleGenConfig(indexes=indexes, data_root=str(root / "data"), output=str(root / "examples"),
                                 resize=(("*", (STORED, STORED)),), channels=(("*", "rgb"),),
                                 storage=(("*", "png"),), near_duplicates="off"), echo=lambda _: None)
    return root


@pytest.fixture(scope="module")
def signatures(letterboxed: Path) -> dict:
    task = resolve_task(InputOptions(examples=str(letterboxed / "examples")))
    to_model = RawToModel(task, None)
    assert to_model.letterbox  # ExampleGen's default for a box index
    return serving_functions(RedBox(), to_model, task)


def _photo(height: int, width: int, box: tuple[int, int, int, int], fmt: str = "JPEG", turn: int = 1) -> bytes:
    """A gray photo with a red square at pixel edges `box` (ymin, xmin, ymax, xmax), upright; stored turned
    with EXIF orientation `turn` (6: viewers turn it 90° clockwise back upright)."""
    pixels = np.full((height, width, 3), 140, np.uint8)
    pixels[box[0]:box[2], box[1]:box[3]] = (230, 20, 20)
    image, out = Image.fromarray(pixels), io.BytesIO()
    if turn == 1:
        image.save(out, fmt, quality=95)
    else:
        exif = Image.Exif()
        exif[0x0112] = turn
        image.transpose(Image.Transpose.ROTATE_90).save(out, fmt, quality=95, exif=exif.tobytes())
    return out.getvalue()


def _first_box(answer: dict) -> np.ndarray:
    assert int(answer["num_detections"][0]) == 1
    return answer["detection_boxes"][0, 0].numpy()


@pytest.mark.pipeline  # ExampleGen runs in process on 10 photos
@pytest.mark.parametrize("height, width, box", [(90, 150, (20, 100, 50, 130)), (180, 64, (120, 10, 150, 40)),
                                                 (200, 200, (0, 0, 40, 40))])
def test_a_photo_of_any_aspect_gets_its_box_back_on_itself(signatures: dict, height: int, width: int,
                                                           box: tuple[int, int, int, int]) -> None:
    expected = np.asarray(box, np.float64) / [height, width, height, width]
    served = _first_box(signatures[IMAGE_SIGNATURE](tf.constant([_photo(height, width, box)])))
    side = 1.5 / (STORED * min(height, width) / max(height, width))  # 1.5 pixels of the letterboxed content
    np.testing.assert_allclose(served, expected, atol=side)
    seen = letterboxed_boxes(expected, (height, width), (STORED, STORED))  # where the model found it
    assert height == width or np.abs(seen - expected).max() > 2 * side  # so an answer not moved back would fail


@pytest.mark.pipeline
def test_an_exif_turned_photo_answers_on_the_upright_photo(signatures: dict) -> None:
    box = (20, 100, 50, 130)
    upright = _first_box(signatures[IMAGE_SIGNATURE](tf.constant([_photo(90, 150, box)])))
    turned = _first_box(signatures[IMAGE_SIGNATURE](tf.constant([_photo(90, 150, box, turn=6)])))
    np.testing.assert_allclose(turned, upright, atol=0.02)
    np.testing.assert_allclose(turned, np.asarray(box) / [90, 150, 90, 150], atol=0.03)


@pytest.mark.pipeline
def test_the_stored_frame_is_answered_as_it_is(signatures: dict) -> None:
    """A file at the stored size (the Evaluator's examples) is not moved: its box is on its own frame."""
    box = (8, 30, 24, 46)
    png = _photo(STORED, STORED, box, fmt="PNG")
    by_file = _first_box(signatures[IMAGE_SIGNATURE](tf.constant([png])))
    np.testing.assert_allclose(by_file, np.asarray(box) / STORED, atol=1e-6)
    record = tf.train.Example(features=tf.train.Features(feature={
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[png]))})).SerializeToString()
    np.testing.assert_allclose(_first_box(signatures[SERVING_SIGNATURE](tf.constant([record]))), by_file, atol=1e-6)


# ---------------------------------------------------------------- duplicates suppressed


def _found(boxes: list, scores: list, classes: list, slots: int = 6) -> dict[str, tf.Tensor]:
    pad = slots - len(boxes)
    return {"detection_boxes": tf.constant([boxes + [[0.0] * 4] * pad], tf.float32),
            "detection_scores": tf.constant([scores + [0.0] * pad], tf.float32),
            "detection_classes": tf.constant([classes + [0.0] * pad], tf.float32),
            "num_detections": tf.constant([float(len(boxes))])}


@pytest.mark.unit
def test_suppression_drops_a_classes_duplicate_and_keeps_other_classes_and_places() -> None:
    a, shifted, far = [0.1, 0.1, 0.5, 0.5], [0.12, 0.12, 0.52, 0.52], [0.6, 0.6, 0.9, 0.9]  # IoU(a, shifted) 0.82
    found = _found([a, shifted, shifted, far, a], [0.9, 0.8, 0.7, 0.6, 0.5], [0.0, 0.0, 1.0, 0.0, 2.0])
    kept = {k: v.numpy()[0] for k, v in suppress_duplicates(found, 0.5).items()}
    assert kept["num_detections"] == 4
    np.testing.assert_allclose(kept["detection_scores"], [0.9, 0.7, 0.6, 0.5, 0.0, 0.0])  # in score order
    assert kept["detection_classes"].tolist() == [0.0, 1.0, 0.0, 2.0, 0.0, 0.0]
    np.testing.assert_allclose(kept["detection_boxes"][:4], [a, shifted, far, a])
    assert not kept["detection_boxes"][4:].any()
    loose = suppress_duplicates(found, 0.9)  # IoU 0.82 is not above 0.9: every box stays
    assert float(loose["num_detections"][0]) == 5
    assert suppress_duplicates(found, 0.0) is found


@pytest.mark.unit
def test_suppression_uses_an_op_old_tf_serving_has() -> None:
    found = _found([[0.1, 0.1, 0.5, 0.5]], [0.9], [0.0])
    graph = tf.function(lambda: suppress_duplicates(found, 0.5)).get_concrete_function().graph
    ops = {op.type for op in graph.get_operations()} | {
        node.op for function in graph.as_graph_def().library.function for node in function.node_def}
    assert "NonMaxSuppressionV3" in ops
    assert not ops & {"NonMaxSuppressionV5", "CombinedNonMaxSuppression", "NonMaxSuppressionV4"}


@pytest.mark.unit
def test_the_options_name_a_bad_value_and_the_flags_reach_the_configs() -> None:
    import argparse

    from shardflow.core.errors import ConfigError
    from shardflow.example_gen import cli as example_gen_cli
    from shardflow.trainer import cli as trainer_cli
    from shardflow.trainer.config import ExportOptions

    for bad in (1.0, -0.1, True, "0.5"):
        with pytest.raises(ConfigError, match="nms_iou"):
            ExportOptions(output="m", nms_iou=bad)
    with pytest.raises(ConfigError, match="box_resize"):
        ExampleGenConfig(indexes=(IndexSpec("a.csv"),), data_root="d", output="o", box_resize="crop")
    parser = argparse.ArgumentParser()
    trainer_cli.add_arguments(parser)
    train = trainer_cli.config_from_args(parser.parse_args(["--examples", "e", "--output", "m", "--epochs", "1",
                                                            "--nms-iou", "0"]), [])
    assert train.export.nms_iou == 0.0 and ExportOptions(output="m").nms_iou == 0.6
    parser = argparse.ArgumentParser()
    example_gen_cli.add_arguments(parser)
    args = ["--index", "a.csv", "--data-root", "d", "--output", "o"]
    assert example_gen_cli.config_from_args(parser.parse_args(args), []).box_resize == "letterbox"
    assert example_gen_cli.config_from_args(parser.parse_args([*args, "--box-resize", "stretch"]), []).box_resize \
        == "stretch"


class _FixedBoxes(tf.Module):
    """A detector answering one box, at 0.9, in the stored (letterboxed) frame of any example."""

    BOX = [0.3, 0.2, 0.6, 0.9]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
        count = tf.shape(examples)[0]
        one = lambda first, rest: tf.tile(tf.constant([first + [rest] * (MAX_DETECTIONS - 1)]), [count, 1])  # noqa
        boxes = tf.tile(tf.constant([[self.BOX] + [[0.0] * 4] * (MAX_DETECTIONS - 1)]), [count, 1, 1])
        return {"detection_boxes": boxes, "detection_scores": one([0.9], 0.0), "detection_classes": one([1.0], 0.0),
                "num_detections": tf.fill([count], 1.0)}


@pytest.mark.pipeline
def test_predict_on_new_photos_tells_each_box_on_its_own_photo(letterboxed: Path, tmp_path: Path) -> None:
    from PIL import ImageOps

    from shardflow.cli import main as shardflow_main
    from shardflow.core.box_schema import BOX_TARGET, DETECTION_TASK
    from shardflow.core.manifest import read_manifest
    from shardflow.core.model_info import ModelInfo, write_model_info

    module, model = _FixedBoxes(), tmp_path / "fixed"
    tf.saved_model.save(module, str(model), signatures={"serving_default": module.serve})
    manifest = read_manifest(letterboxed / "examples")
    names = sorted(manifest.extra["boxes"]["label_map"], key=manifest.extra["boxes"]["label_map"].get)
    write_model_info(model, ModelInfo(DETECTION_TASK, BOX_TARGET, len(names), names, None, {
        "input": "image", "raw_examples": str(letterboxed / "examples"),
        "ingest_ops": manifest.extra["ingest_ops"]}))
    files = sorted(p.relative_to(letterboxed / "data").as_posix() for p in (letterboxed / "data" / "img").glob("*"))
    index = tmp_path / "new.csv"
    index.write_text("image\n" + "".join(f"{name}\n" for name in files))
    assert shardflow_main(["predict", "--model", str(model), "--index", str(index), "--data-root",
                           str(letterboxed / "data"), "--output", str(tmp_path / "out")]) == 0
    lines = [json.loads(line) for part in sorted((tmp_path / "out" / "predictions").glob("part-*.jsonl"))
             for line in part.read_text().splitlines()]
    assert sorted(line["path"] for line in lines) == files
    for line in lines:
        width, height = ImageOps.exif_transpose(Image.open(letterboxed / "data" / line["path"])).size
        assert line["image_size"] == [height, width]
        top, left, inner_h, inner_w = _resize_with_pad_window((height, width))
        frame = np.asarray(_FixedBoxes.BOX) * STORED  # the stored frame's pixels, then the photo's
        expected = np.clip((frame - [top, left, top, left]) / [inner_h, inner_w, inner_h, inner_w], 0, 1)
        np.testing.assert_allclose(line["boxes"][0]["box"], expected, atol=1e-5, err_msg=line["path"])


def _resize_with_pad_window(source: tuple[int, int]) -> tuple[int, int, int, int]:
    """(top, left, height, width) of the pixels tf.image.resize_with_pad writes into STORED x STORED."""
    written = tf.image.resize_with_pad(tf.ones([*source, 1]), STORED, STORED, method="nearest").numpy()[..., 0] > 0
    rows, cols = np.nonzero(written.any(axis=1))[0], np.nonzero(written.any(axis=0))[0]
    return int(rows[0]), int(cols[0]), int(rows[-1] - rows[0] + 1), int(cols[-1] - cols[0] + 1)
