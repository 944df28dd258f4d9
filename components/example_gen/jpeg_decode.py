"""JPEG pixels through libjpeg-turbo's TurboJPEG API, and DCT-domain downscaling before a resize.

Pillow and simplejpeg drive the same libjpeg-turbo with the same settings (accurate integer DCT,
fancy upsampling), so their pixels are identical at every scale (tests/example_gen/test_photo_decode.py checks
it). simplejpeg writes them straight into a numpy array; measured on 300-500 px photos it takes
~25 % less CPU than Pillow's decode into its own 4-bytes-per-pixel layout. Encoding stays with
Pillow: simplejpeg's encoder was no faster once the array copy it needs is counted.

When the resize target is at least `DRAFT_GAP` times smaller on both sides, libjpeg scales by
1/2, 1/4 or 1/8 while decoding (what Pillow's `Image.draft` does), and the resize that follows
still reduces by `DRAFT_GAP` or more: Pillow's `reducing_gap` rule, which its documentation calls
indistinguishable from a full-size resize from 3.0 up. Measured on the sample photos scaled to
1280-2560 px and resized to 100-224 px: 0.1-0.16 levels of 255 from the full-size result on
average, 1 level at the 99th percentile. A gap of 2 measured 0.9-1.8 levels, and libjpeg's 5/8,
3/4 and 7/8 scales ended twice as far from a Lanczos reference as a plain bilinear resize: not used.

>>> draft_scale((4000, 3000), (224, 224))   # 4000 // 672 = 5, 3000 // 672 = 4 → 1/4
4
>>> draft_scale((500, 400), (224, 224)), draft_scale((640, 480), None)
(1, 1)
"""
from __future__ import annotations

import math

import simplejpeg
from PIL import Image

DRAFT_GAP = 3
_DRAFT_SCALES = (8, 4, 2)


def draft_scale(size: tuple[int, int], target: tuple[int, int] | None) -> int:
    """The DCT scale denominator (1, 2, 4 or 8) for a (W, H) image resized to `target` (W, H)."""
    if target is None:
        return 1
    fits = min(size[0] // (DRAFT_GAP * target[0]), size[1] // (DRAFT_GAP * target[1]))
    return next((scale for scale in _DRAFT_SCALES if fits >= scale), 1)


def decode_turbo(data: bytes, header: Image.Image, scale: int) -> Image.Image | None:
    """The pixels of an opened (not yet loaded) JPEG at 1/`scale`, or None when Pillow must decode it.

    Colour comes as 3-byte RGB, copied into a Pillow RGB image; gray as L over TurboJPEG's own
    buffer, without a copy. Not RGBX over TurboJPEG's buffer, although Pillow keeps RGB as 4 bytes a
    pixel and that would skip the copy: Pillow resizes a 4-band image a band more, and the X byte
    must be dropped after. Decode + 224-px resize of the benchmark photos, minimum of 40 rounds of
    50: 1,858 µs through RGBX, 1,650 through RGB, 1,714 for Pillow's own decode (the loop's).
    Pillow keeps CMYK/YCCK files, other modes and anything libjpeg warns about (truncated or
    corrupt data): its own decoder then names the problem as before.
    """
    if header.mode not in ("RGB", "L"):
        return None
    colorspace = "GRAY" if header.mode == "L" else "RGB"
    width, height = header.size
    try:
        pixels = simplejpeg.decode_jpeg(data, colorspace, min_height=math.ceil(height / scale),
                                        min_width=math.ceil(width / scale), strict=True)
    except ValueError:
        return None
    if colorspace == "RGB":
        return Image.fromarray(pixels)
    return Image.frombuffer("L", (pixels.shape[1], pixels.shape[0]), pixels, "raw", "L", 0, 1)


def draft(header: Image.Image, scale: int) -> None:
    """Asks Pillow's decoder for the same 1/`scale` DCT downscale (the fallback path)."""
    if scale > 1:  # Pillow picks the scale from `size // requested`: request the floor sizes
        width, height = header.size
        header.draft(header.mode, (width // scale, height // scale))
