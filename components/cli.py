"""The `shardflow` command: one subcommand per component, each a thin adapter over its `run(config)`."""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from . import __version__  # noqa: E402
from .example_gen import cli as example_gen_cli  # noqa: E402
from .core.errors import ConfigError  # noqa: E402
from .transform import cli as transform_cli  # noqa: E402


def _demo_data(args: argparse.Namespace, _: list[str]) -> int:
    from .demo_data import write_all

    for name, path in write_all(args.output).items():
        print(f"{name}: {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shardflow", description=__doc__)
    parser.add_argument("--version", action="version", version=f"shardflow {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    example_gen = commands.add_parser("example-gen", help="CSV indexes of files → sharded TFRecords (Beam)")
    example_gen_cli.add_arguments(example_gen)
    example_gen.set_defaults(handler=example_gen_cli.main, passes_beam_args=True)
    transform = commands.add_parser("transform", help="full-pass preprocessing of examples with tf.Transform (Beam)")
    transform_cli.add_arguments(transform)
    transform.set_defaults(handler=transform_cli.main, passes_beam_args=True)
    demo = commands.add_parser("demo-data", help="write the digits and segmentation demo data sets")
    demo.add_argument("--output", required=True)
    demo.set_defaults(handler=_demo_data, passes_beam_args=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not args.passes_beam_args:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.handler(args, extra)
    except ConfigError as err:
        print(f"shardflow {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
