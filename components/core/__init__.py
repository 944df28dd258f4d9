"""Pieces shared by every component: TFRecord framing, Example encoding, manifests, readers, Beam set-up.

Nothing here imports kfp; only `reader` imports TensorFlow (the Beam workers never need it).
"""
