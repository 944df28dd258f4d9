"""A box index's image letterboxed with Pillow (ExampleGen's `--box-resize letterbox`): resized to fit H x W with
its aspect kept, centred, padded with `PAD`, in tf.image.resize_with_pad's geometry (core/letterbox.py), so the
served graph's letterbox puts the same pixels in the same rows and columns.

>>> letterboxed(Image.new("L", (90, 30), 200), (40, 40)).getpixel((0, 0)), letterbox_content(30, 90, (40, 40))
(0, Layout(top=13, left=0, height=13, width=40))
"""
from __future__ import annotations

from PIL import Image

from ..core.letterbox import PAD, Layout, letterbox_layout
from .data_root import BadCell


def letterboxed(image: Image.Image, size: tuple[int, int]) -> Image.Image:
    """The image resized to fit `size` (H, W) with its aspect kept and padded with PAD (core/letterbox.py)."""
    if image.size == (size[1], size[0]):
        return image
    top, left, height, width = letterbox_content(image.height, image.width, size)
    canvas = Image.new(image.mode, (size[1], size[0]), PAD)
    canvas.paste(image.resize((width, height), Image.Resampling.BILINEAR), (left, top))
    return canvas


def letterbox_content(height: int, width: int, size: tuple[int, int]) -> Layout:
    """The letterbox's layout of an (height, width) image in `size`; BadCell when a side would be 0 pixels."""
    layout = letterbox_layout((height, width), size)
    if layout.height < 1 or layout.width < 1:
        raise BadCell("too_narrow_to_letterbox", f"image {height}x{width} letterboxed to {size[0]}x{size[1]} "
                                                 f"keeps no whole pixel on one side; pass --box-resize stretch")
    return layout
