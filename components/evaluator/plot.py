"""The confusion matrix as a PNG a person reads at a glance: colour = share of the true class, text = counts;
a classifier's reliability diagram (`reliability_png`); the label-issue contact sheet
(`contact_sheet_png`).

    png = confusion_matrix_png(np.array([[50, 2], [5, 43]]), ["cat", "dog"], "model on eval: accuracy 0.930")
    Path("confusion_matrix.png").write_bytes(png)

Rows are true classes, columns predictions; each cell shows its count and its share of the row
(the recall on the diagonal). Drawn with matplotlib's Agg canvas directly, so no global pyplot
state and no display are involved. With many classes the numbers are left out (unreadable).
Drawing takes ~0.2-0.4 s for 10 classes, most of it laying out the cell texts.
"""
from __future__ import annotations

import io

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

MAX_ANNOTATED_CLASSES = 20


def _row_shares(confusion: np.ndarray) -> np.ndarray:
    rows = confusion.sum(axis=1, keepdims=True)
    shares = np.zeros(confusion.shape, dtype=np.float64)
    np.divide(confusion, rows, out=shares, where=rows > 0)
    return shares


def _annotate(axes: object, confusion: np.ndarray, shares: np.ndarray) -> None:
    for (row, column), count in np.ndenumerate(confusion):
        colour = "white" if shares[row, column] > 0.6 else "black"
        axes.text(column, row, f"{count:,}\n{shares[row, column]:.0%}", ha="center", va="center",  # type: ignore[attr-defined]
                  fontsize=8, color=colour)


def confusion_matrix_png(confusion: np.ndarray, class_names: list[str], title: str) -> bytes:
    """PNG bytes of the matrix with class names on both axes."""
    confusion = np.asarray(confusion, dtype=np.int64)
    classes = len(class_names)
    side = min(max(4.0, 0.6 * classes + 2.0), 20.0)
    width, height = side + 1.5, side
    figure = Figure(figsize=(width, height))
    FigureCanvasAgg(figure)
    # Margins from the longest class name: a layout engine or bbox_inches="tight" would double the
    # drawing time (text layout is most of it).
    name_inches = 0.09 * max(len(name) for name in class_names)
    figure.subplots_adjust(left=(0.7 + name_inches) / width, bottom=(0.6 + 0.7 * name_inches) / height,
                           right=1 - 1.1 / width, top=1 - 0.45 / height)  # right: colour bar labels
    axes = figure.add_subplot()
    shares = _row_shares(confusion)
    image = axes.imshow(shares, cmap="Blues", vmin=0.0, vmax=1.0)
    slanted = classes > 4 and max(len(name) for name in class_names) > 2  # long names would overlap
    axes.set_xticks(range(classes), labels=class_names, rotation=45 if slanted else 0,
                    ha="right" if slanted else "center")
    axes.set_yticks(range(classes), labels=class_names)
    axes.set_xlabel("predicted class")
    axes.set_ylabel("true class")
    axes.set_title(title, fontsize=10)
    if classes <= MAX_ANNOTATED_CLASSES:
        _annotate(axes, confusion, shares)
    figure.colorbar(image, ax=axes, label="share of the true class", fraction=0.05, pad=0.03)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def reliability_png(bins: list[dict], title: str) -> bytes:
    """PNG bytes of a reliability diagram from `calibration.reliability_table` rows: per confidence bin,
    the accuracy (blue bar) against the mean confidence (red: the gap; the diagonal is perfect
    calibration), and each bin's share of the examples (narrow gray bar, same 0-1 scale: where the gaps
    weigh in ECE). One axes, no layout engine: ~0.09 s (two axes and hatching took twice as long)."""
    figure = Figure(figsize=(5.0, 5.0))
    FigureCanvasAgg(figure)
    axes = figure.add_axes((0.13, 0.1, 0.82, 0.8))
    filled = [row for row in bins if row["examples"]]
    width = (bins[0]["high"] - bins[0]["low"]) * 0.95
    centres = [(row["low"] + row["high"]) / 2 for row in filled]
    accuracy = [row["accuracy"] for row in filled]
    total = sum(row["examples"] for row in bins) or 1
    axes.plot([0, 1], [0, 1], linestyle="--", color="gray", linewidth=1, label="perfect calibration")
    axes.bar(centres, accuracy, width=width, color="#4C72B0", label="accuracy")
    axes.bar(centres, [row["confidence"] - a for row, a in zip(filled, accuracy)], bottom=accuracy, width=width,
             color="#C44E52", alpha=0.45, label="gap to the mean confidence")
    axes.bar(centres, [row["examples"] / total for row in filled], width=width / 3, color="#555555",
             label="share of the examples")
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1)
    axes.set_xlabel("confidence (probability of the predicted class)")
    axes.set_ylabel("accuracy")
    axes.set_title(title, fontsize=10)
    axes.legend(loc="upper left", fontsize=8)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def _displayable(pixels: np.ndarray) -> tuple[np.ndarray, str | None]:
    """Pixels as imshow shows them: gray [H, W] with a gray map, colour [H, W, 3], others scaled to [0, 1]."""
    shown = pixels[..., 0] if pixels.shape[-1] == 1 else pixels[..., :3]
    if shown.dtype != np.uint8:
        low, high = float(shown.min()), float(shown.max())
        shown = (shown.astype(np.float64) - low) / ((high - low) or 1.0)
    return shown, "gray" if shown.ndim == 2 else None


