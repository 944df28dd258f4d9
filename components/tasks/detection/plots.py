"""Detection plots a person looks at: images with their true and predicted boxes, and per-class
precision-recall curves. Drawn on matplotlib's Agg canvas directly (no pyplot state, no display), as
plot.py draws the confusion matrix; written with `storage.write_bytes`, so `path` may be s3:// or gs://.

    plot_detections(images, true_boxes, true_classes, det_boxes, det_scores, det_classes, class_names,
                    "eval/detections.png")
    plot_precision_recall(accumulator.summarize(), class_names, "eval/precision_recall.png")

Boxes are normalised (ymin, xmin, ymax, xmax), as the accumulator takes them. A true box is a solid
line, a detection a dashed one captioned with its class and score; the colour is the class's.
"""
from __future__ import annotations

import io
from typing import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ...core import storage
from ...core.detection_metrics import IOU_THRESHOLDS, RECALL_THRESHOLDS, DetectionMetrics

COLUMNS = 4
PANEL_INCHES = 3.0
MAX_LEGEND_CLASSES = 20


def _colour(label: int, classes: int) -> tuple[float, ...]:
    """A class's colour: tab10 up to 10 classes, tab20 up to 20, then a hue circle."""
    from matplotlib import colormaps

    if classes <= 20:
        return colormaps["tab10" if classes <= 10 else "tab20"](label)
    return colormaps["hsv"](label / classes)


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def _pixels(image: np.ndarray) -> tuple[np.ndarray, str | None]:
    """An image as imshow shows it: [H, W] gray or [H, W, 3]; not uint8: scaled from [min(0, low), max(1, high)]
    to [0, 1], so [0, 1] floats stay as they are and [0, 255] ones are divided by 255."""
    shown = np.asarray(image)
    if shown.ndim == 3:
        shown = shown[..., 0] if shown.shape[-1] == 1 else shown[..., :3]
    if shown.dtype != np.uint8:
        low, high = float(shown.min(initial=0)), float(shown.max(initial=1))
        shown = (shown.astype(np.float64) - low) / ((high - low) or 1.0)
    return shown, "gray" if shown.ndim == 2 else None


def _box(axes: Axes, box: np.ndarray, height: int, width: int, colour: tuple[float, ...], dashed: bool) -> None:
    ymin, xmin, ymax, xmax = (float(v) for v in box)
    axes.add_patch(Rectangle((xmin * width, ymin * height), (xmax - xmin) * width,
                             (ymax - ymin) * height, fill=False, edgecolor=colour, linewidth=1.8 if dashed else 2.2,
                             linestyle="--" if dashed else "-"))


def _panel(axes: Axes, image: np.ndarray, truth: tuple[np.ndarray, np.ndarray],
           found: tuple[np.ndarray, np.ndarray, np.ndarray], class_names: Sequence[str], threshold: float) -> None:
    """One image: its true boxes solid, its detections scoring at least `threshold` dashed and captioned."""
    shown, cmap = _pixels(image)
    height, width = shown.shape[:2]
    axes.imshow(shown, cmap=cmap)
    classes = len(class_names)
    for box, label in zip(np.asarray(truth[0]).reshape(-1, 4), np.asarray(truth[1]).reshape(-1)):
        _box(axes, box, height, width, _colour(int(label), classes), dashed=False)
    boxes, scores, labels = (np.asarray(v) for v in found)
    shown_count = 0
    for box, score, label in zip(boxes.reshape(-1, 4), scores.reshape(-1), labels.reshape(-1)):
        if score < threshold:
            continue
        colour = _colour(int(label), classes)
        _box(axes, box, height, width, colour, dashed=True)
        axes.text(box[1] * width, box[0] * height, f"{class_names[int(label)]} {score:.2f}", fontsize=7,
                  color="white", va="bottom", bbox={"facecolor": colour, "alpha": 0.8, "pad": 1, "linewidth": 0})
        shown_count += 1
    axes.set_title(f"{len(truth[1])} true boxes, {shown_count} of {len(scores)} detections shown", fontsize=8)
    axes.set_axis_off()


