"""What TF Serving serves: a model config naming exactly the version CURRENT.json names, written by every push.

TF Serving on its own serves the newest integer-named directory under its base path, whatever its state: a
push that lost the swap, a copy still arriving, a killed push's orphan. Started with
`--model_config_file=SERVING/models.config --model_config_file_poll_wait_seconds=S` it serves the versions
its config names, and nothing else (`model_version_policy { specific { versions: N } }`):

>>> print(render_model_config(TfServing("shardflow", "/artifacts/serving/7/model"), 7, serial=12), end="")
# Written by shardflow push from CURRENT.json (pointer serial 12): TF Serving serves exactly the version it names.
model_config_list {
  config {
    name: "shardflow"
    base_path: "/artifacts/serving/7/model"
    model_platform: "tensorflow"
    model_version_policy {
      specific {
        versions: 7
      }
    }
  }
}
>>> configured_version(render_model_config(TfServing(), 7))
7

The config is derived from the pointer, never the other way round: the pointer's compare-and-swap decides,
then `publish_model_config` writes the config of the version the pointer names now, by a compare-and-swap of
its own, so a late writer never puts back an older version (its token is stale: it reads the pointer again).
A push killed between the two leaves the config on the version served before, a gated one; the next push, a
rollback or `shardflow clean-serving` writes it. Each config names the pointer's `serial` (one more at every swap),
so no two configs of different pointers are the same bytes: a compare-and-swap whose token is the content's hash
(locally) or ETag (S3) is not fooled by a config rewritten to an earlier text (push 5, rollback to 4).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable

from ..core import storage
from ..core.errors import ConfigError
from .layout import tf_serving_base_path

MODEL_CONFIG = "models.config"
CONFIG_ATTEMPTS = 20  # a conflict means another push wrote it meanwhile: each attempt reads the pointer anew
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_VERSION = re.compile(r"^\s*versions:\s*(\d+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class TfServing:
    """`name`: the model's name in TF Serving (its REST path /v1/models/NAME); `base_path`: the serving
    directory as TF Serving reads it ('' : the serving directory itself, made absolute), e.g. a volume's mount
    point when the pusher writes to the bucket a sidecar syncs from."""

    name: str = "shardflow"
    base_path: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ConfigError(f"the TF Serving model name must be letters, digits, '.', '_' or '-', got {self.name!r}")
        if not isinstance(self.base_path, str) or '"' in self.base_path or "\\" in self.base_path:
            raise ConfigError(f"the TF Serving base path must be a path or URI without quotes, got {self.base_path!r}")


def render_model_config(serving: TfServing, version: int, serial: int = 0) -> str:
    """TF Serving's ModelServerConfig (text format) serving `version` alone; `serial`: the pointer's."""
    return (f"# Written by shardflow push from CURRENT.json (pointer serial {serial}): TF Serving serves exactly the "
            "version it names.\n"
            "model_config_list {\n  config {\n"
            f'    name: "{serving.name}"\n    base_path: "{serving.base_path}"\n    model_platform: "tensorflow"\n'
            "    model_version_policy {\n      specific {\n"
            f"        versions: {version}\n"
            "      }\n    }\n  }\n}\n")


def configured_version(text: str) -> int | None:
    """The version a config written by `render_model_config` serves (None: none, or not such a config)."""
    found = _VERSION.findall(text)
    return int(found[0]) if len(found) == 1 else None


def base_path_of(serving: TfServing, serving_dir: str) -> TfServing:
    """`serving` with its base path filled in: the serving directory, absolute, when none was given."""
    if serving.base_path:
        return serving
    location = serving_dir.rstrip("/") if storage.is_remote(serving_dir) else os.path.abspath(serving_dir)
    return TfServing(serving.name, location)


def publish_model_config(serving_dir: str, serving: TfServing,
                         read_pointer: Callable[[], dict[str, Any] | None]) -> int | None:
    """Makes SERVING/models.config serve the version of the pointer `read_pointer()` returns now; that version.

    None, and nothing written, when nothing is served. The config's token is read before the pointer, so a
    conflict means someone wrote the config after this read of the pointer: read both again."""
    location = storage.join(serving_dir, MODEL_CONFIG)
    serving = base_path_of(serving, serving_dir)
    for _ in range(CONFIG_ATTEMPTS):
        text, token = storage.read_with_token(location)
        pointer = read_pointer()
        if pointer is None:
            return None
        version = pointer["version"]
        served = TfServing(serving.name, tf_serving_base_path(serving.base_path, pointer))
        wanted = render_model_config(served, version, int(pointer.get("serial") or 0)).encode("utf-8")
        if text == wanted:
            return version
        try:
            storage.write_if(location, wanted, token)
            return version
        except storage.WriteConflict:
            continue
    raise storage.WriteConflict(f"{location} kept changing while being written ({CONFIG_ATTEMPTS} attempts)")
