"""Fine-tuning on XLA (`albert finetune --device tpu`) on XLA's CPU device (docs/tpu.md):

- batches are padded to a multiple of 32 tokens on XLA (model.tpu.length_multiple), not to their
  longest item, so a handful of shapes compile once and are replayed: a second fine-tuning on the same
  data compiles nothing;
- with dropout off, fine-tuning on XLA follows the eager CPU run (losses, dev accuracy);
- `albert finetune --device tpu` runs as a user runs it and writes its report.

`pytest -s` prints the compilation counts, with and without the length buckets."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch_xla")

import torch  # noqa: E402

from model import tpu  # noqa: E402
from model.finetune import Encoder, Example  # noqa: E402
from model.finetune_train import FinetuneConfig, new_classifier, train_classifier  # noqa: E402
from tests.model.train_fixtures import ROOT  # noqa: E402

ENV = {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": ROOT}


def toy_task(n: int, seed: int) -> list[Example]:
    """Reviews of 4 to 44 characters (2 length buckets at max_seq_length 48), label by sentiment words."""
    rng = np.random.default_rng(seed)
    good, bad, filler = "好棒赞美喜欢满意", "差烂糟坏讨厌失望", "的了是在我有他这"
    out = []
    for _ in range(n):
        label = int(rng.integers(2))
        chars = rng.choice(list(good if label else bad), 3).tolist()
        chars += rng.choice(list(filler), int(rng.integers(1, 42))).tolist()
        rng.shuffle(chars)
        out.append(Example("".join(chars), None, str(label)))
    return out


@pytest.fixture(scope="module")
def setup(vocab_dir):
    from core.tokenizer import Tokenizer
    from model.classifiers import AlbertForSequenceClassification
    from model.config import AlbertConfig
    from tests.model.tiny import TINY_MODEL

    spm = os.path.join(vocab_dir, "spm.model")
    config = AlbertConfig(
        **{**TINY_MODEL, "vocab_size": Tokenizer.load(spm).vocab_size},
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    encoder = Encoder(spm, 48)
    train, dev = (encoder.encode(toy_task(n, seed), {"0": 0, "1": 1}) for n, seed in ((64, 0), (32, 1)))
    return config, AlbertForSequenceClassification, train, dev


def finetune(setup, device: str) -> dict:
    config, model_class, train, dev = setup
    cfg = FinetuneConfig(max_seq_length=48, batch_size=4, epochs=2, lr=1e-3, eval_every=16, patience=100)
    model = new_classifier(model_class, config, 2, 12345, None, "")
    dev_device = tpu.xla_device() if device == "tpu" else torch.device("cpu")
    return train_classifier(model, train, dev, cfg, 2, dev_device, log=lambda m: None)


def test_finetuning_on_xla_follows_the_cpu_and_compiles_a_few_graphs_once(setup, monkeypatch):
    before = tpu.compilations()
    xla = finetune(setup, "tpu")
    first = tpu.compilations() - before
    again = finetune(setup, "tpu")  # the same shapes: every graph is replayed from XLA's cache
    second = tpu.compilations() - before - first
    cpu = finetune(setup, "cpu")
    assert [h["step"] for h in xla["history"]] == [h["step"] for h in cpu["history"]] == [16, 32]
    for a, b in zip(xla["history"], cpu["history"]):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-3, abs=1e-4)
        assert a["dev_accuracy"] == pytest.approx(b["dev_accuracy"], abs=1 / 32 + 1e-9)  # one dev item of 32
    assert again["history"] == xla["history"]
    assert second == 0, f"a second fine-tuning on the same data compiled {second} more graph(s)"

    # For context: padded to the longest item, every new length is a new graph.
    monkeypatch.setattr(tpu, "XLA_LENGTH_MULTIPLE", 1)
    before = tpu.compilations()
    finetune(setup, "tpu")
    unbucketed = tpu.compilations() - before
    print(f"\nXLA fine-tuning compilations: {first} padded to a multiple of 32, then {second} on a second run; "
          f"{unbucketed} padded to the longest item")  # fmt: skip
    assert first < unbucketed


def test_albert_finetune_runs_on_xla(tmp_path, vocab_dir):
    from core.tokenizer import Tokenizer
    from model.albert import AlbertForPreTraining
    from model.config import AlbertConfig
    from model.convert import save_pretrained
    from tests.model.tiny import TINY_MODEL

    spm = os.path.join(vocab_dir, "spm.model")
    config = AlbertConfig(**{**TINY_MODEL, "vocab_size": Tokenizer.load(spm).vocab_size})
    checkpoint = str(save_pretrained(AlbertForPreTraining(config), tmp_path / "ckpt", spm))
    paths = {}
    for split, (n, seed) in {"train": (48, 0), "dev": (16, 1), "test": (16, 2)}.items():
        paths[split] = tmp_path / f"{split}.tsv"
        paths[split].write_text(
            "".join(f"{e.text_a}\t{e.label}\n" for e in toy_task(n, seed)), encoding="utf-8"
        )
    out = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "flows.cli", "finetune", "--checkpoint", checkpoint, "--device", "tpu",
           "--train", str(paths["train"]), "--dev", str(paths["dev"]), "--test", str(paths["test"]),
           "--epochs", "1", "--max-seq-length", "48", "--seeds", "1", "--lrs", "2e-4", "--out", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["sizes"] == {"train": 48, "dev": 16, "test": 16}
    assert "lift (pretrained - scratch, both tuned by the same search)" in proc.stdout
