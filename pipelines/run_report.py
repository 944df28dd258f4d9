"""The run report: one Markdown page a person reads at a glance (also what `shardflow run` prints).

It says whether the model was blessed and why; whether it loads and answers as served (the infra
validation, with latency per batch size); for every blessing check the candidate's value, the
baseline's (the served model, when there was one) and the difference, each with its 95% interval
(the difference's paired), and the gate rule that decided; the examples per split; the
first rejected rows with their file and reason (and where the rest are); the near-duplicate pairs
and the likely label errors, each counted with the file that lists them; the training rate.

    text = run_report(examples_manifest_dir, training_summary, evaluation)
"""
from __future__ import annotations

import json
from typing import Any

from ..core import storage
from ..core.manifest import read_manifest
from ..evaluator.config import BLESSING, METRICS
from ..example_gen.config import REJECTS_FILE
from ..infra_validator.config import REPORT as INFRA_REPORT
from ..trainer.outputs import SUMMARY_NAME as TRAINING_SUMMARY

SHOWN_REJECTS = 10


def report_from_outputs(examples_dir: str, model_dir: str, evaluation_dir: str, infra_dir: str) -> str:
    """The report from the steps' output directories (the run-report step's inputs)."""
    infra_report = storage.join(infra_dir, INFRA_REPORT)
    evaluation = {"metrics": storage.read_json(storage.join(evaluation_dir, METRICS)),
                  "blessing": storage.read_json(storage.join(evaluation_dir, BLESSING))}
    return run_report(examples_dir, storage.read_json(storage.join(model_dir, TRAINING_SUMMARY)), evaluation,
                      storage.read_json(infra_report) if storage.is_file(infra_report) else None)


def run_report(examples_dir: str, training: dict[str, Any], evaluation: dict[str, Any],
               serving_check: dict[str, Any] | None = None) -> str:
    """`serving_check`: the infra validation's report (infra_validation.json), when it ran."""
    manifest = read_manifest(examples_dir)
    blessing, metrics = evaluation["blessing"], evaluation["metrics"]
    rates = training.get("input_report", {})
    lines = [
        "# shardflow run",
        "",
        f"**Blessed: {'yes' if blessing.get('blessed') else 'no'}**" + _reasons(blessing),
        "",
        *_checks(blessing, metrics.get("baseline_model"), metrics.get("intervals")),
        *_serving_check(serving_check),
        "| split | examples |",
        "|---|---|",
        *(f"| {name} | {info.num_examples} |" for name, info in sorted(manifest.splits.items())),
        "",
        *_rejects(examples_dir, manifest.extra),
        *_near_duplicates(examples_dir, manifest.extra.get("near_duplicates") or {}),
        *_label_issues(metrics),
        f"Training: {training.get('optimizer_steps')} optimizer steps, "
        f"{rates.get('training_examples_per_second')} examples/s (input alone "
        f"{rates.get('input_examples_per_second')}: {rates.get('verdict')})",
        "",
        "| metric | value |",
        "|---|---|",
        *(f"| {name} | {value:.4f} |" for name, value in sorted(metrics.get("overall", {}).items())
          if isinstance(value, (int, float))),
    ]
    return "\n".join(lines) + "\n"


def _reasons(blessing: dict[str, Any]) -> str:
    reasons = blessing.get("reasons") or []
    return "" if not reasons else " — " + "; ".join(str(r) for r in reasons)


