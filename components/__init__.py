"""shardflow: CSV-indexed files → sharded TFRecords → transform → train → evaluate, on Beam and Kubeflow."""

__version__ = "0.1.0"
