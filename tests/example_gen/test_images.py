"""Unit tests of data-root containment, file checks, decoding, conversion and resizing."""
from __future__ import annotations

import io
import os
import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from helpers_images import write_png
from shardflow.example_gen.data_root import BadCell, DataRoot
from shardflow.example_gen.images import ImageRules, decode, encode

pytestmark = pytest.mark.unit  # in process, small generated data, no server: make test-fast runs it

# ---------------------------------------------------------------- images

@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """root/ with a.png, sub/b.png, in-root and out-of-root symlinks; root2/ and outside/ beside it."""
    for folder in ("root/sub", "root2", "outside"):
        (tmp_path / folder).mkdir(parents=True)
    for path in ("root/a.png", "root/sub/b.png", "root2/c.png", "outside/d.png"):
        write_png(tmp_path / path, np.zeros((2, 2), np.uint8))
    os.symlink(tmp_path / "root/a.png", tmp_path / "root/inside_link.png")
    os.symlink(tmp_path / "outside/d.png", tmp_path / "root/outside_link.png")
    os.symlink(tmp_path / "outside", tmp_path / "root/outside_dir")
    return tmp_path


@pytest.mark.parametrize("cell, inside", [
    ("a.png", True), ("sub/b.png", True), ("sub/../a.png", True), ("inside_link.png", True),
    ("../outside/d.png", False), ("../root2/c.png", False), ("sub/../../outside/d.png", False),
    ("outside_link.png", False), ("outside_dir/d.png", False), ("/etc/passwd", False)])
def test_data_root_containment(tree: Path, cell: str, inside: bool) -> None:
    root = DataRoot(str(tree / "root"))
    if inside:
        assert root.read(cell) == (tree / "root" / cell).read_bytes()
    else:
        with pytest.raises(BadCell) as err:
            root.read(cell)
        assert (err.value.code, err.value.reason) == ("path_escapes_root", f"path escapes the data root: {cell}")


def test_absolute_path_inside_the_root_is_fine(tree: Path) -> None:
    assert DataRoot(str(tree / "root")).read(str(tree / "root/sub/b.png")) == (tree / "root/sub/b.png").read_bytes()


def test_read_rejects_what_is_not_a_readable_regular_file(tree: Path) -> None:
    root_dir = tree / "root"
    (root_dir / "empty.png").write_bytes(b"")
    os.symlink(root_dir / "gone.png", root_dir / "dangling.png")
    os.symlink("loop2", root_dir / "loop1")
    os.symlink("loop1", root_dir / "loop2")
    os.mkfifo(root_dir / "pipe.png")
    cases = {"nope.png": "missing_file", "dangling.png": "missing_file", "sub": "is_directory",
             "empty.png": "empty_file", "loop1": "unreadable_file", "pipe.png": "unreadable_file"}
    if os.geteuid() != 0:  # root reads chmod 000 files anyway
        (root_dir / "locked.png").write_bytes(b"x")
        (root_dir / "locked.png").chmod(0)
        cases["locked.png"] = "unreadable_file"
    root = DataRoot(str(root_dir))
    got: dict[str, str] = {}

    def read_all() -> None:
        for cell in cases:
            try:
                root.read(cell)
            except BadCell as err:
                got[cell] = err.code

    reader = threading.Thread(target=read_all, daemon=True)  # a FIFO read could block forever
    reader.start()
    reader.join(timeout=20)
    assert not reader.is_alive(), "reading a named pipe blocked"
    assert got == cases


def _png_bytes(pixels: np.ndarray, mode: str | None = None) -> bytes:
    out = io.BytesIO()
    image = Image.fromarray(pixels)
    (image.convert(mode) if mode else image).save(out, format="PNG")
    return out.getvalue()


def test_decode_conversions() -> None:
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    gray = rng.integers(0, 256, (5, 7), dtype=np.uint8)
    wide = rng.integers(0, 65536, (5, 7), dtype=np.uint16)
    keep = ImageRules(max_pixels=1000)
    assert np.array_equal(decode(_png_bytes(rgb), keep), rgb)
    assert np.array_equal(decode(_png_bytes(gray), keep), gray[:, :, None])
    as_gray = decode(_png_bytes(rgb), ImageRules(1000, channels="gray"))
    assert as_gray.shape == (5, 7, 1) and np.array_equal(as_gray[:, :, 0], np.asarray(Image.fromarray(rgb).convert("L")))
    as_rgb = decode(_png_bytes(gray), ImageRules(1000, channels="rgb"))
    assert as_rgb.shape == (5, 7, 3) and all(np.array_equal(as_rgb[:, :, c], gray) for c in range(3))
    sixteen = decode(_png_bytes(wide), keep)
    assert sixteen.dtype == np.uint16 and np.array_equal(sixteen[:, :, 0], wide)
    assert encode(sixteen, "raw") == wide.astype("<u2").tobytes()
    assert decode(_png_bytes(rgb, "RGBA"), keep).shape == (5, 7, 4)
    assert decode(_png_bytes(gray, "LA"), keep).shape == (5, 7, 1)
    palette = _png_bytes(rgb, "P")
    assert decode(palette, keep).shape == (5, 7, 3), "a palette image becomes RGB"
    jpeg = io.BytesIO()
    Image.fromarray(gray).save(jpeg, format="JPEG")
    assert decode(jpeg.getvalue(), keep).shape == (5, 7, 1)
    for storage in ("raw", "png"):
        for pixels in (rgb, gray[:, :, None], sixteen):
            payload = encode(pixels, storage)
            back = np.frombuffer(payload, pixels.dtype).reshape(pixels.shape) if storage == "raw" else decode(payload, keep)
            assert np.array_equal(back, pixels)


def test_nearest_resize_keeps_mask_ids() -> None:
    ids = (np.indices((8, 8)).sum(axis=0) % 2 * 5).astype(np.uint8)  # checkerboard of ids 0 and 5
    data = _png_bytes(ids)
    for size in ((16, 16), (5, 3), (8, 12)):
        mask = decode(data, ImageRules(1000, resize=size, nearest=True))
        assert mask.shape == (*size, 1) and set(np.unique(mask)) <= {0, 5}
    doubled = decode(data, ImageRules(1000, resize=(16, 16), nearest=True))[:, :, 0]
    assert np.array_equal(doubled, ids.repeat(2, axis=0).repeat(2, axis=1))
    smooth = decode(data, ImageRules(1000, resize=(5, 3)))  # an image resize blends: not for masks
    assert set(np.unique(smooth)) - {0, 5}


def test_decode_rejects_bad_bytes_and_bombs() -> None:
    good = _png_bytes(np.zeros((16, 16), np.uint8))
    cases = [(b"GIF89a....", "not_an_image"), (b"hello", "not_an_image"), (good[:40], "corrupt_image"),
             (good, "too_many_pixels")]
    for data, code in cases:
        with pytest.raises(BadCell) as err:
            decode(data, ImageRules(max_pixels=255))
        assert err.value.code == code
    assert decode(good, ImageRules(max_pixels=256)).shape == (16, 16, 1)
