"""The run report: one Markdown page a person reads at a glance (also what `shardflow run` prints).

    text = run_report(examples_manifest_dir, training_summary, evaluation)
"""
from __future__ import annotations

from typing import Any

from ..core.manifest import read_manifest


def run_report(examples_dir: str, training: dict[str, Any], evaluation: dict[str, Any]) -> str:
    manifest = read_manifest(examples_dir)
    blessing = evaluation["blessing"]
    overall = evaluation["metrics"].get("overall", {})
    rates = training.get("input_report", {})
    lines = [
        "# shardflow run",
        "",
        f"**Blessed: {'yes' if blessing.get('blessed') else 'no'}**" + _reasons(blessing),
        "",
        "| split | examples |",
        "|---|---|",
        *(f"| {name} | {info.num_examples} |" for name, info in sorted(manifest.splits.items())),
        "",
        f"Rejected rows: {manifest.extra.get('rejected', 0)} {manifest.extra.get('rejected_by_reason', {}) or ''}",
        "",
        f"Training: {training.get('optimizer_steps')} optimizer steps, "
        f"{rates.get('training_examples_per_second')} examples/s (input alone "
        f"{rates.get('input_examples_per_second')}: {rates.get('verdict')})",
        "",
        "| metric | value |",
        "|---|---|",
        *(f"| {name} | {value:.4f} |" for name, value in sorted(overall.items()) if isinstance(value, (int, float))),
    ]
    return "\n".join(lines) + "\n"


def _reasons(blessing: dict[str, Any]) -> str:
    reasons = blessing.get("reasons") or []
    return "" if not reasons else " — " + "; ".join(str(r) for r in reasons)
