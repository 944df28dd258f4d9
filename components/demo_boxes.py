"""An object-detection demo set made offline: squares, discs and triangles (12-40 px, a colour each) on 96x96
crops of scikit-learn's two sample photographs, 0-5 objects an image, as JPEGs with a box index in the
Vertex AI / AutoML Vision CSV layout (box_index.py reads it).

    write_boxes(Path("demo_data/boxes"))
    # img/00000.jpg ...; train.csv and eval.csv, no header, no set column (the file names the split):
    # img/00000.jpg,disc,0.1041...,0.25,,,0.4166...,0.5625,,    one row per box, an image's rows adjacent
    # img/00003.jpg,,,,,,,,,                                    an image without objects

A box is the extent of the object's visible pixels on their outer edges (VOC and COCO annotate what is
seen): pixel columns 10..29 give x_min = 10/96, x_max = 30/96. Objects may overlap, but each keeps at least
half of its pixels visible and lies wholly inside the image. Colours are drawn far from the photograph
under the object (64+ levels per channel from its mean), so every object stands out of its background.

`mixed=True` (issue 65's set of any size and aspect, which the detection benchmarks reuse): each image has its
own size, 64-200 px a side and an aspect (width / height) log-uniform in [1/3, 3]; objects from 8 px to 40 % of
the short side; `GRAY_FRACTION` of the images are grayscale JPEGs (their objects a gray level far from the
luma under them) and `EXIF_FRACTION` are stored turned with an EXIF orientation (3, 6 or 8) that turns them
back upright. The CSV's boxes are normalised on the upright image, as viewers show it.

    write_boxes(Path("demo_data/boxes_mixed"), count=1125, mixed=True)
"""
from __future__ import annotations

import csv
import dataclasses
import functools
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

CLASSES = ("square", "disc", "triangle")
MIN_SIZE, MAX_SIZE = 12, 40
MAX_OBJECTS = 5
EMPTY_FRACTION = 0.15  # of images without objects, exactly (rounded), for any count
PLACEMENT_TRIES = 30  # an object that cannot be placed visibly after these is left out
JPEG_QUALITY = 90
MIXED_SIDES = (64, 200)  # mixed=True: each side's range in pixels
MIXED_ASPECT = 3.0  # width / height within [1/3, 3]
MIXED_MIN_OBJECT, MIXED_MAX_OBJECT = 8, 0.4  # pixels; fraction of the short side
GRAY_FRACTION = EXIF_FRACTION = 0.2
EXIF_ORIENTATIONS = (3, 6, 8)
_EXIF_ORIENTATION = 0x0112


@dataclass(frozen=True)
class Shape:
    """One drawn object: class, colour, the mask of its visible pixels (image-sized), its pixels when drawn."""

    label: str
    colour: tuple[int, int, int]
    visible: np.ndarray
    full: int

    def extent(self) -> tuple[int, int, int, int]:
        """Pixel edges (x_min, y_min, x_max, y_max) of the visible pixels; max is one past the last pixel."""
        rows, cols = np.any(self.visible, axis=1).nonzero()[0], np.any(self.visible, axis=0).nonzero()[0]
        return int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1


@dataclass(frozen=True)
class Scene:
    """An image before JPEG encoding, the photograph crop under it, and its objects in drawing order."""

    name: str
    background: np.ndarray
    image: np.ndarray
    shapes: tuple[Shape, ...]
    gray: bool = False  # saved as a grayscale JPEG
    orientation: int = 1  # the EXIF orientation it is saved with (its pixels turned so that viewers show `image`)


@functools.lru_cache(maxsize=None)
def shape_mask(label: str, size: int) -> np.ndarray:
    """A size x size mask of a class's shape: a full square, a disc, an upward triangle (pixel centres).
    Cached, so read only."""
    y, x = np.mgrid[:size, :size] + 0.5
    if label == "square":
        mask = np.ones((size, size), bool)
    elif label == "disc":
        mask = (x - size / 2) ** 2 + (y - size / 2) ** 2 <= (size / 2) ** 2
    else:
        mask = np.abs(x - size / 2) <= y / 2  # apex at the top centre, base on the bottom row
    mask.flags.writeable = False
    return mask


def _colour(rng: np.random.Generator, under: np.ndarray) -> tuple[int, int, int]:
    """Per channel: dark (0-63) over a bright mean, bright (192-255) over a dark one."""
    mean = under.reshape(-1, 3).mean(axis=0)
    low, high = rng.integers(0, 64, 3), rng.integers(192, 256, 3)
    return tuple(int(v) for v in np.where(mean > 127.5, low, high))  # type: ignore[return-value]