def detections_png(images: Sequence[np.ndarray], true_boxes: Sequence[np.ndarray], true_classes: Sequence[np.ndarray],
                   det_boxes: Sequence[np.ndarray], det_scores: Sequence[np.ndarray], det_classes: Sequence[np.ndarray],
                   class_names: Sequence[str], max_images: int = 16, score_threshold: float = 0.3) -> bytes:
    """PNG bytes of the first `max_images` images in a 4-column grid (arguments: plot_detections)."""
    count = min(len(images), max_images)
    rows, columns = max(1, -(-count // COLUMNS)), min(max(count, 1), COLUMNS)
    figure = Figure(figsize=(columns * PANEL_INCHES, rows * PANEL_INCHES + 0.5))
    FigureCanvasAgg(figure)
    figure.subplots_adjust(left=0.01, right=0.99, bottom=0.01, top=1 - 0.5 / (rows * PANEL_INCHES + 0.5),
                           wspace=0.04, hspace=0.12)
    for i in range(count):
        _panel(figure.add_subplot(rows, columns, i + 1), images[i], (true_boxes[i], true_classes[i]),
               (det_boxes[i], det_scores[i], det_classes[i]), class_names, score_threshold)
    figure.suptitle(f"{count} of {len(images)} images: true boxes solid, detections scoring ≥ {score_threshold:g} "
                    "dashed (class and score)", fontsize=9)
    return _png(figure)


def plot_detections(images: Sequence[np.ndarray], true_boxes: Sequence[np.ndarray], true_classes: Sequence[np.ndarray],
                    det_boxes: Sequence[np.ndarray], det_scores: Sequence[np.ndarray],
                    det_classes: Sequence[np.ndarray], class_names: Sequence[str], path: str, max_images: int = 16,
                    score_threshold: float = 0.3) -> None:
    """Writes the grid of images with their boxes to `path` (PNG): per image i, [H, W(, C)] pixels, its true
    boxes [G, 4] and classes [G], its detections [D, 4], scores [D] and classes [D] (class ids)."""
    storage.write_bytes(path, detections_png(images, true_boxes, true_classes, det_boxes, det_scores, det_classes,
                                             class_names, max_images, score_threshold))


def precision_recall_png(metrics: DetectionMetrics, class_names: Sequence[str],
                         iou_thresholds: np.ndarray = IOU_THRESHOLDS) -> bytes:
    """PNG bytes of one precision curve per class at IoU 0.5, area all, the most detections (plot_precision_recall)."""
    t = int(np.flatnonzero(np.isclose(iou_thresholds, 0.5))[0])
    curves = metrics.precision[t, :, :, 0, -1]  # [R, K]
    figure = Figure(figsize=(7.5, 5.0))
    FigureCanvasAgg(figure)
    axes = figure.add_axes((0.09, 0.1, 0.58, 0.8))
    missing = []
    for k, name in enumerate(class_names):
        if curves[0, k] < 0:  # -1: no ground truth of this class
            missing.append(name)
            continue
        label = f"{name} (AP50 {curves[:, k].mean():.3f})" if k < MAX_LEGEND_CLASSES else None
        axes.plot(RECALL_THRESHOLDS, curves[:, k], color=_colour(k, len(class_names)), linewidth=1.5, label=label)
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1.02)
    axes.set_xlabel("recall")
    axes.set_ylabel("interpolated precision")
    ap50 = metrics.stats[1]
    axes.set_title(f"Precision-recall at IoU 0.5 (AP50 {ap50:.3f})" if ap50 >= 0 else "Precision-recall at IoU 0.5",
                   fontsize=10)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7, frameon=False)
    if missing:
        figure.text(0.69, 0.08, "no ground truth: " + ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else ""),
                    fontsize=7, wrap=True)
    return _png(figure)


def plot_precision_recall(metrics: DetectionMetrics, class_names: Sequence[str], path: str,
                          iou_thresholds: np.ndarray = IOU_THRESHOLDS) -> None:
    """Writes the per-class precision-recall curves at IoU 0.5 (`metrics.precision`, COCO's [T, R, K, A, M]:
    area all, max detections) to `path` (PNG); a class without ground truth is named, not drawn."""
    storage.write_bytes(path, precision_recall_png(metrics, class_names, iou_thresholds))
