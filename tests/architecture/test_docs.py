"""README.md and docs/ cannot rot: real flags, links that resolve, generated figures and picture, one page per topic."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
import yaml

import doc_checks
from benchmarks import docs_page
from benchmarks.suites import SUITES
from shardflow.cli import build_parser
from shardflow.pipelines.diagram import mermaid

REPO = doc_checks.REPO
DOCS = doc_checks.doc_files()
TOPICS = ("example-gen", "validation", "transform", "trainer", "evaluator", "push", "infra-validation", "predict",
          "near-duplicates", "label-issues", "tuning", "photos", "photo-models", "serving", "storage", "pipeline", "retraining",
          "tfx", "cluster", "kserve", "errors", "benchmarks", "architecture", "data-service")


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_every_command_line_uses_flags_the_cli_has(path: Path) -> None:
    bad = {command: unknown for command in doc_checks.commands_in(path.read_text())
           if (unknown := doc_checks.unknown_in(command))}
    assert not bad, f"{path.name}: flags the CLI does not have: {bad}"


def test_the_docs_show_commands_of_every_component() -> None:
    """Guards the extraction itself: it finds the commands the pages are about."""
    found = {command.split()[1] for path in DOCS for command in doc_checks.commands_in(path.read_text())}
    assert {"example-gen", "validate", "transform", "train", "tune", "evaluate", "infra-validate", "push", "predict",
            "find-label-issues", "compile", "run", "schedule", "submit", "demo-data"} <= found


def test_a_flag_renamed_in_the_cli_and_not_in_the_docs_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    renamed = _parsers_with_renamed("train", "--epochs", "--num-epochs")
    monkeypatch.setattr(doc_checks, "_parsers", lambda: renamed)
    failures = [(path.name, unknown) for path in DOCS for command in doc_checks.commands_in(path.read_text())
                if (unknown := doc_checks.unknown_in(command))]
    assert ("README.md", ["train --epochs"]) in [(name, [u for u in unknown if "--epochs" in u])
                                                  for name, unknown in failures]
    # inside `run`'s pass-through options too: `--train-args "--epochs 3"`
    assert doc_checks.unknown_in('shardflow run --index train=t.csv --train-args "--epochs 3"') == ["train --epochs"]
    assert doc_checks.unknown_in("shardflow train --num-epochs 3") == []


def test_typos_and_unknown_subcommands_are_caught() -> None:
    assert doc_checks.unknown_in("shardflow example-gen --resise 16x16 --runner DaskRunner") == ["example-gen --resise"]
    assert doc_checks.unknown_in("shardflow evaluate --runner DaskRunner") == ["evaluate --runner"]  # no Beam options
    assert doc_checks.unknown_in("shardflow exampel-gen --index x") == ["no subcommand 'exampel-gen'"]


def _parsers_with_renamed(command: str, old: str, new: str) -> dict[str, argparse.ArgumentParser]:
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser = commands.choices[command]
    action = next(a for a in parser._actions if old in a.option_strings)
    action.option_strings = [new if s == old else s for s in action.option_strings]
    return dict(commands.choices)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_every_relative_link_resolves(path: Path) -> None:
    assert doc_checks.broken_links(path) == []


def test_a_broken_link_or_heading_is_caught(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Top\n\n## Flags and outputs\n")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md) [ok](a.md#flags-and-outputs) [gone](c.md) [bad](a.md#nope) [web](https://x.org/y)\n")
    assert doc_checks.broken_links(page) == ["c.md (no such file)", "a.md#nope (no such heading)"]


def test_the_readme_is_a_landing_page() -> None:
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    linked = set(re.findall(r"\(docs/([\w-]+)\.md", text))
    assert set(TOPICS) <= linked, f"README does not link: {sorted(set(TOPICS) - linked)}"


@pytest.mark.parametrize("topic", TOPICS)
def test_every_topic_has_a_page_that_starts_with_what_it_lets_you_do(topic: str) -> None:
    text = (REPO / "docs" / f"{topic}.md").read_text()
    first_paragraph = text.split("\n\n")[1]
    assert first_paragraph.startswith("What this page lets you do"), first_paragraph[:80]
    if topic not in ("architecture", "benchmarks"):  # then the flags, then the outputs
        sections = re.findall(r"^## (\w+)", text, re.M)
        flags = next(i for i, name in enumerate(sections) if name in ("Flags", "Parameters"))
        assert sections.index("Outputs") == flags + 1, sections[:4]


def test_the_benchmarks_page_is_generated_from_the_results() -> None:
    assert (REPO / "docs" / "benchmarks.md").read_text() == docs_page.render(), (
        "docs/benchmarks.md differs from benchmarks/results/: run `python -m benchmarks.docs_page`")


def test_the_readme_benchmark_table_is_generated_from_the_results() -> None:
    text = (REPO / "README.md").read_text()
    assert docs_page.START in text and docs_page.END in text
    assert docs_page.readme_with_summary(text) == text, "run `python -m benchmarks.docs_page`"


def test_targets_are_found_wherever_a_suite_records_them() -> None:
    result = {"met": {"rate_ratio": True, "rss_growth": False},
              "targets": [{"target": "steady ≥ 0.85 × (b)", "met": True}, {"target": "unknown", "met": None}]}
    assert docs_page.targets(result) == {"rate_ratio": True, "rss_growth": False, "steady ≥ 0.85 × (b)": True}


def test_the_benchmarks_page_shows_every_suite_with_its_command_machine_and_load(tmp_path: Path) -> None:
    page = docs_page.render(tmp_path)  # no results: each suite says how to measure it
    assert [f'<a id="{name}"></a>' in page for name in SUITES] == [True] * len(SUITES)
    assert page.count("Not measured yet") == len(SUITES)
    for name in SUITES:
        path = docs_page.RESULTS / f"{name}.json"
        if path.is_file():
            section = docs_page.render().split(f'<a id="{name}"></a>')[1].split("<a id=")[0]
            assert "Measured 20" in section and "with `python -m benchmarks.run_all" in section
            assert "Machine: " in section and re.search(r"\b(not )?quiet \((other processes used|load average)", section)


def test_the_readme_picture_is_the_compiled_pipeline() -> None:
    ir = next(yaml.safe_load_all((REPO / "tests" / "golden" / "pipeline.yaml").read_text()))
    picture = re.search(r"```mermaid\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert picture, "README.md has no mermaid picture"
    assert picture.group(1).strip() == mermaid(ir), (
        "regenerate it: python -m shardflow.pipelines.diagram tests/golden/pipeline.yaml")


@pytest.mark.parametrize("module", ["benchmarks.machine", "benchmarks.suites", "benchmarks.docs_page", "doc_checks"])
def test_the_docs_tooling_examples_run(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted and result.failed == 0
