"""The CLI's refusals, in-process through `shardflow.cli.main`: unknown flags, per-column options naming
no column, config errors before the heavy imports, messages that say what is wrong, one exit-code base
class, no CUDA lines or FutureWarnings on import, thresholds that can never be met."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from shardflow.cli import main
from shardflow.core import beam_options
from shardflow.core.errors import ConfigError, ShardflowError
from shardflow.core.manifest import IncompleteOutputError
from shardflow.core.model_info import MODEL_INFO_NAME
from shardflow.evaluator.config import EvaluationError, Threshold
from shardflow.validation.result import DataValidationError


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    """An index with columns image and label over a data root (no pixels needed: every check comes first)."""
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "idx.csv").write_text("image,label\na.png,x\n")
    return tmp_path


def _example_gen(data: Path, *flags: str) -> list[str]:
    return ["example-gen", "--index", str(data / "root" / "idx.csv"), "--data-root", str(data / "root"),
            "--output", str(data / "out"), *flags]


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines  # one line, no traceback
    return lines[0]


def test_unknown_flags_are_refused_beam_options_are_not(data: Path, capsys) -> None:
    assert main(_example_gen(data, "--resise", "16x16")) == 2
    assert _error(capsys) == ("shardflow example-gen: error: unknown option --resise (neither a shardflow "
                              "example-gen option nor a Beam pipeline option); did you mean --resize?")
    assert main(["transform", "--examples", str(data), "--output", str(data / "t"), "--batchsize", "64"]) == 2
    assert "unknown option --batchsize" in _error(capsys)
    assert main(["evaluate", "--model", "m", "--examples", "e", "--output", "o", "--runner=DirectRunner"]) == 2
    assert "unknown option --runner (not a shardflow evaluate option)" in _error(capsys)
    real = ["--runner", "apache_beam.runners.dask.dask_runner.DaskRunner", "--direct_num_workers=2",
            "--project=p", "--region", "europe-west1", "--temp_location=gs://b/t", "--sdk_container_image=i",
            "--dask_client_address=127.0.0.1:8786", "--direct_running_mode", "multi_processing"]
    assert beam_options.unknown_flags(real) == []
    assert beam_options.unknown_flags(["--projet=p", "-x"]) == ["--projet=p", "-x"]


def test_the_beam_option_list_is_the_installed_beams() -> None:
    assert beam_options.registered_option_names() == beam_options.BEAM_OPTION_NAMES


@pytest.mark.parametrize("flag,value", [("--resize", "imgae=16x16"), ("--channels", "lbl=rgb"),
                                        ("--storage", "imag=png"), ("--role", "nope=label")])
def test_per_column_options_must_name_a_column(data: Path, capsys, flag: str, value: str) -> None:
    assert main(_example_gen(data, flag, value)) == 2
    column = value.partition("=")[0]
    assert _error(capsys) == (f"shardflow example-gen: error: {flag} names columns ['{column}'] "
                              "that the index header ['image', 'label'] lacks")


_NO_HEAVY = """
import sys
from shardflow.cli import main
code = main(sys.argv[1:])
print(code, [m for m in ("tensorflow", "apache_beam", "tensorflow_data_validation") if m in sys.modules])
"""


@pytest.mark.parametrize("command", [("--resise", "16x16"), ("--resize", "imgae=16x16"), ("--num-shards", "0"),
                                     ("transform", "--batchsize", "64"), ("transform",), ("validate",), ("train",),
                                     ("evaluate", "--model", "m", "--threshold", "accuracy>1")])
def test_config_errors_come_before_the_heavy_imports(data: Path, command: tuple[str, ...]) -> None:
    if command[0].startswith("-"):
        argv = _example_gen(data, *command)
    else:  # --examples is not an output of the step before (no manifest.json)
        argv = [command[0], "--examples", str(data / "root"), "--output", str(data / "o"), *command[1:]]
        argv += ["--steps", "1"] if command[0] == "train" else []
        argv += ["--model", str(data)] if command[0] == "evaluate" and "--model" not in argv else []
    done = subprocess.run([sys.executable, "-c", _NO_HEAVY, *argv], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "2 []", done.stdout + done.stderr


def test_refusal_messages_say_what_is_wrong(data: Path, capsys) -> None:
    assert main(_example_gen(data)[:2] + [str(data / "root")] + _example_gen(data)[3:]) == 2
    assert _error(capsys).endswith(f"index file '{data / 'root'}' is a directory, not a CSV file")
    assert main(["transform", "--examples", str(data / "root"), "--output", str(data / "t")]) == 2
    assert _error(capsys).endswith("is not ExampleGen output (no manifest.json) — run example-gen first")
    transformed = data / "transformed"
    (transformed / "transform_graph").mkdir(parents=True)
    (transformed / "manifest.json").write_text("{}")
    assert main(["validate", "--examples", str(transformed), "--output", str(data / "v")]) == 2
    assert _error(capsys).endswith("holds Transform outputs; pass ExampleGen's output")
    (data / "mout" / "model").mkdir(parents=True)
    (data / "mout" / "model" / MODEL_INFO_NAME).write_text("{}")
    assert main(["evaluate", "--model", str(data / "mout"), "--examples", str(transformed),
                 "--output", str(data / "e")]) == 2
    assert _error(capsys).endswith(f"is a training output, not the model in it; did you mean {data / 'mout' / 'model'}?")
    assert main(["push", "--model", str(data / "mout"), "--evaluation", str(data / "e"),
                 "--serving-dir", str(data / "serving")]) == 2
    assert _error(capsys).endswith(f"did you mean {data / 'mout' / 'model'}?")
    (data / "empty.csv").write_text("")
    assert main(["example-gen", "--index", str(data / "empty.csv"), "--data-root", str(data / "root"),
                 "--output", str(data / "out")]) == 2
    assert "empty" in _error(capsys)


def test_one_base_class_carries_the_exit_code(monkeypatch, data: Path, capsys) -> None:
    from shardflow.example_gen.executor import TooManyRejectsError
    from shardflow.transform.report import UnseenLabelsError

    assert ConfigError.exit_code == 2 and issubclass(ConfigError, ShardflowError)
    for error in (TooManyRejectsError, UnseenLabelsError, DataValidationError, IncompleteOutputError, EvaluationError):
        assert issubclass(error, ShardflowError) and error.exit_code == 1
    import shardflow.example_gen.executor as executor

    def failing_run(config, echo=print):
        raise TooManyRejectsError("3 of 4 rows rejected")

    monkeypatch.setattr(executor, "run", failing_run)
    assert main(_example_gen(data)) == 1
    assert _error(capsys) == "shardflow example-gen: error: 3 of 4 rows rejected"
    cli_sources = "".join(p.read_text() for p in Path(executor.__file__).parents[1].glob("*/cli.py"))
    assert "return 2" not in cli_sources and "except" not in cli_sources  # no adapter maps exit codes


def test_importing_prints_no_cuda_lines_or_future_warnings(data: Path) -> None:
    code = "import sys; from shardflow.cli import main; import tensorflow, apache_beam; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={k: v for k, v in __import__("os").environ.items()
                               if k not in ("TF_CPP_MIN_LOG_LEVEL", "PYTHONWARNINGS")})
    assert done.stdout.strip() == "ok"
    assert "Unable to register" not in done.stderr and "FutureWarning" not in done.stderr, done.stderr


@pytest.mark.parametrize("rule", ["accuracy>=1.5", "accuracy>1", "mean_iou<0", "log_loss<0"])
def test_a_threshold_that_can_never_be_met_is_refused(rule: str, capsys) -> None:
    with pytest.raises(ConfigError, match="can never be met"):
        Threshold.parse(rule)
    assert main(["evaluate", "--model", "m", "--examples", "e", "--output", "o", "--threshold", rule]) == 2
    assert "can never be met" in _error(capsys)
    assert Threshold.parse("accuracy>=1").holds(1.0) and Threshold.parse("log_loss<=0").holds(0.0)