def _gray(rng: np.random.Generator, under: np.ndarray) -> tuple[int, int, int]:
    """A gray level 0-63 over a bright luma, 192-255 over a dark one: it stands out once the image is gray."""
    luma = float((under.reshape(-1, 3) @ np.array([0.299, 0.587, 0.114])).mean())
    level = int(rng.integers(0, 64) if luma > 127.5 else rng.integers(192, 256))
    return level, level, level


class _Canvas:
    """An image being drawn: which object owns each pixel, each object's full and visible pixel counts."""

    def __init__(self, background: np.ndarray) -> None:
        self.image = background.copy()
        self.owner = np.full(background.shape[:2], -1, np.int16)
        self.full: list[int] = []
        self.visible: list[int] = []

    def _lost(self, window: tuple[slice, slice], mask: np.ndarray) -> np.ndarray:
        """Pixels each earlier object would lose under `mask` at `window`."""
        covered = self.owner[window][mask]
        return np.bincount(covered[covered >= 0], minlength=len(self.visible))

    def place(self, rng: np.random.Generator, mask: np.ndarray) -> tuple[slice, slice] | None:
        """A window where `mask` leaves every earlier object at least half its full pixels, or None."""
        (height, width), side = self.owner.shape, mask.shape[0]
        for _ in range(PLACEMENT_TRIES):
            top, left = int(rng.integers(0, height - side + 1)), int(rng.integers(0, width - side + 1))
            window = (slice(top, top + side), slice(left, left + side))
            lost = self._lost(window, mask)
            if all(2 * (now - gone) >= whole for now, gone, whole in zip(self.visible, lost, self.full)):
                return window
        return None

    def draw(self, window: tuple[slice, slice], mask: np.ndarray, colour: tuple[int, int, int]) -> None:
        for i, gone in enumerate(self._lost(window, mask)):
            self.visible[i] -= int(gone)
        self.owner[window][mask] = len(self.full)
        self.image[window][mask] = colour
        self.full.append(int(mask.sum()))
        self.visible.append(self.full[-1])


def draw_scene(rng: np.random.Generator, photo: np.ndarray, objects: int, size: int | tuple[int, int], name: str,
               sides: tuple[int, int] = (MIN_SIZE, MAX_SIZE), gray: bool = False) -> Scene:
    """One image: a random crop of `photo` (`size` px square, or (height, width)) with up to `objects` shapes of
    `sides` px drawn on it (later ones on top); `gray`: their colours are gray levels far from the luma under them."""
    height, width = (size, size) if isinstance(size, int) else size
    top, left = rng.integers(0, photo.shape[0] - height + 1), rng.integers(0, photo.shape[1] - width + 1)
    background = photo[top:top + height, left:left + width].copy()
    canvas, drawn = _Canvas(background), []
    for _ in range(objects):
        label = CLASSES[int(rng.integers(len(CLASSES)))]
        mask = shape_mask(label, int(rng.integers(sides[0], min(sides[1], height, width) + 1)))
        window = canvas.place(rng, mask)
        if window is None:  # no room left that keeps the others half visible
            continue
        colour = _gray(rng, background[window][mask]) if gray else _colour(rng, background[window][mask])
        canvas.draw(window, mask, colour)
        drawn.append((label, colour))
    shapes = tuple(Shape(label, colour, canvas.owner == i, canvas.full[i]) for i, (label, colour) in enumerate(drawn))
    return Scene(name, background, canvas.image, shapes)


def scenes(count: int = 2000, size: int = 96, seed: int = 0, mixed: bool = False) -> Iterator[Scene]:
    """The images write_boxes writes, in order, upright and before JPEG encoding (tests compare boxes with
    masks); `mixed`: of any size and aspect, some gray, some turned (module docstring), `size` unused."""
    from sklearn.datasets import load_sample_images

    photos = load_sample_images().images
    rng = np.random.default_rng(seed)
    n_empty = round(count * EMPTY_FRACTION)
    objects = np.concatenate([np.zeros(n_empty, int), rng.integers(1, MAX_OBJECTS + 1, count - n_empty)])
    objects = rng.permutation(objects)
    for number in range(count):
        photo = photos[int(rng.integers(len(photos)))]
        name = f"img/{number:05d}.jpg"
        if not mixed:
            yield draw_scene(rng, photo, int(objects[number]), size, name)
            continue
        shape, gray = mixed_size(rng), bool(rng.random() < GRAY_FRACTION)
        turned = rng.random() < EXIF_FRACTION
        orientation = int(EXIF_ORIENTATIONS[int(rng.integers(len(EXIF_ORIENTATIONS)))]) if turned else 1
        sides = (MIXED_MIN_OBJECT, max(MIXED_MIN_OBJECT, int(MIXED_MAX_OBJECT * min(shape))))
        scene = draw_scene(rng, photo, int(objects[number]), shape, name, sides, gray)
        yield dataclasses.replace(scene, gray=gray, orientation=orientation)


