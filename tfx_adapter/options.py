"""ImageExampleGen's parameters → `ExampleGenConfig`, through `shardflow example-gen`'s own parser.

No TFX import here: the translation is the CLI's (`example_gen.cli.add_arguments` and
`config_from_args`), so a flag means the same thing in a TFX pipeline as on the command line.

>>> config = example_gen_config({"train": "d/train.csv", "eval": "d/eval.csv"}, "d", ["--gzip"], "out")
>>> [(i.split, i.path) for i in config.indexes], config.compression
([('train', 'd/train.csv'), ('eval', 'd/eval.csv')], 'GZIP')
>>> example_gen_config("d/all.csv", "d", ["--split", "train=4", "--split", "eval=1"], "out").split_weights
(('train', 4), ('eval', 1))
"""
from __future__ import annotations

import argparse
import json
import os
from typing import Mapping, NoReturn, Sequence, Union

from shardflow.core.beam_options import unknown_flags
from shardflow.core.errors import ConfigError
from shardflow.example_gen import ExampleGenConfig
from shardflow.example_gen import cli as example_gen_cli

Index = Union[str, "os.PathLike[str]", Mapping[str, Union[str, "os.PathLike[str]"]]]


class _Parser(argparse.ArgumentParser):
    """argparse that raises ConfigError (one line) instead of printing usage and exiting the executor."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"ImageExampleGen options: {message}")


def plain_index(index: Index) -> Union[str, dict[str, str]]:
    """The index as JSON can hold it: a path string, or a `{split: path}` dict in the user's order."""
    if isinstance(index, (str, os.PathLike)):
        return os.fspath(index)
    paths = index.values() if isinstance(index, Mapping) else ()
    if not paths or not all(isinstance(p, (str, os.PathLike)) for p in paths):
        raise ConfigError(f"index must be a CSV path or a non-empty {{split: csv_path}} dict, got {index!r}")
    return {str(split): os.fspath(path) for split, path in index.items()}


def index_flags(index: Index) -> list[str]:
    """`{split: csv}` → named indexes; one CSV path → one index split by hashing (--split options)."""
    plain = plain_index(index)
    if isinstance(plain, str):
        return ["--index", plain]
    return [flag for split, path in plain.items() for flag in ("--index", f"{split}={path}")]


def example_gen_config(index: Index, data_root: Union[str, "os.PathLike[str]"], options: Sequence[str], output: str,
                       beam_args: Sequence[str] = ()) -> ExampleGenConfig:
    """The config `shardflow example-gen` would build from the same flags; TFX's Beam args come first,
    so a Beam option in `options` (this component's own) wins."""
    if isinstance(options, str) or not all(isinstance(o, str) for o in options):
        raise ConfigError(f"options must be a list of strings such as ['--resize', '28x28'], got {options!r}")
    data_root = os.fspath(data_root)
    parser = _Parser(prog="ImageExampleGen", allow_abbrev=False)
    example_gen_cli.add_arguments(parser)
    given = index_flags(index)
    args, extra = parser.parse_known_args([*given, "--data-root", data_root, "--output", output, *options])
    if len(args.index) != len(given) // 2 or args.data_root != data_root or args.output != output:
        raise ConfigError("options must not contain --index, --data-root or --output: "
                          "they are ImageExampleGen's index and data_root parameters and its output artifact")
    unknown = unknown_flags(extra)
    if unknown:
        raise ConfigError(f"ImageExampleGen options: {unknown[0]} is neither a shardflow example-gen option "
                          "nor a Beam pipeline option")
    config = example_gen_cli.config_from_args(args, [*beam_args, *extra])
    if config.uses_spans:  # a span window's shards stay in the span store, outside the artifact's Split-*/
        raise ConfigError("ImageExampleGen does not take span patterns ({SPAN}, {YYYY}{MM}{DD}): TFX reads "
                          "the artifact's Split-<name>/ folders; give one span's index per run")
    return config


def encode(value: object) -> str:
    """Execution properties are strings (they survive MLMD, the KFP IR and caching keys as they are)."""
    return json.dumps(value)  # dict order kept: it is the order of the splits


def decode(text: str) -> object:
    return json.loads(text)
