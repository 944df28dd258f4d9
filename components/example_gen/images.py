"""Reading one image file safely: path containment, format and size checks, decode, convert, resize.

Every failure raises `BadCell` with a short `code` (for counting) and a readable reason. The data
root is a local folder (`DataRoot`: symlink-aware, O_NOFOLLOW fast path) or an object-store prefix
(`RemoteDataRoot`: `uri.contained_key` decides containment); `open_data_root` picks one.

>>> for root in (open_data_root("/data"), open_data_root("s3://bkt/data")):
...     try:
...         root.resolve("../etc/passwd")
...     except BadCell as err:
...         print(err.code, "|", err.reason)
path_escapes_root | path escapes the data root: ../etc/passwd
path_escapes_root | path escapes the data root: ../etc/passwd
"""
from __future__ import annotations

import errno
import io
import os
import re
import stat
import struct
import zlib
from dataclasses import dataclass

import numpy as np
from PIL import Image

from ..core import storage, uri

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
JPEG_MAGIC = b"\xff\xd8\xff"
# PIL mode → (numpy dtype, channels) kept as they are; other modes are converted (see `_to_array`).
_NATIVE_MODES = {"L": ("uint8", 1), "RGB": ("uint8", 3), "RGBA": ("uint8", 4), "I;16": ("uint16", 1)}
# The fast PNG path: (bit depth, colour type) → PIL mode (= raw mode) for plain 8-bit images.
_FAST_PNG_MODES = {(8, 0): "L", (8, 2): "RGB", (8, 6): "RGBA"}
_PNG_CHUNK = struct.Struct(">I4s")
_PNG_IHDR = struct.Struct(">IIBBBBB")


class BadCell(ValueError):
    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def _escapes(cell: str) -> BadCell:
    return BadCell("path_escapes_root", f"path escapes the data root: {cell}")


def _non_empty(cell: str, data: bytes) -> bytes:
    if not data:
        raise BadCell("empty_file", f"zero-byte file: {cell}")
    return data


class DataRoot:
    """Resolves index cells to files strictly inside the data root (symlinks included)."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)
        self._prefix = self.root.rstrip(os.sep) + os.sep
        self._cell_dirs: dict[str, str] = {}  # a cell's folder text → its real folder, with a final "/"

    def resolve(self, cell: str) -> str:
        """The cell's real path; BadCell `path_escapes_root` when it is not inside the root."""
        candidate = cell if os.path.isabs(cell) else os.path.join(self.root, cell)
        real = self._via_folder(cell)
        if real is None or os.path.islink(candidate):
            real = os.path.realpath(candidate)
        if not real.startswith(self._prefix):
            raise _escapes(cell)
        return real

    def _via_folder(self, cell: str) -> str | None:
        """The cell's real path if its last part is not a symlink, or None when only `resolve` can decide.

        Each folder is resolved once (keeping realpath off the per-row cost), looked up by the
        cell's own text, which costs less per row than building and splitting the joined path.
        `_open` opens the result with O_NOFOLLOW: a final symlink then fails the open (ELOOP) and
        goes through `resolve`, which checks where it points.
        """
        slash = cell.rfind(os.sep)
        name = cell[slash + 1:]
        if name in ("", ".", ".."):
            return None
        folder = cell[:slash + 1]
        real_folder = self._cell_dirs.get(folder)
        if real_folder is None:
            real = os.path.realpath(os.path.join(self.root, folder))
            real_folder = self._cell_dirs.setdefault(folder, real.rstrip(os.sep) + os.sep)
        real = real_folder + name
        return real if real.startswith(self._prefix) else None

    def _open(self, cell: str) -> int:
        # O_NONBLOCK: opening a named pipe must not hang the worker (no effect on regular files).
        flags = os.O_RDONLY | os.O_NONBLOCK
        path = self._via_folder(cell)
        try:
            if path is not None:
                try:
                    return os.open(path, flags | os.O_NOFOLLOW)
                except OSError as err:
                    if err.errno != errno.ELOOP:
                        raise
            return os.open(self.resolve(cell), flags)
        except BadCell:
            raise
        except FileNotFoundError as err:
            raise BadCell("missing_file", f"missing file: {cell}") from err
        except (OSError, ValueError) as err:  # ValueError: a NUL byte in the path
            raise BadCell("unreadable_file", f"unreadable file {cell}: {getattr(err, 'strerror', None) or err}") from err

    def read(self, cell: str) -> bytes:
        """The file's bytes, after the containment, existence and type checks."""
        fd = self._open(cell)
        try:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                raise BadCell("is_directory", f"is a directory, not a file: {cell}")
            if not stat.S_ISREG(info.st_mode):  # fifo, socket, device
                raise BadCell("unreadable_file", f"unreadable file {cell}: not a regular file")
            # Raw reads: faster than a buffered file object. A short read of a regular file is its
            # end, so the usual case costs one read; a file that grew meanwhile is read to its end.
            data = os.read(fd, info.st_size + 1)
            if len(data) > info.st_size:
                blocks = [data]
                while block := os.read(fd, 1 << 20):
                    blocks.append(block)
                data = b"".join(blocks)
        except OSError as err:
            raise BadCell("unreadable_file", f"unreadable file {cell}: {err.strerror or err}") from err
        finally:
            os.close(fd)
        return _non_empty(cell, data)


