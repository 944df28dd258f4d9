"""Pieces shared by every component: storage, the output life cycle, TFRecord framing, Example encoding,
manifests, readers, Beam set-up, errors.

Nothing here imports kfp or tfx. TensorFlow is imported only by the modules that build graphs
(`reader`, `image_decode`, `serving_image`) and, lazily, by `filesystems.s3` to register s3:// with it;
the Beam workers' encoding path never needs it.
"""
