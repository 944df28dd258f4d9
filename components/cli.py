"""The `shardflow` command: one subcommand per component, each a thin adapter over its `run(config)`."""
from __future__ import annotations

import argparse
import importlib.metadata
import sys

from .core.process_defaults import apply_process_defaults

# Before anything imports TensorFlow or the google clients (here, in Beam worker processes and in the step
# worker, which inherit the environment): core/process_defaults.py says which and why.
apply_process_defaults()

from . import __version__  # noqa: E402
from .commands import COMMANDS  # noqa: E402
from .core.exit_guard import install_exit_guard  # noqa: E402
from .core.errors import ShardflowError  # noqa: E402
from .core.flag_parser import check_extra, option_strings  # noqa: E402


def _demo_data(args: argparse.Namespace, _: list[str]) -> int:
    from .demo_data import write_all

    for name, path in write_all(args.output, mixed_boxes=args.mixed_boxes).items():
        print(f"{name}: {path}")
    return 0


COMMAND_GROUP = "shardflow.commands"  # the entry points other layers register commands under (setup.py)


def registered_commands() -> list[tuple]:
    """The commands other layers register, after the components' (commands.py): the pipeline's (compile, run,
    schedule, submit: pipelines/commands.py), as rows (name, help, add_arguments, handler). Found through
    the installed package's entry points, so this command layer never imports the layer above it."""
    rows: list[tuple] = []
    for entry in sorted(importlib.metadata.entry_points(group=COMMAND_GROUP), key=lambda e: e.name):
        rows += entry.load()
    return rows


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shardflow", description=__doc__)
    parser.add_argument("--version", action="version", version=f"shardflow {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    rows = [(c.name, c.help, c.cli.add_arguments, c.main, c.passes_beam_options) for c in COMMANDS.values()]
    rows += [(*row, False) for row in registered_commands()]  # none passes Beam's options through
    for name, help_text, add_arguments, handler, passes_beam_args in rows:
        command = commands.add_parser(name, help=help_text)
        add_arguments(command)
        command.set_defaults(handler=handler, passes_beam_args=passes_beam_args, command_parser=command)
    demo = commands.add_parser("demo-data", help="write the digits and segmentation demo data sets")
    demo.add_argument("--output", required=True)
    demo.add_argument("--mixed-boxes", type=int, default=0, metavar="N",
                      help="also N box images of any size and aspect (64-200 px, some gray, some EXIF-turned) in "
                           "OUTPUT/boxes_mixed (default 0: none)")
    demo.set_defaults(handler=_demo_data, passes_beam_args=False, command_parser=demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs one command; the only place a ShardflowError becomes one line on stderr and an exit status."""
    args, extra = build_parser().parse_known_args(argv)
    try:  # Beam's own options pass through (example-gen, transform, predict); any other unknown flag is a typo
        check_extra(args.command, extra, option_strings(args.command_parser), args.passes_beam_args)
        return args.handler(args, extra)
    except ShardflowError as err:
        print(f"shardflow {args.command}: error: {err}", file=sys.stderr)
        return err.exit_code


def console_main() -> None:
    """The `shardflow` executable: `main` in a process of its own, whose exit status survives
    tensorflow-io's teardown abort (exit_guard.install_exit_guard; never installed by a library call)."""
    install_exit_guard()
    sys.exit(main())


if __name__ == "__main__":
    console_main()