def _number(value: Any, signed: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def _with_interval(value: Any, interval: list | None, signed: bool = False) -> str:
    """`0.9120 [0.8950, 0.9280]`: the value and its 95% interval, when there is one."""
    text = _number(value, signed)
    if value is None or not interval or interval[0] is None or interval[1] is None:
        return text
    return f"{text} [{_number(interval[0], signed)}, {_number(interval[1], signed)}]"


def _gate_line(checks: list[dict[str, Any]], intervals: dict[str, Any] | None) -> list[str]:
    rule = checks[0].get("gate", "point")
    how = (f"95% intervals: {intervals.get('method')}, {intervals.get('resamples'):,} resamples, seed "
           f"{intervals.get('seed')}" if intervals else "no intervals")
    return [f"Gate: {rule} ({how})", ""]


def _checks(blessing: dict[str, Any], baseline_model: str | None, intervals: dict[str, Any] | None = None) -> list[str]:
    """Candidate, baseline and delta, with their 95% intervals, for every threshold and regression check."""
    checks = blessing.get("checks") or []
    if not checks:
        return []
    lines = [f"Baseline: {baseline_model}" if baseline_model else "Baseline: none (nothing served yet)", "",
             *_gate_line(checks, intervals),
             "| check | metric | candidate | baseline | delta | passed |", "|---|---|---:|---:|---:|---|"]
    for check in checks:
        passed = {True: "yes", False: "**no**", None: "skipped"}[check.get("passed")]
        lines.append(f"| {check['kind']} {check['rule']} | {check['metric']} | "
                     f"{_with_interval(check.get('candidate'), check.get('candidate_interval'))} | "
                     f"{_with_interval(check.get('baseline'), check.get('baseline_interval'))} | "
                     f"{_with_interval(check.get('delta'), check.get('delta_interval'), signed=True)} | {passed} |")
    return lines + [""]


def _near_duplicates(examples_dir: str, report: dict[str, Any]) -> list[str]:
    """ExampleGen's near-duplicate check in one line, naming the file that lists every pair by row."""
    if report.get("count") is None:  # off, or a manifest written before the check existed
        return []
    listed = report.get("file")
    where = (f"every pair listed in {_beside(examples_dir, listed)}" if listed  # older manifests: examples only
             else "examples under near_duplicates in manifest.json")
    return [f"Near-duplicate image pairs across splits: {report['count']} (perceptual hashes within "
            f"{report['distance']} bits; {where})", ""]


def _label_issues(metrics: dict[str, Any]) -> list[str]:
    """The Evaluator's label-issue count in one line, naming its files (beside metrics.json)."""
    issues = metrics.get("label_issues")
    if not issues:  # an evaluation written before the list existed
        return []
    if "file" not in issues:  # not searched (a detector): its note says why
        return [f"Likely label errors: not searched ({issues.get('note', 'no list')})", ""]
    named = "by CSV row" if issues.get("rows_named") else "by example position (the examples predate row provenance)"
    return [f"Likely label errors in split {metrics.get('split')}: {issues['count']} (ranked {named} in the "
            f"evaluation's {issues['file']}; the top 16 in {issues['sheet']})", ""]


def _beside(examples_dir: str, name: str) -> str:
    """A file the manifest names: relative to the examples' directory, or already a full location (spans)."""
    return name if storage.is_remote(name) or name.startswith("/") else storage.join(examples_dir, name)


def _serving_check(report: dict[str, Any] | None) -> list[str]:
    """The infra validation's verdict and the served model's latency per signature and batch size."""
    if report is None:
        return []
    verdict = "passed" if report.get("blessed") else "**failed**"
    lines = [f"Serving check (loaded and called in a TensorFlow-only process): {verdict} — "
             + "; ".join(str(r) for r in report.get("reasons") or []), ""]
    rows = report.get("latency") or []
    if rows:
        lines += [f"Load: {_number(report.get('load_seconds'))} s", "",
                  "| signature | batch | p50 ms | p99 ms |", "|---|---:|---:|---:|"]
        lines += [f"| {r.get('signature')} | {r.get('batch_size')} | {_number(r.get('p50_ms'))} | "
                  f"{_number(r.get('p99_ms'))} |" for r in rows]
    return lines + [""]


def _rejects(examples_dir: str, extra: dict[str, Any]) -> list[str]:
    """The reject counts, the first rejected rows (CSV, row, file, reason) and the file that lists them all."""
    count = int(extra.get("rejected", 0))
    lines = [f"Rejected rows: {count} {extra.get('rejected_by_reason', {}) or ''}".rstrip(), ""]
    rejects = storage.join(examples_dir, extra.get("rejects_file", REJECTS_FILE))
    if count == 0 or not storage.is_file(rejects):
        return lines
    rows = [json.loads(line) for line in storage.read_text(rejects).splitlines()[:SHOWN_REJECTS] if line.strip()]
    lines += ["| split | CSV | row | file | reason |", "|---|---|---:|---|---|"]
    lines += [f"| {r.get('split', '')} | {r.get('index', '')} | {r.get('row', '')} | {r.get('path', '')} | "
              f"{str(r.get('reason', '')).replace('|', '/')} |" for r in rows]
    shown = f"the first {len(rows)} of " if len(rows) < count else ""
    return lines + ["", f"Shown: {shown}{count} rejected rows; all of them: {rejects}", ""]