class RemoteDataRoot:
    """Resolves index cells to objects strictly below an s3:// or gs:// prefix (`uri.contained_key`).

    A cell is a key relative to the root, or an absolute URI below it; `..` (also percent-encoded),
    other buckets or prefixes and local absolute paths are refused before anything is read.
    """

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")

    def resolve(self, cell: str) -> str:
        key = uri.contained_key(self.root, cell)
        if key is None:
            raise _escapes(cell)
        return key

    def read(self, cell: str) -> bytes:
        location = self.resolve(cell)
        try:
            data = storage.read_bytes(location)
        except FileNotFoundError as err:
            if storage.is_dir(location):  # only on the failure path: one more listing
                raise BadCell("is_directory", f"is a directory, not a file: {cell}") from err
            raise BadCell("missing_file", f"missing file: {cell}") from err
        except Exception as err:  # noqa: BLE001  (the store's client raises its own error types)
            raise BadCell("unreadable_file", f"unreadable file {cell}: {type(err).__name__}") from err
        return _non_empty(cell, data)


def open_data_root(root: str) -> DataRoot | RemoteDataRoot:
    """The data root of a local folder or of an object-store prefix."""
    return RemoteDataRoot(root) if uri.is_remote(root) else DataRoot(root)


@dataclass(frozen=True)
class ImageRules:
    """What one image column accepts and how it is converted at ingest."""

    max_pixels: int
    channels: str | None = None  # "gray" | "rgb" | None (keep)
    resize: tuple[int, int] | None = None  # (H, W)
    nearest: bool = False  # masks: nearest-neighbour resize, palette indices kept


def sniff_format(data: bytes) -> str:
    if data.startswith(PNG_MAGIC):
        return "PNG"
    if data.startswith(JPEG_MAGIC):
        return "JPEG"
    raise BadCell("not_an_image", "not a PNG or JPEG image")


def _fast_png(data: bytes, rules: ImageRules) -> Image.Image | None:
    """Plain 8-bit L/RGB/RGBA PNGs decoded by PIL's own zip decoder, without `Image.open`.

    Same C decoder, so the same pixels; it skips the Python chunk machinery that costs more than
    decoding a small image. Anything unusual (other chunks, bad CRC, interlace, truncation) returns
    None and takes the full PIL path, which then produces PIL's own error.
    """
    header, idat, pos = None, [], 8
    while pos + 12 <= len(data):
        length, kind = _PNG_CHUNK.unpack_from(data, pos)
        body, end = pos + 8, pos + 8 + length
        if end + 4 > len(data):
            return None
        if zlib.crc32(memoryview(data)[pos + 4:end]) != int.from_bytes(data[end:end + 4], "big"):
            return None
        if kind == b"IDAT" and header is not None:
            idat.append(data[body:end])
        elif kind == b"IHDR" and header is None and length == _PNG_IHDR.size:
            header = _PNG_IHDR.unpack_from(data, body)
        elif kind == b"IEND" and idat:
            break
        else:
            return None
        pos = end + 4
    else:
        return None
    width, height, depth, color, compression, filtering, interlace = header
    mode = _FAST_PNG_MODES.get((depth, color))
    pixels = width * height
    bomb_limit = Image.MAX_IMAGE_PIXELS  # beyond it PIL warns or refuses: leave that to PIL
    if mode is None or compression or filtering or interlace or not pixels or (bomb_limit and pixels > bomb_limit):
        return None
    if pixels > rules.max_pixels:
        raise BadCell("too_many_pixels", f"image of {width}x{height} exceeds the limit of {rules.max_pixels} pixels")
    try:
        return Image.frombytes(mode, (width, height), b"".join(idat), "zip", mode)
    except (ValueError, OSError):  # truncated or corrupt data: PIL's full path names the problem
        return None


