"""The offline detection demo set (components/demo_boxes.py): its CSVs read by the project's box index reader
without a reject, each box the exact pixel extent of its object's visible pixels (checked on the masks
before JPEG encoding, and on the decoded JPEGs), the share of images without objects, determinism.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from shardflow.demo_boxes import (CLASSES, MAX_OBJECTS, MAX_SIZE, MIN_SIZE, Scene, Shape, box_rows, scenes, shape_mask,
                                  write_boxes)
from shardflow.example_gen.box_index import read_box_csv

pytestmark = pytest.mark.unit  # in process, a few dozen 96-px images

COUNT, SIZE, SEED = 80, 96, 3


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("boxes")
    write_boxes(out, count=COUNT, size=SIZE, seed=SEED)
    return out


def _rows(path: Path) -> list[list[str]]:
    with open(path, newline="") as stream:
        return list(csv.reader(stream))


def _extent(mask: np.ndarray) -> tuple[int, int, int, int]:
    """Outer pixel edges (x_min, y_min, x_max, y_max) of a mask, computed here independently."""
    ys, xs = np.nonzero(mask)
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def test_csvs_parse_with_zero_rejects_and_reconciled_counts(written: Path) -> None:
    images, box_rows = set(), 0
    for split in ("train", "eval"):
        path = written / f"{split}.csv"
        lines = _rows(path)
        assert all(len(cells) == 10 for cells in lines)  # AutoML layout without the set column
        index = read_box_csv(str(path))
        counts = index.counts()
        assert index.rejects == () and index.reconciled and index.units == "normalized"
        assert counts["rows"] == len(lines) == counts["box_rows"] + counts["negative_rows"]
        assert set(index.labels) <= set(CLASSES)
        assert all(len(image.boxes) <= MAX_OBJECTS for image in index.images)
        images |= {image.path for image in index.images}
        box_rows += counts["box_rows"]
        seen = [cells[0] for cells in lines]  # an image's rows are adjacent
        assert len(set(seen)) == sum(1 for i, p in enumerate(seen) if i == 0 or seen[i - 1] != p)
    assert images == {f"img/{n:05d}.jpg" for n in range(COUNT)}
    assert all((written / name).is_file() for name in images)
    assert len(read_box_csv(str(written / "eval.csv")).images) == int(COUNT * 0.2)
    assert box_rows == sum(len(scene.shapes) for scene in scenes(COUNT, SIZE, SEED))


def test_each_scene_is_drawn_as_its_masks_say() -> None:
    """Before JPEG: each object's visible pixels hold its colour, other pixels the photograph; at least half
    of each object is visible; sizes in 12-40 px."""
    for scene in scenes(COUNT, SIZE, SEED):
        covered = np.zeros((SIZE, SIZE), int)
        for shape in scene.shapes:
            assert shape.label in CLASSES and shape.visible.any()
            assert (scene.image[shape.visible] == shape.colour).all()
            assert 2 * int(shape.visible.sum()) >= shape.full
            assert any(int(shape_mask(shape.label, s).sum()) == shape.full for s in range(MIN_SIZE, MAX_SIZE + 1))
            covered += shape.visible
        assert covered.max(initial=0) <= 1  # each pixel belongs to at most one object
        assert (scene.image[covered == 0] == scene.background[covered == 0]).all()


def test_every_box_is_the_extent_of_its_objects_pixels(written: Path) -> None:
    rows = {}
    for split in ("train", "eval"):
        for cells in _rows(written / f"{split}.csv"):
            rows.setdefault(cells[0], []).append(cells)
    for scene in scenes(COUNT, SIZE, SEED):
        lines = rows[scene.name]
        if not scene.shapes:
            assert lines == [[scene.name] + [""] * 9]
            continue
        assert [cells[1] for cells in lines] == [shape.label for shape in scene.shapes]
        decoded = np.asarray(Image.open(written / scene.name).convert("RGB"), np.float64)
        for cells, shape in zip(lines, scene.shapes):
            x_min, y_min, x_max, y_max = (float(cells[i]) for i in (2, 3, 6, 7))
            assert cells[4:6] == cells[8:10] == ["", ""]
            assert (x_min, y_min, x_max, y_max) == tuple(v / SIZE for v in _extent(shape.visible))
            # the JPEG shows the object inside its box: its pixels far from the photograph's on average
            difference = np.abs(decoded[shape.visible] - scene.background[shape.visible]).mean()
            assert difference > 40, (scene.name, shape.label, difference)
        outside = np.ones((SIZE, SIZE), bool)
        for shape in scene.shapes:
            x0, y0, x1, y1 = _extent(shape.visible)
            outside[y0:y1, x0:x1] = False
        if outside.any():  # away from the boxes the JPEG is the photograph, up to compression (at most 7.7 in
            assert np.abs(decoded[outside] - scene.background[outside]).mean() < 15  # 2,000 images, seed 0)


def test_extent_counts_outer_pixel_edges() -> None:
    mask = np.zeros((SIZE, SIZE), bool)
    mask[5:9, 10:30] = True  # columns 10..29, rows 5..8
    scene = next(scenes(1, SIZE, SEED))
    one = Scene("a.jpg", scene.background, scene.image, (Shape("square", (0, 0, 0), mask, 80),))
    assert box_rows(one) == [["a.jpg", "square", repr(10 / 96), repr(5 / 96), "", "", repr(30 / 96),
                              repr(9 / 96), "", ""]]


def test_images_without_objects_are_between_5_and_30_percent() -> None:
    for count, seed in ((COUNT, SEED), (40, 0), (200, 1)):
        objects = [len(scene.shapes) for scene in scenes(count, SIZE, seed)]
        assert 0.05 <= objects.count(0) / count <= 0.30
        assert max(objects) <= MAX_OBJECTS and sum(n >= 3 for n in objects) > count / 4


def test_same_seed_same_bytes_other_seed_other_data(tmp_path: Path) -> None:
    first = write_boxes(tmp_path / "a", count=30, seed=7)
    second = write_boxes(tmp_path / "b", count=30, seed=7)
    other = write_boxes(tmp_path / "c", count=30, seed=8)
    for mine, again, changed in zip(first, second, other):
        assert mine.read_bytes() == again.read_bytes() != changed.read_bytes()
    names = sorted(p.name for p in (tmp_path / "a" / "img").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b" / "img").iterdir())
    assert all((tmp_path / "a/img" / n).read_bytes() == (tmp_path / "b/img" / n).read_bytes() for n in names)


# ---------------------------------------------------------------- mixed=True: any size and aspect (issue 65)


def test_the_mixed_set_has_every_size_aspect_gray_and_turned_image_it_promises(tmp_path: Path) -> None:
    from PIL import ImageOps

    train, evaluation = write_boxes(tmp_path, count=60, seed=SEED, mixed=True)
    written = {row[0] for path in (train, evaluation) for row in _rows(path)}
    drawn = list(scenes(60, seed=SEED, mixed=True))
    assert written == {scene.name for scene in drawn}
    sizes = [scene.image.shape[:2] for scene in drawn]
    assert all(64 <= side <= 200 for size in sizes for side in size)
    aspects = [w / h for h, w in sizes]
    assert min(aspects) < 0.6 and max(aspects) > 1.8  # both ways, not squares
    assert any(scene.gray for scene in drawn) and any(scene.orientation != 1 for scene in drawn)
    sides = [max(_extent(shape.visible)[2] - _extent(shape.visible)[0], _extent(shape.visible)[3]
                 - _extent(shape.visible)[1]) for scene in drawn for shape in scene.shapes]
    assert min(sides) < 12 and max(sides) >= 40
    for scene in drawn:  # the file viewed upright (EXIF applied) is the scene: same size, its objects where drawn
        viewed = ImageOps.exif_transpose(Image.open(tmp_path / scene.name))
        assert viewed.mode == ("L" if scene.gray else "RGB") and viewed.size == (scene.image.shape[1], scene.image.shape[0])
        pixels = np.asarray(viewed.convert("RGB"), np.int16)
        for shape in scene.shapes:
            own = shape.visible & ~_edge(shape.visible)  # inner pixels: JPEG blurs the edges
            if own.any():  # a gray scene's colours are gray levels: (v, v, v)
                assert np.abs(pixels[own].mean(axis=0) - np.asarray(shape.colour)).max() < 40, scene.name
    rows = [row for row in _rows(train) if row[1]]
    index = read_box_csv(str(train))
    assert index.rejects == () and sum(len(image.boxes) for image in index.images) == len(rows)


def _edge(mask: np.ndarray) -> np.ndarray:
    """Pixels of `mask` with a 4-neighbour outside it."""
    padded = np.pad(mask, 1)
    inner = padded[:-2, 1:-1] & padded[2:, 1:-1] & padded[1:-1, :-2] & padded[1:-1, 2:]
    return mask & ~inner
