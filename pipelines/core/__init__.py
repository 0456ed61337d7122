"""The shared core every layer may import (pipelines, model, flows, benchmarks): errors, storage
paths, manifests, hashing and TFRecord framing.

Nothing here imports Beam, torch or Prefect, so `model` can use it without pulling in Beam and a
Beam worker without pulling in torch.
"""
