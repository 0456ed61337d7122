"""The shared contracts that both products (the data pipelines and the trainer) and the flows stand on:
errors, storage paths and files, folder locks, manifests, TFRecord framing, options defined once
(`config_cli`), the instance schema, the tokenizer and its normaliser, and the ownership of output
folders (`outdir`).

It imports nothing else of ours, and neither Beam, torch nor Prefect (TensorFlow only lazily, for the
reference parser in `schema`): a Beam worker gets it in its small wheel without torch, the trainer
without Beam (tests/test_architecture.py).
"""
