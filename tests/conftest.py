"""Shared test set-up: quiet TensorFlow, tf-keras, the test tiers, and the session's servers."""
from __future__ import annotations

from shardflow.core.process_defaults import apply_process_defaults

apply_process_defaults()  # the command's and a step's own, before any test imports TensorFlow

import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Iterator  # noqa: E402

import pytest  # noqa: E402

from gcs_server import GcsServer  # noqa: E402
from mlflow_server import MlflowServer  # noqa: E402
from quiet_machine import while_testing  # noqa: E402
from s3_server import S3Server  # noqa: E402

pytest_plugins = ["shared_fixtures"]  # the session's shared data sets and runs

_exit_status: list[int] = []

TIERS = ("unit", "pipeline", "cluster")
# A folder's tier, for the tests that name none: a component's folder runs components (pipeline) unless
# a module or test says `unit` (pytest.ini describes each tier).
FOLDER_TIERS = {"architecture": "unit", "cluster": "cluster"}
SERVER_FIXTURES = frozenset({"s3_server", "s3_bucket", "gcs_server", "s3_unconditional_server",
                             "s3_replace_unchecked_server", "mlflow_server"})  # a test that uses one is `cluster`


def tier_of(item: pytest.Item, tests_root: Path) -> str:
    """A test's one tier: `cluster` if it uses a server; else its closest tier marker (the test's
    own, then its module's); else its folder's; else `pipeline`. A doctest collected from a source
    file (pytest --doctest-modules on it) is `unit`."""
    if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
        return "cluster"
    named = next((mark.name for mark in item.iter_markers() if mark.name in TIERS), None)
    if named or not item.path.is_relative_to(tests_root):
        return named or "unit"
    return FOLDER_TIERS.get(item.path.relative_to(tests_root).parts[0], "pipeline")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--tier", choices=TIERS, action="append", default=[],
                     help="run only the tests of this tier (repeatable); make test runs every tier")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Each test (its fixtures too) holds the shared side of quiet_machine's lock: a test timing something
    takes the machine to itself (`machine_to_itself`) between two tests of the other xdist worker."""
    with while_testing(item.config):
        yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Gives each test its one tier (a user property: s3_bucket reads it, junit XML shows it); keeps the --tier ones."""
    tests_root, wanted = Path(__file__).parent, config.getoption("--tier")
    kept, dropped = [], []
    for item in items:
        tier = tier_of(item, tests_root)
        item.user_properties.append(("tier", tier))
        (kept if not wanted or tier in wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """One moto S3 server for the session; the AWS variables point every layer at it."""
    server = S3Server(tmp_path_factory.mktemp("moto"))
    saved = {k: os.environ.get(k) for k in server.env}
    os.environ.update(server.env)
    yield server
    server.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _lax_s3_server(tmp_path_factory: pytest.TempPathFactory, ignore: tuple[str, ...]) -> Iterator[S3Server]:
    server = S3Server(tmp_path_factory.mktemp("moto-lax"), ignore=ignore)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3_unconditional_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A moto S3 server that drops If-Match and If-None-Match from every request: a store without conditional
    writes. It leaves the AWS variables to s3_server: a test points them at it (its `env`) for itself."""
    yield from _lax_s3_server(tmp_path_factory, ("If-Match", "If-None-Match"))


@pytest.fixture(scope="session")
def s3_replace_unchecked_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """As s3_unconditional_server, but only If-Match is dropped: creates are conditional, replaces are not."""
    yield from _lax_s3_server(tmp_path_factory, ("If-Match",))


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    """`mlflow server` on loopback (SQLite store, served artifacts): the tracking tests' server."""
    server = MlflowServer(tmp_path_factory.mktemp("mlflow"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GcsServer]:
    """fake-gcs-server for the session; STORAGE_EMULATOR_HOST points google-cloud-storage at it."""
    from shardflow.core import storage

    server = GcsServer(tmp_path_factory.mktemp("gcs"))
    saved = os.environ.get("STORAGE_EMULATOR_HOST")
    os.environ.update(server.env)
    storage.forget_clients()  # a gs:// client made before would not know the emulator
    yield server
    storage.forget_clients()
    server.stop()
    if saved is None:
        os.environ.pop("STORAGE_EMULATOR_HOST", None)
    else:
        os.environ["STORAGE_EMULATOR_HOST"] = saved


@pytest.fixture
def s3_bucket(s3_server: S3Server, request: pytest.FixtureRequest) -> str:
    """A fresh, empty bucket on the session's S3 server."""
    if dict(request.node.user_properties).get("tier") != "cluster":  # asked for at run time, so tier_of missed it
        pytest.fail(f"{request.node.nodeid} uses the S3 server: mark it (or its parameter) cluster")
    return s3_server.bucket()


@pytest.fixture
def empty_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory for the test: a run on object storage must leave nothing in it."""
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _exit_status.append(int(exitstatus))


def pytest_unconfigure(config: pytest.Config) -> None:
    # tensorflow-io's s3 plugin aborts in interpreter teardown after the work is done (see
    # shardflow.core.exit_guard.install_exit_guard); keep pytest's real exit status.
    if "tensorflow_io" in sys.modules and _exit_status:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status[-1])
