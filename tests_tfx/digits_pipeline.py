"""A TFX pipeline that knows of shardflow only `ImageExampleGen(index=..., data_root=...)`."""
from __future__ import annotations

import tensorflow_model_analysis as tfma
from tfx import v1 as tfx

from shardflow.tfx import ImageExampleGen

NAME = "digits-tfx"
TRAIN_STEPS, EVAL_STEPS = 184, 6  # 8 epochs of 23 batches of 64 (1,438 training examples); eval: 359


def eval_config(min_accuracy: float) -> tfma.EvalConfig:
    threshold = tfma.MetricThreshold(value_threshold=tfma.GenericValueThreshold(lower_bound={"value": min_accuracy}))
    return tfma.EvalConfig(
        model_specs=[tfma.ModelSpec(label_key="y", signature_name="serving_default")],
        slicing_specs=[tfma.SlicingSpec()],
        metrics_specs=[tfma.MetricsSpec(metrics=[
            tfma.MetricConfig(class_name="ExampleCount"),
            tfma.MetricConfig(class_name="SparseCategoricalAccuracy", threshold=threshold)])])


def components(data_root: str, module_file: str, serving_dir: str, min_accuracy: float,
               example_gen_beam_args: list[str] | None = None) -> list:
    example_gen = ImageExampleGen(index={"train": f"{data_root}/train.csv", "eval": f"{data_root}/eval.csv"},
                                  data_root=data_root)
    if example_gen_beam_args:
        example_gen.with_beam_pipeline_args(example_gen_beam_args)
    examples = example_gen.outputs["examples"]
    statistics = tfx.components.StatisticsGen(examples=examples)
    schema = tfx.components.SchemaGen(statistics=statistics.outputs["statistics"])
    validator = tfx.components.ExampleValidator(statistics=statistics.outputs["statistics"],
                                                schema=schema.outputs["schema"])
    transform = tfx.components.Transform(examples=examples, schema=schema.outputs["schema"], module_file=module_file)
    trainer = tfx.components.Trainer(module_file=module_file, examples=transform.outputs["transformed_examples"],
                                     transform_graph=transform.outputs["transform_graph"],
                                     schema=schema.outputs["schema"],
                                     train_args=tfx.proto.TrainArgs(num_steps=TRAIN_STEPS),
                                     eval_args=tfx.proto.EvalArgs(num_steps=EVAL_STEPS))
    evaluator = tfx.components.Evaluator(examples=examples, model=trainer.outputs["model"],
                                         eval_config=eval_config(min_accuracy))
    pusher = tfx.components.Pusher(model=trainer.outputs["model"], model_blessing=evaluator.outputs["blessing"],
                                   push_destination=tfx.proto.PushDestination(
                                       filesystem=tfx.proto.PushDestination.Filesystem(base_directory=serving_dir)))
    return [example_gen, statistics, schema, validator, transform, trainer, evaluator, pusher]


def create_pipeline(root: str, data_root: str, module_file: str, serving_dir: str, metadata_path: str | None,
                    min_accuracy: float = 0.8, example_gen_beam_args: list[str] | None = None) -> tfx.dsl.Pipeline:
    metadata = tfx.orchestration.metadata.sqlite_metadata_connection_config(metadata_path) if metadata_path else None
    return tfx.dsl.Pipeline(pipeline_name=NAME, pipeline_root=root, metadata_connection_config=metadata,
                            components=components(data_root, module_file, serving_dir, min_accuracy,
                                                  example_gen_beam_args),
                            enable_cache=False)
