"""Promotion, as pure logic: the statistical gate (`gate`, on the per-example results of `samples`
with the tests and intervals of `stats`: its checks in `gate_checks`, each downstream task against
production and the model from scratch in `gate_downstream`, its sentences in `gate_reasons`, models that
predict one thing in `degenerate`), the decision for people (`gate_report`, every figure in its unit:
`units`), the registry of
checkpoint versions and its production pointer (`registry`, on the compare-and-swap `stores`), where a
version came from (`lineage`), and acting on the gate's decision (`promote`). flows/promote.py is the
flow that evaluates both models and sequences these.

It imports the shared `core/` and numpy, nothing else of ours, and neither torch, Beam, Prefect nor
TensorFlow (tests/test_architecture.py): the trainer reads and writes the gate's samples
(`model/evaluate.py`, `model/finetune.py`) without pulling in the flows.
"""
