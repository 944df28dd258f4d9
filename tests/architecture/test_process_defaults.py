"""One owner of the process defaults: only components/core/process_defaults.py assigns TensorFlow's log level
and legacy Keras.

The check reads text (nothing imported): every line of the scanned trees that assigns `TF_CPP_MIN_LOG_LEVEL`
or `TF_USE_LEGACY_KERAS` (`setdefault("NAME", …)`, `env["NAME"] = …`, `{"NAME": …}`, `NAME=…`, `NAME ?= …`,
`export NAME`, `putenv`) is an offender. Reading or removing one (`environ.get`, `name != "NAME"`, a
tuple of names to inherit, a test that drops one to see what a user sees) is not. k8s/Dockerfile may set
one, to the owner's value: the test checks they agree. `test_a_planted_assignment_is_caught` proves each
form fires. Every entry point of ENTRY_POINTS calls `apply_process_defaults()`.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from shardflow.core.process_defaults import LEGACY_KERAS, PROCESS_DEFAULTS, TF_LOG_LEVEL

REPO = Path(__file__).resolve().parents[2]
THIS = Path(__file__).resolve()  # its planted examples are assignments
OWNER = REPO / "components" / "core" / "process_defaults.py"
SCANNED_TREES = ("components", "pipelines", "tfx_adapter", "benchmarks", "testkit", "tests", "tests_tfx")
SCANNED_FILES = ("Makefile",)
DOCKERFILE = REPO / "k8s" / "Dockerfile"
# The process entry points: the command, a step (its body and the local step worker), `make bench`, the tests.
ENTRY_POINTS = ("components/cli.py", "pipelines/step_bodies.py", "pipelines/step_worker.py", "benchmarks/run_all.py",
                "tests/conftest.py", "tests_tfx/conftest.py")
_NAME = f"(?:{TF_LOG_LEVEL}|{LEGACY_KERAS})"
ASSIGNMENT = re.compile(
    rf"""setdefault\(\s*["']{_NAME}["']          # os.environ.setdefault("NAME", ...)
       | \[\s*["']{_NAME}["']\s*\]\s*=(?!=)      # env["NAME"] = ...
       | ["']{_NAME}["']\s*:                     # {{"NAME": ...}}
       | putenv\(\s*["']{_NAME}["']              # os.putenv("NAME", ...)
       | \bexport\s+{_NAME}\b                    # export NAME (shell, Makefile)
       | (?<!`)\b{_NAME}\s*[?:+]?=(?!=)\s*(?P<value>[^\s\\"'`]*)  # NAME=..., NAME ?= ... (shell, Makefile, ENV)
    """, re.VERBOSE)


def assignments(text: str) -> list[tuple[int, str, str]]:
    """(line number, name, value when written as NAME=value, else '') of each assignment in `text`.

    >>> assignments('env = {**os.environ, "TF_USE_LEGACY_KERAS": "1"}\\nos.environ.get("TF_USE_LEGACY_KERAS")')
    [(1, 'TF_USE_LEGACY_KERAS', '')]
    """
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in ASSIGNMENT.finditer(line):
            name = TF_LOG_LEVEL if TF_LOG_LEVEL in match.group(0) else LEGACY_KERAS
            found.append((number, name, match.group("value") or ""))
    return found


def scanned_files() -> list[Path]:
    files = [REPO / name for name in SCANNED_FILES]
    for tree in SCANNED_TREES:
        files += [path for path in sorted((REPO / tree).rglob("*.py")) if path not in (OWNER, THIS) and "golden" not in path.parts]
    return files


def offenders(texts: dict[Path, str]) -> list[str]:
    """`path:line NAME` for every assignment of a process default in `texts` (each file's text)."""
    return [f"{path.relative_to(REPO)}:{number} {name}" for path, text in texts.items()
            for number, name, _ in assignments(text)]


def test_only_the_owner_assigns_the_process_defaults() -> None:
    texts = {path: path.read_text(encoding="utf-8") for path in scanned_files()}
    assert offenders(texts) == [], "set them in components/core/process_defaults.py only"


def test_every_entry_point_applies_the_defaults() -> None:
    missing = [path for path in ENTRY_POINTS if "apply_process_defaults()" not in (REPO / path).read_text()]
    assert missing == []


def test_the_image_sets_only_the_owners_values() -> None:
    found = assignments(DOCKERFILE.read_text(encoding="utf-8"))
    assert found, "k8s/Dockerfile no longer sets legacy Keras: drop this test's Dockerfile check"
    assert all(value == PROCESS_DEFAULTS[name] for _, name, value in found), found


@pytest.mark.parametrize("line", [
    'os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")',
    "env['TF_USE_LEGACY_KERAS'] = '1'",
    'env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}',
    'os.putenv("TF_USE_LEGACY_KERAS", "1")',
    "export TF_CPP_MIN_LOG_LEVEL ?= 2",
    'subprocess.run("TF_USE_LEGACY_KERAS=1 python train.py", shell=True)',
])
def test_a_planted_assignment_is_caught(line: str) -> None:
    planted = REPO / "components" / "planted_bad_example.py"  # a path under a scanned tree, never written
    text = f"import os\n{line}\n"
    found = assignments(text)
    assert [number for number, _, _ in found] == [2]
    assert offenders({planted: text}) == [f"components/planted_bad_example.py:2 {found[0][1]}"]


@pytest.mark.parametrize("line", [
    'env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}',
    'assert os.environ.get("TF_USE_LEGACY_KERAS") == "1"',
    'INHERITED = ("PATH", "TF_USE_LEGACY_KERAS", "TF_CPP_MIN_LOG_LEVEL")',
    'os.environ.pop("TF_USE_LEGACY_KERAS", None)',
    "after `TF_USE_LEGACY_KERAS=1` is set (the command sets it)",
])
def test_reading_or_removing_one_is_not_an_assignment(line: str) -> None:
    assert assignments(line) == []

