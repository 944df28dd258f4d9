"""No credential reaches a manifest: every component records its options through core's `recorded_options`."""
from __future__ import annotations

import json

from shardflow.example_gen.config import ExampleGenConfig, IndexSpec
from shardflow.example_gen.report import options_json as example_gen_options
from shardflow.transform.config import TransformConfig
from shardflow.transform.report import options_json as transform_options

SECRET = "wJalrXUtnFEMI-K7MDENG"
BEAM = ("--runner=FnApiRunner", f"--s3_secret_access_key={SECRET}", "--s3_access_key_id", "AKIAEXAMPLE",
        "--s3_session_token", "token-123")


def test_transform_and_example_gen_record_beam_options_without_their_secrets() -> None:
    transform = transform_options(TransformConfig(examples="runs/examples", output="runs/t", beam_args=BEAM))
    example_gen = example_gen_options(ExampleGenConfig(indexes=(IndexSpec("data/all.csv"),), data_root="data",
                                                       output="out", beam_args=BEAM))
    for recorded in (transform, example_gen):
        text = json.dumps(recorded)
        assert SECRET not in text and "AKIAEXAMPLE" not in text and "token-123" not in text
        assert recorded["beam_args"] == ["--runner=FnApiRunner", "--s3_secret_access_key=<redacted>",
                                         "--s3_access_key_id", "<redacted>", "--s3_session_token", "<redacted>"]
    assert transform["examples"] == "runs/examples" and "indexes" not in example_gen
