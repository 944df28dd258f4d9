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
    validate = commands.add_parser("validate", help="TFDV checks of every split against train's schema and statistics")
    validation_cli.add_arguments(validate)
    validate.set_defaults(handler=validation_cli.main, passes_beam_args=False)
    train = commands.add_parser("train", help="stream shards through tf.data into a Keras model, export it")
    trainer_cli.add_arguments(train)
    train.set_defaults(handler=trainer_cli.main, passes_beam_args=False)
    evaluate = commands.add_parser("evaluate", help="score a split, compare with a baseline, bless or not")
    evaluator_cli.add_arguments(evaluate)
    evaluate.set_defaults(handler=evaluator_cli.main, passes_beam_args=True)  # it reports unknown flags itself
    compile_ = commands.add_parser("compile", help="compile the pipeline to KFP v2 IR for a Kubeflow cluster")
    pipeline_cli.add_compile_arguments(compile_)
    compile_.set_defaults(handler=pipeline_cli.compile_main, passes_beam_args=False)
    run = commands.add_parser("run", help="run the whole pipeline on this machine (kfp.local)")
    pipeline_cli.add_run_arguments(run)
    run.set_defaults(handler=pipeline_cli.run_main, passes_beam_args=False)
    schedule = commands.add_parser("schedule", help="create or update a KFP recurring run of the pipeline (cron, UTC)")
    schedule_cli.add_schedule_arguments(schedule)
    schedule.set_defaults(handler=schedule_cli.schedule_main, passes_beam_args=False)
    submit = commands.add_parser("submit", help="start one KFP run of the compiled pipeline (used by the k8s CronJob)")
    submit_cli.add_submit_arguments(submit)
    submit.set_defaults(handler=submit_cli.submit_main, passes_beam_args=False)
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
