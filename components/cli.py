"""The `shardflow` command: one subcommand per component, each a thin adapter over its `run(config)`."""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from . import __version__  # noqa: E402
from .evaluator import cli as evaluator_cli  # noqa: E402
from .example_gen import cli as example_gen_cli  # noqa: E402
from .core.errors import ConfigError  # noqa: E402
from .pusher import cli as pusher_cli  # noqa: E402
from .pipelines import cli as pipeline_cli  # noqa: E402
from .pipelines import schedule as schedule_cli  # noqa: E402
from .pipelines import submit as submit_cli  # noqa: E402
from .trainer import cli as trainer_cli  # noqa: E402
from .transform import cli as transform_cli  # noqa: E402
from .validation import cli as validation_cli  # noqa: E402


def _demo_data(args: argparse.Namespace, _: list[str]) -> int:
    from .demo_data import write_all

    for name, path in write_all(args.output).items():
        print(f"{name}: {path}")
    return 0


# (name, help, add_arguments, handler, passes unknown flags through as Beam options)
_COMMANDS = (
    ("example-gen", "CSV indexes of files → sharded TFRecords (Beam)",
     example_gen_cli.add_arguments, example_gen_cli.main, True),
    ("transform", "full-pass preprocessing of examples with tf.Transform (Beam)",
     transform_cli.add_arguments, transform_cli.main, True),
    ("validate", "TFDV checks of every split against train's schema and statistics",
     validation_cli.add_arguments, validation_cli.main, False),
    ("train", "stream shards through tf.data into a Keras model, export it",
     trainer_cli.add_arguments, trainer_cli.main, False),
    # evaluate reports unknown flags itself (exit 2), so they reach it
    ("evaluate", "score a split, compare with a baseline, bless or not", evaluator_cli.add_arguments,
     evaluator_cli.main, True),
    ("push", "copy a blessed model to a serving directory and repoint CURRENT.json",
     pusher_cli.add_arguments, pusher_cli.main, False),
    ("compile", "compile the pipeline to KFP v2 IR for a Kubeflow cluster",
     pipeline_cli.add_compile_arguments, pipeline_cli.compile_main, False),
    ("run", "run the whole pipeline on this machine (kfp.local)",
     pipeline_cli.add_run_arguments, pipeline_cli.run_main, False),
    ("schedule", "create or update a KFP recurring run of the pipeline (cron, UTC)",
     schedule_cli.add_schedule_arguments, schedule_cli.schedule_main, False),
    ("submit", "start one KFP run of the compiled pipeline (used by the k8s CronJob)",
     submit_cli.add_submit_arguments, submit_cli.submit_main, False),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shardflow", description=__doc__)
    parser.add_argument("--version", action="version", version=f"shardflow {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text, add_arguments, handler, passes_beam_args in _COMMANDS:
        command = commands.add_parser(name, help=help_text)
        add_arguments(command)
        command.set_defaults(handler=handler, passes_beam_args=passes_beam_args)
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
    from .core.cloud_env import exit_process

    exit_process(main())  # not sys.exit: tensorflow-io aborts in interpreter teardown after s3 use