def decode_image(data: bytes, rules: ImageRules) -> Image.Image:
    """The decoded, converted and resized image (PIL), checked against the pixel limit first."""
    image_format = sniff_format(data)
    fast = _fast_png(data, rules) if image_format == "PNG" else None
    if fast is not None:
        return _finish(fast, rules)
    try:
        image = Image.open(io.BytesIO(data), formats=[image_format])
        width, height = image.size
        if width * height > rules.max_pixels:
            raise BadCell("too_many_pixels", f"image of {width}x{height} exceeds the limit of {rules.max_pixels} pixels")
        image.load()
    except BadCell:
        raise
    except Exception as err:  # PIL raises many types for corrupt data
        detail = re.sub(r" at 0x[0-9a-f]+", "", str(err))  # PIL names a memory address: keep reasons stable
        raise BadCell("corrupt_image", f"corrupt or truncated image: {detail}") from err
    return _finish(image, rules)


def _finish(image: Image.Image, rules: ImageRules) -> Image.Image:
    image = _convert(image, rules)
    if rules.resize and image.size != (rules.resize[1], rules.resize[0]):
        resample = Image.Resampling.NEAREST if rules.nearest else Image.Resampling.BILINEAR
        image = image.resize((rules.resize[1], rules.resize[0]), resample)
    return image


def decode(data: bytes, rules: ImageRules) -> np.ndarray:
    """Decoded pixels as an HxWxC array, converted and resized as the rules say."""
    return _to_array(decode_image(data, rules))


def image_layout(image: Image.Image) -> tuple[str, tuple[int, int, int]]:
    """dtype and (H, W, C) of a decoded image, without copying its pixels."""
    dtype = "uint16" if image.mode.startswith("I;16") else "uint8"
    return dtype, (image.size[1], image.size[0], len(image.getbands()))


def encode_image(image: Image.Image, storage: str) -> bytes:
    """Payload bytes straight from the decoded image: raw row-major HWC bytes, or re-encoded."""
    if storage == "raw":
        return image.tobytes()
    return encode(_to_array(image), storage)


def _convert(image: Image.Image, rules: ImageRules) -> Image.Image:
    if rules.channels == "gray" and image.mode not in ("L", "I;16"):
        return image.convert("L")
    if rules.channels == "rgb" and image.mode != "RGB":
        return image.convert("RGB")
    if image.mode in _NATIVE_MODES or (rules.nearest and image.mode == "P"):
        return image
    if image.mode == "P":
        return image.convert("RGBA" if "transparency" in image.info else "RGB")
    if image.mode in ("1", "LA", "I", "I;16B", "I;16L"):
        return image.convert("I;16" if image.mode.startswith("I") else "L")
    return image.convert("RGB")


def _to_array(image: Image.Image) -> np.ndarray:
    array = np.asarray(image)
    if array.dtype != np.uint8:
        array = array.astype(np.uint16)
    if array.ndim == 2:
        array = array[:, :, None]
    return np.ascontiguousarray(array)


def encode(pixels: np.ndarray, storage: str) -> bytes:
    """Payload bytes for the `storage` kind: raw row-major HWC bytes, or a re-encoded PNG/JPEG."""
    if storage == "raw":
        return pixels.tobytes()
    squeezed = pixels[:, :, 0] if pixels.shape[2] == 1 else pixels
    image = Image.fromarray(squeezed)  # a 2-D uint16 array becomes mode I;16
    out = io.BytesIO()
    if storage == "png":
        image.save(out, format="PNG", compress_level=1)
    else:
        image.save(out, format="JPEG", quality=95)
    return out.getvalue()
