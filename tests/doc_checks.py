"""Checks that keep README.md and docs/ true to the code: command lines against the CLI, links against files.

A command line is a `shardflow SUBCOMMAND ...` in a fenced block (with `\\` continuations, an
optional `$ ` prompt) or in an inline code span. Its flags are checked against that subcommand's
own parser (`shardflow.cli.build_parser`), Beam's pipeline options where the subcommand passes them
through, and the flags inside `run`'s quoted pass-through options (`--train-args "--epochs 3"`)
against the subcommand they go to.

>>> commands_in("Run `shardflow train --epochs 3` or\\n```\\n$ shardflow evaluate --model M \\\\\\n    --output O\\n```\\n")
['shardflow evaluate --model M --output O', 'shardflow train --epochs 3']
>>> slug("Where data can live: local disk, a volume, s3://, gs://")
'where-data-can-live-local-disk-a-volume-s3-gs'
"""
from __future__ import annotations

import argparse
import re
import shlex
from functools import lru_cache
from pathlib import Path

from shardflow.cli import build_parser
from shardflow.core.beam_options import unknown_flags

REPO = Path(__file__).resolve().parents[1]
# `run`'s options that carry another command's flags, as one string.
PASS_THROUGH = {"--example-gen-args": "example-gen", "--transform-args": "transform", "--train-args": "train",
                "--tune-args": "tune", "--validate-args": "validate", "--infra-validate-args": "infra-validate",
                "--predict-args": "predict", "--beam-args": "beam"}
_FENCE = re.compile(r"^```.*?$(.*?)^```", re.S | re.M)
_SPAN = re.compile(r"`(shardflow [^`]+)`")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_ANCHOR = re.compile(r'<a id="([^"]+)">')


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def commands_in(text: str) -> list[str]:
    """Every `shardflow ...` command line of a markdown text, continuations joined."""
    found = []
    for block in _FENCE.findall(text):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = " ".join(line.strip().removeprefix("$ ").split(" #")[0].split())
            if line.startswith("shardflow "):
                found.append(line)
    outside = _FENCE.sub("", text)
    found += [span.strip() for span in _SPAN.findall(outside)]
    return found


@lru_cache(maxsize=None)
def _parsers() -> dict[str, argparse.ArgumentParser]:
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(commands.choices)


def _nested(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A command's own subcommands (`data-service dispatcher|worker`), each with its flags."""
    return next((dict(a.choices) for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})


def _known(command: str) -> tuple[set[str], bool]:
    name, _, sub = command.partition(" ")
    parser = _parsers()[name]
    parser = _nested(parser)[sub] if sub else parser
    flags = {s for action in parser._actions for s in action.option_strings}
    return flags, bool(parser.get_default("passes_beam_args"))


def unknown_in(command_line: str) -> list[str]:
    """Flags of one command line that its subcommand does not have (`shardflow nope` names the subcommand)."""
    try:
        words = shlex.split(command_line.replace("[", " ").replace("]", " ").replace("|", " "))
    except ValueError:
        return [f"unparsable: {command_line}"]
    if len(words) < 2 or words[1].startswith("-") or words[1].endswith(":"):
        return []  # `shardflow --help`, `shardflow --version`, an error message `shardflow run: error: ...`
    if words[1] not in _parsers():
        return [f"no subcommand {words[1]!r}"]
    nested = _nested(_parsers()[words[1]])
    if nested and len(words) > 2 and words[2] not in nested:
        return [f"{words[1]}: no subcommand {words[2]!r}"]
    if nested and len(words) == 2:
        return []  # the command named, with no flags (`shardflow data-service`)
    return _unknown_flags(f"{words[1]} {words[2]}", words[3:]) if nested else _unknown_flags(words[1], words[2:])


def _unknown_flags(command: str, words: list[str]) -> list[str]:
    if command == "beam":
        return unknown_flags([w for w in words if w.startswith("--")])
    flags, takes_beam = _known(command)
    bad, carried = [], set()  # carried: positions of pass-through values, checked as their own command's
    for index, word in enumerate(words):
        if not word.startswith("--") or word == "--" or index in carried:
            continue
        name = word.split("=", 1)[0]
        if name not in flags and not (takes_beam and not unknown_flags([name])):
            bad.append(f"{command} {name}")
        elif name in PASS_THROUGH:
            inner = word.split("=", 1)[1] if "=" in word else (words[index + 1] if index + 1 < len(words) else "")
            carried.add(index + 1)
            bad += _unknown_flags(PASS_THROUGH[name], shlex.split(inner))
    return bad


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text())
    found = {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}
    return found | set(_ANCHOR.findall(text))


def broken_links(path: Path) -> list[str]:
    """Relative links of a markdown file whose target file, or heading, does not exist."""
    broken = []
    for target in _LINK.findall(_FENCE.sub("", path.read_text())):
        if re.match(r"^[a-z]+:", target):
            continue  # http:, https:, mailto:
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        if not destination.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target} (no such heading)")
    return broken
