"""The validation reports: anomalies.json for machines, report.md and report.html for people.

    paths = write_reports(result, OutputDir("s3://bucket/runs/validation"))   # staged; anomalies.json last:
    out.mark_complete(report_json(result, examples="runs/examples", schema="..."))
    # anomalies.json: {"passed": false, "splits": {"eval": {"anomalies": [...], "drift": [...]}}, ...}

The markdown and HTML say the same thing: a one-line verdict, a table of anomalies per split, the
drift measured against the baseline and the comparator each feature was checked with. The KFP UI
shows either as a run artifact. anomalies.json is the completion marker, written last (the pipeline reads it).
"""
from __future__ import annotations

import html
from typing import Any

from ..core import storage
from ..core.output_dir import OutputDir
from .result import ValidationResult

JSON_NAME, MARKDOWN_NAME, HTML_NAME = "anomalies.json", "report.md", "report.html"
_ANOMALY_COLUMNS = ("feature", "kind", "anomaly", "details", "severity")
_DRIFT_COLUMNS = ("feature", "measure", "value", "threshold", "verdict")


def verdict(result: ValidationResult) -> str:
    splits = ", ".join(result.splits)
    if result.passed:
        return (f"PASSED: no anomalies in {splits} "
                f"(drift threshold {result.drift_threshold:g} against {result.baseline_split})")
    features = sorted({f"{a.split}/{a.feature}" for a in result.anomalies})
    action = "the run stops here" if result.fail_on_anomalies else "warn-only: the run continues"
    count = len(result.anomalies)
    return f"FAILED: {count} anomal{'y' if count == 1 else 'ies'} in {', '.join(features)} ({action})"


def report_json(result: ValidationResult, examples: str, schema: str) -> dict[str, Any]:
    by_split = result.by_split()
    return {
        "passed": result.passed,
        "verdict": verdict(result),
        "num_anomalies": len(result.anomalies),
        "fail_on_anomalies": result.fail_on_anomalies,
        "examples": examples,
        "schema": schema,
        "baseline_split": result.baseline_split,
        "thresholds": {"drift_threshold": result.drift_threshold, "features": result.comparators},
        "splits": {
            split: {"num_examples": count,
                    "anomalies": [a.to_json() for a in by_split[split]],
                    "drift": [d.to_json() for d in result.drift if d.split == split]}
            for split, count in result.splits.items()
        },
    }


def _tables(result: ValidationResult) -> list[tuple[str, tuple[str, ...], list[tuple[str, ...]]]]:
    """(title, header, rows) of every table, in report order; shared by markdown and HTML."""
    tables = []
    by_split = result.by_split()
    for split, count in result.splits.items():
        role = "baseline, checked against the schema" if split == result.baseline_split else \
            f"checked against the schema and {result.baseline_split}"
        rows = [(a.feature, a.kind, a.short_description, a.description, a.severity) for a in by_split[split]]
        tables.append((f"Split {split}: {count} examples ({role})", _ANOMALY_COLUMNS, rows))
        drift = [(d.feature, d.measure, f"{d.value:.4g}", f"{d.threshold:g}", "DRIFT" if d.exceeded else "ok")
                 for d in result.drift if d.split == split]
        if drift:
            tables.append((f"Drift of {split} against {result.baseline_split}", _DRIFT_COLUMNS, drift))
    comparators = [(name, c.get("measure", "-"), f"{c['threshold']:g}" if "threshold" in c else "-",
                    c.get("skipped", f"from {c.get('source')}")) for name, c in result.comparators.items()]
    tables.append(("Drift comparators", ("feature", "measure", "threshold", "note"), comparators))
    return tables


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(result: ValidationResult) -> str:
    lines = ["# Data validation", "", f"**{verdict(result)}**", ""]
    for title, header, rows in _tables(result):
        lines += [f"## {title}", ""]
        if not rows:
            lines += ["No anomalies.", ""]
            continue
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(_md_cell(cell) for cell in row) + " |" for row in rows]
        lines.append("")
    return "\n".join(lines)


def render_html(result: ValidationResult) -> str:
    colour = "#1a7f37" if result.passed else "#cf222e"
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>Data validation</title>",
             "<style>body{font-family:sans-serif}table{border-collapse:collapse;margin-bottom:1em}"
             "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}</style></head><body>",
             "<h1>Data validation</h1>",
             f"<p style='color:{colour};font-weight:bold'>{html.escape(verdict(result))}</p>"]
    for title, header, rows in _tables(result):
        parts.append(f"<h2>{html.escape(title)}</h2>")
        if not rows:
            parts.append("<p>No anomalies.</p>")
            continue
        parts.append("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>")
        parts += ["<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows]
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_reports(result: ValidationResult, out: OutputDir) -> dict[str, str]:
    """Stages report.md and report.html; returns kind -> final location (anomalies.json is the marker)."""
    storage.write_text(out.staged(MARKDOWN_NAME), render_markdown(result))
    storage.write_text(out.staged(HTML_NAME), render_html(result))
    return {kind: storage.join(out.root, name) for kind, name in
            (("markdown", MARKDOWN_NAME), ("html", HTML_NAME), ("json", JSON_NAME))}
