"""Test and benchmark tools shared by both: tests/ and benchmarks/ import them, never each other.

Never shipped in the image (k8s/Dockerfile.dockerignore lets through only what setup.py packages) nor packaged
by setup.py, and never imported by components/, pipelines/ or tfx_adapter/ (a rule of
tests/architecture/test_architecture.py). A leaf: it imports shardflow and third-party code, nothing of tests/
or benchmarks/, so a fresh clone imports it from the repository root as it imports benchmarks.

- serving_oracle.py: Push's test models and what TF Serving would serve while pushes race (tests/serving/,
  benchmarks/serving_race.py, benchmarks/kserve_download.py).
- photo_data.py, mask_data.py: JPEG crops of scikit-learn's sample photos, and 4-class masks of them, written once;
  file_index.py: a CSV index repeating a set of files (tests/example_gen/, tests/trainer/, the photo benchmarks).
- near_duplicate_images.py, image_alterations.py: near-duplicate originals of five kinds and their altered copies
  (tests/example_gen/test_near_duplicate*.py, benchmarks/near_duplicates*.py).
"""
