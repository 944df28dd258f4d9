"""`shardflow track`'s options: which runs of an output directory go to which tracking server and registry.

>>> TrackConfig(output="runs/digits", tracking_uri="http://127.0.0.1:5000").experiment_name
'digits'
>>> TrackConfig(output="runs/digits", tracking_uri="", runs=())
Traceback (most recent call last):
...
shardflow.core.errors.ConfigError: tracking_uri: give a tracking server's URI (http://HOST:PORT, sqlite:///F.db, file:DIR)
>>> TrackConfig(output="runs/digits", tracking_uri="file:/tmp/t", alias="v2")
Traceback (most recent call last):
...
shardflow.core.errors.ConfigError: alias 'v2': MLflow reserves 'latest' and v<number>; letters, digits, '_' and '-'
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import ConfigError
from ..core.run_layout import JOB_NAME, PIPELINE_ROOT

DEFAULT_ALIAS = "champion"
_ALIAS = re.compile(r"^[A-Za-z0-9_-]+$")


def check_alias(alias: str) -> None:
    """ConfigError unless MLflow takes `alias` as a registry alias."""
    if not _ALIAS.match(alias) or alias == "latest" or re.match(r"^v\d+$", alias):
        raise ConfigError(f"alias {alias!r}: MLflow reserves 'latest' and v<number>; letters, digits, '_' and '-'")


@dataclass(frozen=True, kw_only=True)
class TrackConfig:
    """Send the finished runs of `output` (a `shardflow run --output` directory; `runs`: only these jobs) to
    `tracking_uri`, in `experiment` (default: the output folder's name), and make the registry's
    `registered_model` (default: that name too; "" for none) follow output/serving's CURRENT.json, with
    `alias` on the version it serves."""

    output: str
    tracking_uri: str
    experiment: str | None = None
    runs: tuple[str, ...] = ()
    registered_model: str | None = None
    alias: str = DEFAULT_ALIAS

    def __post_init__(self) -> None:
        if not self.output:
            raise ConfigError("output: give the directory `shardflow run --output` wrote")
        if not self.tracking_uri:
            raise ConfigError("tracking_uri: give a tracking server's URI (http://HOST:PORT, sqlite:///F.db, file:DIR)")
        check_alias(self.alias)
        for job in self.runs:
            if not JOB_NAME.fullmatch(job):
                raise ConfigError(f"runs: {job!r} is not a run's name (shardflow-YYYY-MM-DD-HH-MM-SS-ffffff)")
        if self.experiment == "":
            raise ConfigError("experiment: give a name, or leave it out for the output folder's name")

    @property
    def experiment_name(self) -> str:
        return self.experiment or Path(self.output).resolve().name

    @property
    def model_name(self) -> str:
        return Path(self.output).resolve().name if self.registered_model is None else self.registered_model

    def check_inputs(self) -> None:
        """The output directory holds runs, and each run named is one of them."""
        root = Path(self.output) / PIPELINE_ROOT
        if not root.is_dir():
            raise ConfigError(f"output {self.output!r} holds no pipeline run ({PIPELINE_ROOT}/ is missing)")
        for job in self.runs:
            if not (root / job).is_dir():
                raise ConfigError(f"runs: {job!r} is not in {root}")