# The contact sheet is drawn with Pillow, not matplotlib: a 16-panel figure took 0.3-0.5 s of matplotlib
# layout and rendering, which was most of the label issues' cost in the Evaluator (issue 32: <= 10 %).
CELL, THUMB, CAPTION_LINE, TITLE_HEIGHT = 220, 176, 13, 28
CLASS_COLOURS = np.array([(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
                          (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207)], np.float64)


def _font(size: int) -> "ImageFont.FreeTypeFont":
    """DejaVu Sans from matplotlib's data (it has the arrow of the captions), else Pillow's default."""
    from pathlib import Path

    import matplotlib
    from PIL import ImageFont

    path = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"
    return ImageFont.truetype(str(path), size) if path.is_file() else ImageFont.load_default()


def _thumbnail(pixels: np.ndarray, mask: np.ndarray | None) -> "Image.Image":
    """The panel's image scaled to fit THUMB px (nearest neighbour: pixels stay visible), a mask blended over it."""
    from PIL import Image

    shown, _ = _displayable(pixels)
    rgb = shown if shown.dtype == np.uint8 else np.round(shown * 255).astype(np.uint8)
    rgb = np.repeat(rgb[..., None], 3, axis=2) if rgb.ndim == 2 else rgb
    if mask is not None:
        colours = CLASS_COLOURS[np.asarray(mask).reshape(rgb.shape[:2]).astype(np.int64) % len(CLASS_COLOURS)]
        rgb = np.round(rgb * 0.55 + colours * 0.45).astype(np.uint8)
    image = Image.fromarray(np.ascontiguousarray(rgb))
    scale = THUMB / max(image.size)
    return image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))),
                        Image.Resampling.NEAREST)


def contact_sheet_png(panels: list[tuple[np.ndarray | None, np.ndarray | None]], captions: list[str],
                      title: str) -> bytes:
    """PNG bytes of up to 16 thumbnails in a 4-column grid, each captioned ("given → suggested"); a mask,
    when given, is drawn over its image in translucent colours (class ids). No panels: the title alone."""
    from PIL import Image, ImageDraw

    columns, rows = 4, max(1, -(-len(panels) // 4))
    height = THUMB + 3 * CAPTION_LINE + 8
    sheet = Image.new("RGB", (columns * CELL, TITLE_HEIGHT + rows * height), "white")
    draw, font, title_font = ImageDraw.Draw(sheet), _font(10), _font(13)
    draw.text((sheet.width // 2, 6), title, fill="black", font=title_font, anchor="mt")
    for number, ((pixels, mask), caption) in enumerate(zip(panels, captions)):
        row, column = divmod(number, columns)
        left, top = column * CELL, TITLE_HEIGHT + row * height
        draw.multiline_text((left + CELL // 2, top), caption, fill="black", font=font, anchor="ma", align="center")
        if pixels is not None:
            thumb = _thumbnail(pixels, mask)
            sheet.paste(thumb, (left + (CELL - thumb.width) // 2, top + 2 * CAPTION_LINE + 6))
    if not panels:
        draw.text((sheet.width // 2, TITLE_HEIGHT + 40), "no likely label errors found", fill="black", font=font,
                  anchor="mt")
    buffer = io.BytesIO()
    sheet.save(buffer, format="PNG")
    return buffer.getvalue()
