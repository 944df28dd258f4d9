"""The `shardflow` command: one subcommand per component, each a thin adapter over its `run(config)`."""
from __future__ import annotations

import argparse
import os
import sys
import warnings

# Before anything imports TensorFlow or the google clients (here, in Beam worker processes and in
# kfp.local's subprocesses, which inherit the environment): level 3 hides TF's "Unable to register
# cuDNN/cuFFT/cuBLAS factory" lines (logged at ERROR on every start, GPU or not); google-api-core's
# FutureWarnings about the Python version are not the user's business. Set either to see them.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning:google.api_core._python_version_support,"
                                        "ignore:pkg_resources is deprecated:UserWarning")
warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.")
# tensorflow_hub (imported by Beam's TensorFlow model handler) warns that setuptools' pkg_resources is deprecated.
warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)

from . import __version__  # noqa: E402
from .core.beam_options import unknown_flags, unknown_option_message  # noqa: E402
from .evaluator import cli as evaluator_cli  # noqa: E402
from .example_gen import cli as example_gen_cli  # noqa: E402
from .core.cloud_env import install_exit_guard  # noqa: E402
from .core.errors import ConfigError, ShardflowError  # noqa: E402
from .predict import cli as predict_cli  # noqa: E402
from .infra_validator import cli as infra_validator_cli  # noqa: E402
from .pusher import cli as pusher_cli  # noqa: E402
from .pipelines import cli as pipeline_cli  # noqa: E402
from .pipelines import schedule as schedule_cli  # noqa: E402
from .pipelines import submit as submit_cli  # noqa: E402
from .trainer import cli as trainer_cli  # noqa: E402
from .transform import cli as transform_cli  # noqa: E402
from .tuner import cli as tuner_cli  # noqa: E402
from .validation import cli as validation_cli  # noqa: E402


def _demo_data(args: argparse.Namespace, _: list[str]) -> int:
    from .demo_data import write_all

    for name, path in write_all(args.output).items():
        print(f"{name}: {path}")
    return 0


# (name, help, add_arguments, handler, passes Beam's own options through)
_COMMANDS = (
    ("example-gen", "CSV indexes of files → sharded TFRecords (Beam)",
     example_gen_cli.add_arguments, example_gen_cli.main, True),
    ("transform", "full-pass preprocessing of examples with tf.Transform (Beam)",
     transform_cli.add_arguments, transform_cli.main, True),
    ("validate", "TFDV checks of every split against train's schema and statistics",
     validation_cli.add_arguments, validation_cli.main, False),
    ("train", "stream shards through tf.data into a Keras model, export it",
     trainer_cli.add_arguments, trainer_cli.main, False),
    ("tune", "search the Trainer's hyperparameters (KerasTuner): best_hyperparameters.json for train",
     tuner_cli.add_arguments, tuner_cli.main, False),
    ("evaluate", "score a split, compare with a baseline, bless or not", evaluator_cli.add_arguments,
     evaluator_cli.main, False),
    ("infra-validate", "load the model in a TensorFlow-only process as TF Serving would: call, time, warm-up file",
     infra_validator_cli.add_arguments, infra_validator_cli.main, False),
    ("push", "copy a blessed model to a serving directory and repoint CURRENT.json",
     pusher_cli.add_arguments, pusher_cli.main, False),
    ("predict", "batch inference of a served model over a CSV index or examples (Beam RunInference)",
     predict_cli.add_arguments, predict_cli.main, True),
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
        command.set_defaults(handler=handler, passes_beam_args=passes_beam_args, command_parser=command)
    demo = commands.add_parser("demo-data", help="write the digits and segmentation demo data sets")
    demo.add_argument("--output", required=True)
    demo.set_defaults(handler=_demo_data, passes_beam_args=False, command_parser=demo)
    return parser


def _check_extra_flags(args: argparse.Namespace, extra: list[str]) -> None:
    """Flags the command does not define: Beam's own options pass through (example-gen, transform),
    anything else is a typo — Beam would only warn and the run would use the default."""
    unknown = unknown_flags(extra) if args.passes_beam_args else extra
    if unknown:
        known = [s for action in args.command_parser._actions for s in action.option_strings]
        raise ConfigError(unknown_option_message(unknown[0], args.command, known, args.passes_beam_args))


def main(argv: list[str] | None = None) -> int:
    """Runs one command; the only place a ShardflowError becomes one line on stderr and an exit status."""
    args, extra = build_parser().parse_known_args(argv)
    try:
        _check_extra_flags(args, extra)
        return args.handler(args, extra)
    except ShardflowError as err:
        print(f"shardflow {args.command}: error: {err}", file=sys.stderr)
        return err.exit_code


def console_main() -> None:
    """The `shardflow` executable: `main` in a process of its own, whose exit status survives
    tensorflow-io's teardown abort (cloud_env.install_exit_guard; never installed by a library call)."""
    install_exit_guard()
    sys.exit(main())


if __name__ == "__main__":
    console_main()
