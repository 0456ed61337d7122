"""Throughput benchmarks, each printed side by side with a reference measured in the same run.

`albert bench TARGET` (benchmarks/cli.py) runs one module per target in its own process:

    instances   benchmarks/instances.py (+ instance_runs.py, reference_generator.py)
    tokenize    benchmarks/tokenize.py
    corpus      benchmarks/corpus.py
    model       benchmarks/model.py
    train       benchmarks/train.py
    parity      benchmarks/parity.py (not a speed: our training step against transformers')
    scale       benchmarks/scale.py (+ scale_corpus.py, proctree.py; not in `all`)
    pretraining-value
                benchmarks/pretraining_value.py (+ pretraining_value_report.py; not in `all`: hours)

Every target takes `--json PATH` to also write its figures as JSON (benchmarks/report.py).

Not product code: `pipelines`, `model` and `flows` never import this package, and the Dataflow worker
wheel (pipelines/corpus/staging.py) carries `pipelines/` only. Benchmarks may import every layer.
"""
