"""The names in a Trainer's output directory: written by the Trainer, read by the Tuner, the pipeline's
steps, its cache and its run summary. A leaf: importing it imports nothing (no TensorFlow)."""

SUMMARY_NAME = "training.json"  # the completion marker, written last
HISTORY_NAME = "history.json"  # per-epoch metrics, appended as epochs end (a killed run keeps it)
CHECKPOINTS = "checkpoints"  # the backups and stream.json a killed run resumes from; removed after training.json
TENSORBOARD = "tensorboard"
MODEL = "model"  # the exported SavedModel
CURVES = "curves.png"  # loss and metrics per epoch
