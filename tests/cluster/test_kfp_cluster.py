"""Compiling for a cluster: the image is required, PVCs on every step, the GPU pool on Trainer and
Evaluator only, parameter defaults baked into the IR, and every bad flag refused through the real
`shardflow` CLI with exit code 2 and one line naming the value, before anything is compiled or sent.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fake_kfp_server import FakeKfpServer
from shardflow.cli import main
from shardflow.pipelines.compiler import compile_pipeline
from shardflow.pipelines.cluster_options import cluster_options
from shardflow.pipelines.params import required_parameters

IMAGE = "registry.example.com/ml/shardflow@sha256:" + "ab" * 32
NO_TOKEN = "/nonexistent/token"
GPU_STEPS = {"exec-tune", "exec-train", "exec-evaluate"}
MOUNTS = ["data=/data", "artifacts=/artifacts/"]
CLUSTER_FLAGS = ["--mount-pvc", MOUNTS[0], "--mount-pvc", MOUNTS[1], "--node-selector", "pool=gpu-l4",
                 "--node-selector", "cloud.google.com/gke-accelerator=nvidia-l4",
                 "--toleration", "nvidia.com/gpu:NoSchedule", "--toleration", "dedicated=ml:NoExecute"]


def _documents(path: str | Path) -> tuple[dict, dict]:
    spec, *platform = yaml.safe_load_all(Path(path).read_text())
    return spec, (platform[0] if platform else {})


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    """The pipeline compiled through `shardflow compile` with every cluster flag and two defaults."""
    path = tmp_path_factory.mktemp("compiled") / "pipeline.yaml"
    argv = ["compile", "--output", str(path), "--image", IMAGE, *CLUSTER_FLAGS,
            "--param", 'index=["train=/data/index/train.csv", "eval=/data/index/eval.csv"]',
            "--param", "data_root=/data", "--param", "drift_threshold=0.25", "--param", "validation_warn_only=true"]
    assert main(argv) == 0
    return _documents(path)


def test_every_step_mounts_the_pvcs_and_only_the_training_steps_and_evaluator_go_to_the_gpu_pool(
        compiled: tuple[dict, dict]) -> None:
    spec, platform = compiled
    steps = set(spec["deploymentSpec"]["executors"])
    assert GPU_STEPS < steps and len(steps) == 12  # with infra-validate and predict
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert set(executors) == steps
    for name, config in executors.items():
        mounts = [(m["pvcNameParameter"]["runtimeValue"]["constant"], m["mountPath"]) for m in config["pvcMount"]]
        assert mounts == [("data", "/data"), ("artifacts", "/artifacts")], name
        on_gpu = {"nodeSelector", "tolerations"} & set(config)
        assert on_gpu == ({"nodeSelector", "tolerations"} if name in GPU_STEPS else set()), name
    for name in GPU_STEPS:
        assert executors[name]["nodeSelector"]["labels"] == {"pool": "gpu-l4",
                                                             "cloud.google.com/gke-accelerator": "nvidia-l4"}
        assert executors[name]["tolerations"] == [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"}]
    images = {e["container"]["image"] for e in spec["deploymentSpec"]["executors"].values()}
    assert images == {IMAGE}


def test_compile_bakes_parameter_defaults_in_their_types(compiled: tuple[dict, dict]) -> None:
    spec, _ = compiled
    declared = spec["root"]["inputDefinitions"]["parameters"]
    assert declared["index"]["defaultValue"] == ["train=/data/index/train.csv", "eval=/data/index/eval.csv"]
    assert declared["data_root"]["defaultValue"] == "/data"
    assert declared["drift_threshold"]["defaultValue"] == 0.25
    assert declared["validation_warn_only"]["defaultValue"] is True
    assert required_parameters(spec) == ["run_record_dir", "serving_dir"]


def test_without_cluster_options_the_ir_has_no_platform_spec(tmp_path: Path) -> None:
    spec, platform = _documents(compile_pipeline(tmp_path / "p.yaml", IMAGE, cluster_options()))
    assert platform == {} and required_parameters(spec) == ["data_root", "index", "run_record_dir", "serving_dir"]


@pytest.mark.parametrize(("flags", "message"), [
    (["--mount-pvc", "data"], "--mount-pvc 'data': expected CLAIM=PATH"),
    (["--mount-pvc", "=/data"], "--mount-pvc '=/data': the claim name is empty"),
    (["--mount-pvc", "data=data"], "--mount-pvc 'data=data': the mount path 'data' is not absolute"),
    (["--mount-pvc", "Data_1=/data"], "--mount-pvc 'Data_1=/data': 'Data_1' is not a valid PVC name"),
    (["--mount-pvc", "data=/data", "--mount-pvc", "other=/data/"], "--mount-pvc 'other=/data/': /data is already"),
    (["--mount-pvc", "data=/"], "--mount-pvc 'data=/': a volume cannot be mounted over the root"),
    (["--node-selector", "pool"], "--node-selector 'pool': expected KEY=VALUE"),
    (["--node-selector", "pool=gpu l4"], "--node-selector 'pool=gpu l4': 'gpu l4' is not a valid label value"),
    (["--node-selector", "Bad_Prefix/pool=x"], "'Bad_Prefix/pool' is not a valid label key"),
    (["--node-selector", "pool=a", "--node-selector", "pool=b"], "--node-selector 'pool=b': pool is already"),
    (["--toleration", "nvidia.com/gpu"], "--toleration 'nvidia.com/gpu': expected KEY[=VALUE]:EFFECT"),
    (["--toleration", "nvidia.com/gpu:Never"], "effect 'Never' is not one of NoSchedule, PreferNoSchedule"),
    (["--toleration", "=x:NoSchedule"], "--toleration '=x:NoSchedule': '' is not a valid label key"),
    (["--param", "epochs=5"], "no parameter epochs; its parameters: baseline_model, beam_args, bootstrap_resamples, bootstrap_seed, data_root"),
    (["--param", "drift_threshold=high"], "drift_threshold='high': the pipeline declares drift_threshold as "
                                          "NUMBER_DOUBLE"),
    (["--param", "index=train.csv"], "index='train.csv': the pipeline declares index as LIST (JSON"),
    (["--param", "data_root"], "--param expects NAME=VALUE, got 'data_root'"),
    (["--image", "registry.example.com/shardflow@sha256:" + "0" * 64], "the all-zero digest is the k8s/ placeholder"),
    (["--image", "shardflow:latest"], "--image 'shardflow:latest': a tag is mutable; give the image by digest"),
    (["--image", "registry.example.com/shardflow"], "a tag is mutable"),
    (["--param", 'train_options=["--epohcs","40"]'], "train_options: shardflow train: error: unknown option --epohcs"),
    (["--param", 'validation_options=["--no-drfit","id"]'], "validation_options: shardflow validate: error: "
                                                            "unknown option --no-drfit"),
    (["--param", "regression_tolerance=lots"], "regression tolerance"),
    (["--no-cache", "evaluate"], "no_cache 'evaluate' is not a cached step"),
])
def test_bad_compile_flags_are_one_line_and_exit_2(flags: list[str], message: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    output = tmp_path / "pipeline.yaml"
    assert main(["compile", "--output", str(output), "--image", IMAGE, *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("shardflow compile: error: ") and err.count("\n") == 1 and message in err, err
    assert not output.exists()


def test_a_tag_is_compiled_only_with_allow_mutable_image(tmp_path: Path) -> None:
    output = tmp_path / "pipeline.yaml"
    assert main(["compile", "--output", str(output), "--image", "shardflow:0.1.0", "--allow-mutable-image"]) == 0
    assert "image: shardflow:0.1.0" in output.read_text()


def test_submit_checks_the_step_options_it_sends_before_sending(capsys: pytest.CaptureFixture) -> None:
    with FakeKfpServer() as server:
        assert main(["submit", "--host", server.url, "--image", IMAGE, "--token-path", NO_TOKEN,
                     "--param", 'index=["train=/data/t.csv"]', "--param", "data_root=/data",
                     "--param", "serving_dir=/artifacts/serving", "--param", "run_record_dir=/artifacts/runs",
                     "--param", 'train_options=["--epohcs","40"]']) == 2
        assert server.requests == []
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown option --epohcs (not a shardflow train option); did you mean --epochs?" in err


def test_compile_without_an_image_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["compile", "--output", str(tmp_path / "pipeline.yaml")])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "shardflow compile: error: the following arguments are required: --image"
    assert "Traceback" not in err and not (tmp_path / "pipeline.yaml").exists()


@pytest.mark.parametrize("command", [["submit"], ["schedule", "--cron", "0 3 * * *"]])
def test_schedule_and_submit_need_exactly_one_of_image_and_package(command: list[str], tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    host = ["--host", "http://127.0.0.1:9"]
    for extra, refusal in (([], "one of the arguments --image --pipeline-package is required"),
                           (["--image", IMAGE, "--pipeline-package", "p.yaml"], "not allowed with argument")):
        with pytest.raises(SystemExit) as exited:
            main([*command, *host, *extra])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert refusal in err.splitlines()[-1] and "Traceback" not in err
    # Cluster flags belong to a compilation: with a compiled package they are refused, not ignored.
    package = tmp_path / "pipeline.yaml"
    compile_pipeline(package, IMAGE)
    assert main([*command, *host, "--pipeline-package", str(package), "--mount-pvc", "data=/data"]) == 2
    assert "--mount-pvc, --node-selector and --toleration are compiled into the pipeline" in capsys.readouterr().err
    assert main([*command, *host, "--image", IMAGE, "--toleration", "gpu:Sometimes"]) == 2
    assert capsys.readouterr().err.startswith("shardflow " + command[0] + ": error: --toleration 'gpu:Sometimes'")


def test_submit_with_an_image_compiles_the_cluster_options_into_the_run(capsys: pytest.CaptureFixture) -> None:
    with FakeKfpServer() as server:
        assert main(["submit", "--host", server.url, "--image", IMAGE, *CLUSTER_FLAGS, "--token-path", NO_TOKEN,
                     "--param", 'index=["train=/data/t.csv"]', "--param", "data_root=/data",
                     "--param", "serving_dir=/artifacts/serving", "--param", "run_record_dir=/artifacts/runs"]) == 0
    (request,) = server.requests_to("POST", "/runs")
    sent = request.body["pipeline_spec"]
    executors = sent["platform_spec"]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert {name for name, config in executors.items() if "tolerations" in config} == GPU_STEPS
    assert all(len(config["pvcMount"]) == 2 for config in executors.values())
    assert request.body["runtime_config"]["parameters"]["index"] == ["train=/data/t.csv"]
