"""A whole TFX pipeline on shardflow's ImageExampleGen output, run with LocalDagRunner (one run, ~3 min).

ImageExampleGen → StatisticsGen → SchemaGen → ExampleValidator → Transform → Trainer → Evaluator →
Pusher on the digits; the checks read MLMD (the metadata sqlite), the artifacts and the pushed model.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

import digits_module
import digits_pipeline

MODULE_FILE = str(Path(__file__).with_name("digits_module.py"))
MIN_ACCURACY = 0.8
EXAMPLE_GEN_BEAM_ARGS = ["--direct_num_workers=3"]  # not the default of this 2-core machine


class Run:
    def __init__(self, root: Path, seconds: float):
        from ml_metadata.metadata_store import metadata_store
        from tfx.orchestration import metadata

        self.root, self.seconds = root, seconds
        self.store = metadata_store.MetadataStore(metadata.sqlite_metadata_connection_config(str(root / "mlmd.sqlite")))

    def artifacts(self, type_name: str) -> list:
        return self.store.get_artifacts_by_type(type_name)

    def one(self, type_name: str, producer: str):
        """The one artifact of that type the component `producer` wrote (Transform writes statistics,
        a schema and anomalies of its own, of the same types)."""
        found = [a for a in self.artifacts(type_name) if f"/{producer}/" in a.uri]
        assert len(found) == 1, f"{type_name} of {producer}: {len(found)} artifacts"
        return found[0]


@pytest.fixture(scope="module")
def run(digits: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    from tfx import v1 as tfx

    root = tmp_path_factory.mktemp("tfx")
    pipeline = digits_pipeline.create_pipeline(str(root / "pipeline"), str(digits), MODULE_FILE,
                                               str(root / "serving"), str(root / "mlmd.sqlite"),
                                               min_accuracy=MIN_ACCURACY, example_gen_beam_args=EXAMPLE_GEN_BEAM_ARGS)
    started = time.time()
    tfx.orchestration.LocalDagRunner().run(pipeline)
    return Run(root, time.time() - started)


def _custom(artifact, name: str):
    value = artifact.custom_properties[name]
    return value.string_value if value.HasField("string_value") else value.int_value


def test_every_component_ran_and_completed(run: Run):
    executions = run.store.get_executions()
    types = {t.id: t.name for t in run.store.get_execution_types()}
    names = sorted(types[e.type_id].rsplit(".", 1)[-1] for e in executions)
    assert names == sorted(["ImageExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator", "Transform",
                            "Trainer", "Evaluator", "Pusher"])
    from ml_metadata.proto import metadata_store_pb2

    assert {e.last_known_state for e in executions} == {metadata_store_pb2.Execution.COMPLETE}
    print(f"\nTFX pipeline: {run.seconds:.0f} s")


def test_examples_artifact_is_a_standard_one_with_counts_in_mlmd(run: Run, digits: Path):
    examples = run.one("Examples", "ImageExampleGen")
    rows = sum(len(open(digits / f"{s}.csv").readlines()) - 1 for s in ("train", "eval"))
    assert json.loads(examples.properties["split_names"].string_value) == ["train", "eval"]
    assert _custom(examples, "payload_format") == "FORMAT_TF_EXAMPLE"
    assert (_custom(examples, "rows"), _custom(examples, "accepted"), _custom(examples, "rejected")) == (rows, rows, 0)
    assert _custom(examples, "examples_train") + _custom(examples, "examples_eval") == rows
    assert _custom(examples, "runner") == "local process pool (workers=3)"  # with_beam_pipeline_args reached it
    uri = Path(examples.uri)
    for kept in ("manifest.json", "rejects.jsonl", "schema.pbtxt", "Split-train", "Split-eval"):
        assert (uri / kept).exists(), kept
    manifest = json.loads((uri / "manifest.json").read_text())
    assert manifest["leakage"]["count"] == _custom(examples, "leaked_contents")
    assert manifest["splits"]["eval"]["num_examples"] == _custom(examples, "examples_eval")


def test_tfx_components_read_the_examples(run: Run):
    import tensorflow_data_validation as tfdv
    from tensorflow_metadata.proto.v0 import anomalies_pb2

    examples = run.one("Examples", "ImageExampleGen")
    statistics = Path(run.one("ExampleStatistics", "StatisticsGen").uri)
    for split in ("train", "eval"):
        stats = tfdv.load_stats_binary(str(statistics / f"Split-{split}" / "FeatureStats.pb"))
        assert stats.datasets[0].num_examples == _custom(examples, f"examples_{split}")
        assert {f.path.step[0] for f in stats.datasets[0].features} == {"x", "y"}
    schema = tfdv.load_schema_text(str(Path(run.one("Schema", "SchemaGen").uri) / "schema.pbtxt"))
    assert {f.name for f in schema.feature} == {"x", "y"}
    for split in ("train", "eval"):
        anomalies = anomalies_pb2.Anomalies()
        diff = Path(run.one("ExampleAnomalies", "ExampleValidator").uri) / f"Split-{split}" / "SchemaDiff.pb"
        anomalies.ParseFromString(diff.read_bytes())
        assert not anomalies.anomaly_info, dict(anomalies.anomaly_info)


def test_model_blessed_and_pushed(run: Run):
    blessing = run.one("ModelBlessing", "Evaluator")
    assert _custom(blessing, "blessed") == 1 and (Path(blessing.uri) / "BLESSED").exists()
    pushed = run.one("PushedModel", "Pusher")
    assert _custom(pushed, "pushed") == 1
    assert (Path(_custom(pushed, "pushed_destination")) / "saved_model.pb").exists()


def _tfma_accuracy(run: Run) -> float:
    import tensorflow_model_analysis as tfma

    result = tfma.load_eval_result(run.one("ModelEvaluation", "Evaluator").uri)
    metrics = result.slicing_metrics[0][1][""][""]
    return float(metrics["sparse_categorical_accuracy"]["doubleValue"])


def test_pushed_model_serves_tf_examples_with_the_evaluated_accuracy(run: Run):
    import tensorflow as tf

    examples = run.one("Examples", "ImageExampleGen")
    files = sorted(str(p) for p in (Path(examples.uri) / "Split-eval").iterdir())
    records = list(tf.data.TFRecordDataset(files).as_numpy_iterator())
    labels = [tf.train.Example.FromString(r).features.feature["y"].int64_list.value[0] for r in records]
    pushed = _custom(run.one("PushedModel", "Pusher"), "pushed_destination")
    serve = tf.saved_model.load(pushed).signatures["serving_default"]
    predicted = np.argmax(serve(examples=tf.constant(records))["outputs"].numpy(), axis=1)
    accuracy = float(np.mean(predicted == np.array(labels)))
    assert accuracy == pytest.approx(_tfma_accuracy(run), abs=1e-6)
    assert accuracy >= MIN_ACCURACY


def test_tfx_training_reaches_shardflows_own_trainer_accuracy(run: Run, tmp_path: Path):
    """The same shards, the same number of epochs and batch size: TFX's Trainer (the user's module,
    through TFX's data accessor) against shardflow's Trainer in this environment. Both train a LeNet-5
    with Adam, seeded and deterministic, so the comparison does not depend on the run."""
    from shardflow.trainer import ExportOptions, FitOptions, InputOptions, TrainerConfig, run as train

    examples = run.one("Examples", "ImageExampleGen")
    summary = train(TrainerConfig(input=InputOptions(examples=examples.uri, batch_size=digits_module.BATCH, seed=0,
                                                     deterministic=True),
                                  fit=FitOptions(epochs=digits_module.EPOCHS),
                                  export=ExportOptions(output=str(tmp_path / "shardflow"))),
                    echo=lambda _: None)
    shardflow_accuracy = summary["history"][-1]["val_accuracy"]
    tfx_accuracy = _tfma_accuracy(run)
    print(f"\neval accuracy after {digits_module.EPOCHS} epochs: TFX {tfx_accuracy:.4f}, "
          f"shardflow {shardflow_accuracy:.4f}")
    assert shardflow_accuracy >= 0.85
    assert tfx_accuracy >= shardflow_accuracy - 0.03
