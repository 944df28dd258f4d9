"""HTML pages for the KFP UI: the evaluation's and the training's plots and tables, self-contained.

The KFP UI shows an `Output[HTML]` artifact in its visualization pane but cannot follow links to
other files of the run, so every image is embedded as a base64 `data:` URI.

    page = evaluation_page(metrics, confusion_png)   # per-class and per-slice tables, confusion matrix
    page = training_page(history, curves_png)         # per-epoch table, loss/metric curves
    page_from_files("evaluation", "runs/x/evaluate/evaluation")   # the same, from a step's output dir
"""
from __future__ import annotations

import base64
import html
from typing import Any

from ..core import storage
from ..evaluator.config import METRICS, PLOT
from ..trainer.outputs import CURVES, HISTORY_NAME


def _image(png: bytes | None, alt: str) -> str:
    if not png:
        return f"<p>(no {html.escape(alt)})</p>"
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _cell(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else html.escape(str(value))


def _table(rows: list[dict[str, Any]], first: str) -> str:
    """`rows` share their keys; `first` names the leading column."""
    if not rows:
        return "<p>(none)</p>"
    columns = [first] + [key for key in rows[0] if key != first]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(row.get(c, ''))}</td>" for c in columns) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _page(title: str, parts: list[str]) -> str:
    style = "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body><h1>{html.escape(title)}</h1>{''.join(parts)}</body></html>\n")


def evaluation_page(metrics: dict[str, Any], confusion_png: bytes | None) -> str:
    """The confusion matrix, overall metrics, per-class table and one table per slice column."""
    overall = [{"metric": k, "value": v} for k, v in metrics.get("overall", {}).items() if isinstance(v, (int, float))]
    per_class = [{"class": name, **values} for name, values in (metrics.get("per_class") or {}).items()]
    parts = ["<h2>Confusion matrix</h2>", _image(confusion_png, "confusion matrix"),
             "<h2>Overall</h2>", _table(overall, "metric"), "<h2>Per class</h2>", _table(per_class, "class")]
    for column, values in (metrics.get("slices") or {}).items():
        rows = [{"slice": value, "examples": info.get("num_examples", ""),
                 **{k: v for k, v in info.get("overall", {}).items() if isinstance(v, (int, float))}}
                for value, info in values.items()]
        parts += [f"<h2>Slices by {html.escape(column)}</h2>", _table(rows, "slice")]
    return _page(f"Evaluation: {metrics.get('num_examples', '?')} examples of {metrics.get('split', '?')}", parts)


def training_page(history: list[dict[str, Any]], curves_png: bytes | None) -> str:
    """The loss/metric curves and the per-epoch table."""
    return _page("Training", ["<h2>Curves</h2>", _image(curves_png, "training curves"),
                              "<h2>Per epoch</h2>", _table(history, "epoch")])


def _optional(path: str) -> bytes | None:
    return storage.read_bytes(path) if storage.is_file(path) else None


def page_from_files(kind: str, directory: str) -> str:
    """The page of an Evaluator ("evaluation") or Trainer ("training") output directory (a path or URI)."""
    if kind == "evaluation":
        return evaluation_page(storage.read_json(storage.join(directory, METRICS)),
                               _optional(storage.join(directory, PLOT)))
    history_path = storage.join(directory, HISTORY_NAME)
    history = storage.read_json(history_path) if storage.is_file(history_path) else {}
    return training_page(history.get("epochs", []), _optional(storage.join(directory, CURVES)))
