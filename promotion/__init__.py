"""Promotion, as pure logic: the statistical gate (`gate`, on the per-example results of `samples`
with the tests and intervals of `stats`), the decision for people (`gate_report`), the registry of
checkpoint versions and its production pointer (`registry`, on the compare-and-swap `stores`), where a
version came from (`lineage`), and acting on the gate's decision (`promote`). flows/promote.py is the
flow that evaluates both models and sequences these.

It imports the shared `core/` and numpy, nothing else of ours, and neither torch, Beam, Prefect nor
TensorFlow (tests/test_architecture.py): the trainer reads and writes the gate's samples
(`model/evaluate.py`, `model/finetune.py`) without pulling in the flows.
"""
