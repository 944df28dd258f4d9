"""The `shardflow` command: one subcommand per component, each a thin adapter over its `run(config)`."""
from __future__ import annotations

import argparse
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
from .pipelines import cli as pipeline_cli  # noqa: E402
from .pipelines import schedule as schedule_cli  # noqa: E402
from .pipelines import submit as submit_cli  # noqa: E402


def _demo_data(args: argparse.Namespace, _: list[str]) -> int:
    from .demo_data import write_all

    for name, path in write_all(args.output).items():
        print(f"{name}: {path}")
    return 0


# The pipeline's commands (name, help, add_arguments, handler), after the components' (commands.py); none
# passes Beam's options through.
_PIPELINE_COMMANDS = (
    ("compile", "compile the pipeline to KFP v2 IR for a Kubeflow cluster",
     pipeline_cli.add_compile_arguments, pipeline_cli.compile_main),
    ("run", "run the whole pipeline on this machine (its compiled IR, steps in a warm worker)", pipeline_cli.add_run_arguments, pipeline_cli.run_main),
    ("schedule", "create or update a KFP recurring run of the pipeline (cron, UTC)",
     schedule_cli.add_schedule_arguments, schedule_cli.schedule_main),
    ("submit", "start one KFP run of the compiled pipeline (used by the k8s CronJob)",
     submit_cli.add_submit_arguments, submit_cli.submit_main),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shardflow", description=__doc__)
    parser.add_argument("--version", action="version", version=f"shardflow {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    rows = [(c.name, c.help, c.cli.add_arguments, c.main, c.passes_beam_options) for c in COMMANDS.values()]
    for name, help_text, add_arguments, handler, passes_beam_args in rows + [(*row, False) for row in _PIPELINE_COMMANDS]:
        command = commands.add_parser(name, help=help_text)
        add_arguments(command)
        command.set_defaults(handler=handler, passes_beam_args=passes_beam_args, command_parser=command)
    demo = commands.add_parser("demo-data", help="write the digits and segmentation demo data sets")
    demo.add_argument("--output", required=True)
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