def mixed_size(rng: np.random.Generator) -> tuple[int, int]:
    """(height, width): the aspect log-uniform within [1/MIXED_ASPECT, MIXED_ASPECT], then the height uniform
    where both sides stay within MIXED_SIDES.

    >>> sizes = [mixed_size(np.random.default_rng(s)) for s in range(200)]
    >>> all(64 <= h <= 200 and 64 <= w <= 200 and 1 / 3.05 <= w / h <= 3.05 for h, w in sizes)
    True
    """
    low, high = MIXED_SIDES
    aspect = float(np.exp(rng.uniform(-np.log(MIXED_ASPECT), np.log(MIXED_ASPECT))))
    height = rng.uniform(max(low, low / aspect), min(high, high / aspect))
    return int(round(height)), int(np.clip(round(height * aspect), low, high))


def saved_jpeg(scene: Scene) -> bytes:
    """The scene's JPEG file: gray or RGB, its pixels turned against its EXIF orientation (viewers turn them back)."""
    from PIL import Image

    image = Image.fromarray(scene.image)
    if scene.gray:
        image = image.convert("L")
    out = io.BytesIO()
    if scene.orientation == 1:
        image.save(out, format="JPEG", quality=JPEG_QUALITY)
        return out.getvalue()
    exif = Image.Exif()
    exif[_EXIF_ORIENTATION] = scene.orientation
    # the inverse of the turn ImageOps.exif_transpose makes for each orientation
    stored = {3: Image.Transpose.ROTATE_180, 6: Image.Transpose.ROTATE_90, 8: Image.Transpose.ROTATE_270}
    image.transpose(stored[scene.orientation]).save(out, format="JPEG", quality=JPEG_QUALITY, exif=exif.tobytes())
    return out.getvalue()


def box_rows(scene: Scene) -> list[list[str]]:
    """The scene's AutoML rows: path,label,x_min,y_min,,,x_max,y_max,, (normalised), or one empty-label row."""
    size = scene.image.shape[1], scene.image.shape[0]  # width divides x, height y
    rows = []
    for shape in scene.shapes:
        x0, y0, x1, y1 = shape.extent()
        x_min, y_min, x_max, y_max = (repr(v / size[i % 2]) for i, v in enumerate((x0, y0, x1, y1)))
        rows.append([scene.name, shape.label, x_min, y_min, "", "", x_max, y_max, "", ""])
    return rows or [[scene.name] + [""] * 9]


def write_boxes(out_dir: Path, count: int = 2000, size: int = 96, eval_fraction: float = 0.2,
                seed: int = 0, mixed: bool = False) -> tuple[Path, Path]:
    """`count` JPEGs under out_dir/img and their boxes in train.csv and eval.csv (a seeded `eval_fraction` in eval);
    `mixed`: images of any size and aspect (module docstring).

    Deterministic for a seed: same images, same CSV bytes."""
    out_dir = Path(out_dir)
    (out_dir / "img").mkdir(parents=True, exist_ok=True)
    in_eval = set(np.random.default_rng(seed + 1).permutation(count)[:int(count * eval_fraction)].tolist())
    rows: dict[str, list[list[str]]] = {"train": [], "eval": []}
    for number, scene in enumerate(scenes(count, size, seed, mixed)):
        (out_dir / scene.name).write_bytes(saved_jpeg(scene))
        rows["eval" if number in in_eval else "train"].extend(box_rows(scene))
    paths = []
    for split in ("train", "eval"):
        with open(out_dir / f"{split}.csv", "w", newline="") as out:
            csv.writer(out).writerows(rows[split])
        paths.append(out_dir / f"{split}.csv")
    return paths[0], paths[1]
