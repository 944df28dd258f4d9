"""ExampleGen's fast paths against the libraries they stand in for: the plain-PNG decoder against
PIL (same pixels, same rejections) and the comma split of unquoted CSV records against `csv`."""
from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from helpers_images import corrupt_idat, png_bytes

pytestmark = pytest.mark.unit  # in process, small generated data, no server: make test-fast runs it


def _pil_pixels(data: bytes) -> tuple[str, tuple[int, int], bytes]:
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        return image.mode, image.size, image.tobytes()


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _split_idat(data: bytes, pieces: int) -> bytes:
    """The same PNG with its IDAT payload cut into several IDAT chunks (valid per the PNG spec)."""
    at = data.index(b"IDAT") - 4
    length = struct.unpack(">I", data[at:at + 4])[0]
    payload = data[at + 8:at + 8 + length]
    bounds = [len(payload) * i // pieces for i in range(pieces + 1)]
    chunks = b"".join(_chunk(b"IDAT", payload[lo:hi]) for lo, hi in zip(bounds, bounds[1:]))
    return data[:at] + chunks + data[at + 12 + length:]


def _png_variants() -> dict[str, bytes]:
    rng = np.random.default_rng(5)
    gray = rng.integers(0, 256, (13, 17), dtype=np.uint8)
    rgb = rng.integers(0, 256, (9, 11, 3), dtype=np.uint8)
    rgba = rng.integers(0, 256, (6, 5, 4), dtype=np.uint8)
    variants = {"gray": png_bytes(gray), "rgb": png_bytes(rgb), "rgba": png_bytes(rgba), "gray_split_idat": _split_idat(png_bytes(gray), 3)}
    out = io.BytesIO()
    Image.fromarray(rgb).save(out, format="PNG", interlace=1)  # Adam7: not the fast path
    variants["interlaced"] = out.getvalue()
    out = io.BytesIO()
    Image.fromarray(gray).save(out, format="PNG", dpi=(72, 72))  # an ancillary chunk: not the fast path
    variants["with_phys"] = out.getvalue()
    variants["gray16"] = png_bytes(rng.integers(0, 65536, (4, 4), dtype=np.uint16))
    variants["palette"] = _palettepng_bytes(gray)
    return variants


def _palettepng_bytes(gray: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(gray).convert("P").save(out, format="PNG")
    return out.getvalue()


def test_png_decoding_matches_pil_bit_for_bit() -> None:
    from shardflow.example_gen.images import ImageRules, decode_image

    rules = ImageRules(max_pixels=1 << 20)
    for name, data in _png_variants().items():
        image = decode_image(data, rules)
        mode, size, pixels = _pil_pixels(data)
        if name != "palette":  # palette images are converted to RGB by the rules
            assert (image.mode, image.size) == (mode, size), name
            assert image.tobytes() == pixels, name


def test_broken_pngs_are_rejected_like_pil_rejects_them() -> None:
    from shardflow.example_gen.images import BadCell, ImageRules, decode_image

    good = _split_idat(png_bytes((np.arange(144) * 7 % 256).astype(np.uint8).reshape(12, 12)), 2)
    second_idat = good.index(b"IDAT", good.index(b"IDAT") + 4) - 4
    iend_crc = len(good) - 4
    cases = {
        "truncated": good[: len(good) - 30],
        "bad_iend_crc": good[:iend_crc] + bytes([good[iend_crc] ^ 1]) + good[iend_crc + 1:],
        "bad_idat_crc": good[:second_idat - 1] + bytes([good[second_idat - 1] ^ 1]) + good[second_idat:],
        "inverted_idat": corrupt_idat(good),
        "short_idat_with_valid_crc": good[:second_idat] + _chunk(b"IEND", b""),  # half the pixel data
    }
    pil_failed = set()
    for name, data in cases.items():
        try:
            expected = _pil_pixels(data)
        except Exception:  # noqa: BLE001 - whatever PIL raises, the row must be rejected
            pil_failed.add(name)
            with pytest.raises(BadCell) as err:
                decode_image(data, ImageRules(max_pixels=1 << 20))
            assert err.value.code == "corrupt_image", (name, err.value.reason)
        else:
            image = decode_image(data, ImageRules(max_pixels=1 << 20))
            assert (image.mode, image.size, image.tobytes()) == expected, name
    assert {"truncated", "inverted_idat", "short_idat_with_valid_crc"} <= pil_failed
    with pytest.raises(BadCell) as err:
        decode_image(good, ImageRules(max_pixels=100))
    assert (err.value.code, err.value.reason) == ("too_many_pixels", "image of 12x12 exceeds the limit of 100 pixels")


def test_plain_csv_records_split_like_the_csv_module() -> None:
    import csv

    from shardflow.example_gen.csv_cells import parse_record

    records = [b"a.png,1\n", b" a.png , 2 \r\n", b"a,,\n", b"\xc3\xa9.png,3", b"a.png,\t4\x0b\n", b",\n",
               b'"a,b.png",5\n', b'a.png,"6"\r\n', b"a\rb.png,7\n"]
    for raw in records:
        try:
            expected = [cell.strip() for cell in next(csv.reader(io.StringIO(raw.decode("utf-8")), strict=True))]
        except csv.Error:
            expected = None
        try:
            got = parse_record(raw)
        except csv.Error:
            got = None
        assert got == expected, raw
