"""Small real image files and CSV indexes for tests, written with PIL into a directory.

    rng = np.random.default_rng(0)
    write_png(root / "a.png", random_pixels(rng, (12, 10, 3)))
    write_csv(root / "train.csv", ["x", "y"], [["a.png", 3]])
"""
from __future__ import annotations

import csv
import io
import struct
import zlib
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
from PIL import Image

# A few distinct colours for palette masks; index i of the palette is class id i.
_PALETTE = [(0, 0, 0), (255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (0, 255, 255), (255, 0, 255)]


def random_pixels(rng: np.random.Generator, shape: Sequence[int], dtype: str = "uint8") -> np.ndarray:
    """Random pixels over the dtype's whole range (so byte order and bit depth errors show)."""
    high = np.iinfo(dtype).max
    return rng.integers(0, high, size=tuple(shape), dtype=dtype, endpoint=True)


def write_png(path: Path, pixels: np.ndarray) -> Path:
    """Writes HxW or HxWx1 (L, or I;16 for uint16) and HxWx3 (RGB) arrays as PNG."""
    path.parent.mkdir(parents=True, exist_ok=True)
    array = pixels[:, :, 0] if pixels.ndim == 3 and pixels.shape[2] == 1 else pixels
    if array.dtype not in (np.uint8, np.uint16):
        raise ValueError(f"write_png takes uint8 or uint16 pixels, got {array.dtype}")
    Image.fromarray(np.ascontiguousarray(array)).save(path, format="PNG")  # uint16 → mode I;16
    return path


def write_palette_mask(path: Path, class_ids: np.ndarray) -> Path:
    """Writes an HxW array of class ids (< len(_PALETTE)) as a palette ("P" mode) PNG."""
    if int(class_ids.max()) >= len(_PALETTE):
        raise ValueError(f"class ids must be < {len(_PALETTE)}, got {int(class_ids.max())}")
    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.fromarray(class_ids.astype(np.uint8))
    image.putpalette(  # turns the L image into a P image whose indices are the class ids
        [channel for colour in _PALETTE for channel in colour])
    image.save(path, format="PNG")
    return path


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> Path:
    """Writes an index CSV with a header row."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_label_pngs(root: Path, count: int, classes: int, seed: int) -> Path:
    """`count` random 12x10 gray PNGs labelled 0, 1, ... classes - 1 in turn, and their index `train.csv` (x, y)."""
    rng = np.random.default_rng(seed)
    rows = [[write_png(root / f"{i}.png", random_pixels(rng, (12, 10, 1))).name, str(i % classes)] for i in range(count)]
    return write_csv(root / "train.csv", ["x", "y"], rows)


def read_pixels(path: Path) -> np.ndarray:
    """The file's pixels as PIL gives them, always HxWxC (a channel axis added to 2-D images)."""
    with Image.open(path) as image:
        array = np.asarray(image)
    return array[:, :, None] if array.ndim == 2 else array


def png_bytes(pixels: np.ndarray) -> bytes:
    """The pixels as PNG file bytes (PIL's encoder)."""
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def corrupt_idat(data: bytes) -> bytes:
    """The PNG with every byte of its IDAT payload inverted (chunk length and CRC left as they were)."""
    at = data.index(b"IDAT")
    length = struct.unpack(">I", data[at - 4:at])[0]
    body = bytes(b ^ 0xFF for b in data[at + 4:at + 4 + length])
    return data[:at + 4] + body + data[at + 4 + length:]


def _filtered(raw: bytes, prior: bytes, kind: int, bpp: int) -> bytes:
    """One PNG scanline filtered with filter type `kind` (0 None, 1 Sub, 2 Up, 3 Average, 4 Paeth)."""
    out = bytearray()
    for i, value in enumerate(raw):
        left, up = raw[i - bpp] if i >= bpp else 0, prior[i]
        upper_left = prior[i - bpp] if i >= bpp else 0
        if kind == 4:
            estimate = left + up - upper_left
            near = min((abs(estimate - left), 0, left), (abs(estimate - up), 1, up),
                       (abs(estimate - upper_left), 2, upper_left))
            predictor = near[2]
        else:
            predictor = (0, left, up, (left + up) // 2)[kind]
        out.append((value - predictor) % 256)
    return bytes(out)


def png_file_bytes(samples: np.ndarray, bits: int, color_type: int, chunks: Sequence[tuple[bytes, bytes]] = ()) -> bytes:
    """PNG bytes written by hand, for what Pillow cannot write (1/2/4-bit gray, 16-bit colour).

    `samples` is HxWxC; rows cycle through all five filter types, so the decoder's unfiltering is
    exercised; `chunks` (type, body) go between IHDR and IDAT.
    """
    height, width, channels = samples.shape
    bpp = max(1, bits * channels // 8)
    rows, prior = [], bytes((width * channels * bits + 7) // 8)
    for y in range(height):
        if bits == 16:
            raw = samples[y].astype(">u2").tobytes()
        elif bits == 8:
            raw = samples[y].astype(np.uint8).tobytes()
        else:  # samples packed most significant bits first, each row padded to a whole byte
            packed = "".join(format(int(v), f"0{bits}b") for v in samples[y].ravel())
            raw = int(packed.ljust(len(prior) * 8, "0"), 2).to_bytes(len(prior), "big")
        kind = y % 5
        rows.append(bytes([kind]) + _filtered(raw, prior, kind, bpp))
        prior = raw
    return png_from_chunks(width, height, bits, color_type, [*chunks, (b"IDAT", zlib.compress(b"".join(rows)))])


def png_from_chunks(width: int, height: int, bits: int, color_type: int, chunks: Sequence[tuple[bytes, bytes]]) -> bytes:
    """PNG bytes: signature, IHDR, the given (type, body) chunks, IEND; lengths and CRCs computed."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, bits, color_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + b"".join(chunk(kind, body) for kind, body in chunks)
            + chunk(b"IEND", b""))


def exif_with_orientation(orientation: int) -> Image.Exif:
    """EXIF data holding only an orientation tag (6: the camera was turned 90 degrees clockwise)."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    return exif


def write_quadrant_set(root: Path, count: int, seed: int, prefix: str = "", shuffle_labels: bool = False) -> None:
    """`count` 8x8 gray PNGs whose bright quadrant is the class (i % 4), and `root/prefix/{train,eval}.csv`
    (columns x, y, site; 1 in 5 rows is eval; paths relative to `root`). Shuffled labels keep their
    distribution (so data validation passes) but carry no information."""
    rng = np.random.default_rng(seed)
    rows: dict[str, list] = {"train": [], "eval": []}
    for i in range(count):
        label = i % 4
        pixels = rng.integers(0, 60, size=(8, 8, 1)).astype(np.uint8)
        y, x = divmod(label, 2)
        pixels[y * 4:(y + 1) * 4, x * 4:(x + 1) * 4] += 180
        write_png(root / f"{prefix}img/{i}.png", pixels)
        rows["eval" if i % 5 == 0 else "train"].append([f"{prefix}img/{i}.png", label, f"site-{i % 3}"])
    for split, split_rows in rows.items():
        if shuffle_labels:
            labels = rng.permutation([row[1] for row in split_rows])
            split_rows = [[row[0], int(label), row[2]] for row, label in zip(split_rows, labels)]
        write_csv(root / f"{prefix}{split}.csv", ["x", "y", "site"], split_rows)


def near_duplicate_originals(side: int = 96) -> dict[str, list[Image.Image]]:
    """12 distinct images per kind (testkit/near_duplicate_images.py's generators, seeded): photo crops that
    overlap no other crop, drawings, and near-uniform images (gradients and flat colours)."""
    from testkit import near_duplicate_images as kinds

    rng = np.random.default_rng(11)
    photos, boxes = kinds.photos(rng, 60)
    distinct = [p for i, p in enumerate(photos) if all(kinds.box_overlap(boxes[i], boxes[j]) < 0.1 for j in range(i))]
    return {"photo": distinct[:12], "drawing": kinds.drawings(rng, 12, side), "near_uniform": kinds.near_uniform(rng, 12, side)}


def write_near_duplicate_set(root: Path) -> list[tuple[str, str]]:
    """root/train.csv: 10 files (photos, drawings, near-uniform, PNG and JPEG); root/eval.csv: 4 altered
    copies of train files (JPEG q70, resized 0.8×, 8 % brighter, cropped ≤ 4 %) and 4 distinct files.
    Returns the planted (train path, eval path) pairs, paths relative to `root`."""
    from testkit import image_alterations as altered

    originals = near_duplicate_originals()
    rng = np.random.default_rng(3)
    train_images = originals["photo"][:4] + originals["drawing"][:4] + originals["near_uniform"][:2]
    train = [_save(image, root / "train" / f"t{i}.{'jpg' if i % 2 else 'png'}") for i, image in enumerate(train_images)]
    copies = [(0, altered.jpeg(train_images[0], 70), "jpg"), (5, altered.resize(train_images[5], 0.8), "png"),
              (9, altered.brightness(train_images[9], 1.08), "png"), (2, altered.crop(train_images[2], rng, 0.04), "jpg")]
    planted = [(train[source], _save(copy, root / "eval" / f"copy{source}.{ext}")) for source, copy, ext in copies]
    others = [originals["photo"][6], originals["drawing"][6], originals["near_uniform"][4], originals["near_uniform"][5]]
    eval_paths = [e for _, e in planted] + [_save(image, root / "eval" / f"e{i}.png") for i, image in enumerate(others)]
    write_csv(root / "train.csv", ["image", "label"], [[p, i % 2] for i, p in enumerate(train)])
    write_csv(root / "eval.csv", ["image", "label"], [[p, i % 2] for i, p in enumerate(eval_paths)])
    return planted


def _save(image: Image.Image, path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    image.convert("RGB").save(path, quality=90) if path.suffix == ".jpg" else image.convert("RGB").save(path)
    return f"{path.parent.name}/{path.name}"
