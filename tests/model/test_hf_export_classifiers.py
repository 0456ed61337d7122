"""Fine-tuned classifiers exported for transformers: a checkpoint saved with its labels exports as
AlbertForTokenClassification / AlbertForSequenceClassification, which transformers loads with no
missing keys, the tokenizer of the export folder, the same logits and predictions on a padded batch,
and the labels; the TF layout and classes that do not export are refused in one line."""

from __future__ import annotations

import json
import os

import pytest
import torch

transformers = pytest.importorskip("transformers")

from core.errors import UserError  # noqa: E402
from core.tokenizer import Tokenizer  # noqa: E402
from model.albert import AlbertModel  # noqa: E402
from model.classifiers import AlbertForSequenceClassification, AlbertForTokenClassification  # noqa: E402
from model.convert import CheckpointError, export_hf, load_pretrained, read_checkpoint, save_pretrained  # noqa: E402
from model.ner_data import BIO_TAGS  # noqa: E402
from tests.cli import albert  # noqa: E402
from tests.model.tiny import tiny_config  # noqa: E402

TEXTS = ["江泽民在北京会见克林顿。", "新华社上海电", "人民日报社论：１９９８年的经济发展得很快"]
SENTIMENT = ("negative", "neutral", "positive")


def _classifier(cls, num_labels: int, vocab_size: int, sharing: str):
    torch.manual_seed(0)
    groups = {} if sharing == "all" else {"num_hidden_groups": 2}  # one group per layer (of 2)
    config = tiny_config(vocab_size=vocab_size, max_position_embeddings=64, sharing=sharing, **groups)
    model = cls(config, num_labels=num_labels)
    with torch.no_grad():  # a head far from its init, so that the labels' scores differ clearly
        model.classifier.weight.normal_(0, 1.0)
        model.classifier.bias.normal_(0, 1.0)
    return model.eval()


@pytest.fixture(scope="module", params=["token", "sequence"])
def exported(request, tmp_path_factory, vocab_dir):
    """(our model, its labels, the export folder) for each head; the sequence classifier shares its
    attention only (sharing "attention": the export writes one copy per layer)."""
    vocab_size = Tokenizer.load(vocab_dir).vocab_size
    if request.param == "token":
        model, labels = _classifier(AlbertForTokenClassification, 7, vocab_size, "all"), list(BIO_TAGS)
    else:
        model, labels = (
            _classifier(AlbertForSequenceClassification, 3, vocab_size, "attention"),
            list(SENTIMENT),
        )
    root = tmp_path_factory.mktemp(request.param)
    save_pretrained(model, root / "ckpt", spm_model_path=os.path.join(vocab_dir, "spm.model"), labels=labels)
    return model, labels, export_hf(root / "ckpt", root / "hf")


def test_checkpoint_records_the_class_and_labels(exported):
    model, labels, out = exported
    ckpt = os.path.join(os.path.dirname(out), "ckpt")
    _, _, raw = read_checkpoint(ckpt)
    assert raw["architectures"] == [type(model).__name__] and raw["num_labels"] == len(labels)
    assert raw["id2label"] == {str(i): name for i, name in enumerate(labels)}
    assert raw["label2id"] == {name: i for i, name in enumerate(labels)}
    again = load_pretrained(ckpt).eval()
    assert type(again) is type(model) and again.num_labels == len(labels)
    ids = torch.tensor([[2, 10, 11, 12, 3]])
    assert torch.equal(again(ids).logits, model(ids).logits)


def test_transformers_loads_the_export_with_the_same_predictions(exported):
    model, labels, out = exported
    config = json.load(open(os.path.join(out, "config.json")))
    assert config["architectures"] == [type(model).__name__] and config["num_labels"] == len(labels)
    auto = (
        transformers.AutoModelForTokenClassification
        if isinstance(model, AlbertForTokenClassification)
        else transformers.AutoModelForSequenceClassification
    )
    theirs, info = auto.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    assert type(theirs).__name__ == type(model).__name__
    assert theirs.config.id2label == dict(enumerate(labels))
    assert theirs.config.label2id == {name: i for i, name in enumerate(labels)}
    theirs.eval()

    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")  # texts of different lengths: padded
    assert (batch["attention_mask"] == 0).any()
    with torch.no_grad():
        ours = model(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids")).logits
        got = theirs(**batch).logits
    if isinstance(model, AlbertForTokenClassification):  # padded positions are nobody's prediction
        real = batch["attention_mask"].bool()
        ours, got = ours[real], got[real]
    torch.testing.assert_close(got, ours, atol=1e-5, rtol=1e-5)
    assert torch.equal(got.argmax(-1), ours.argmax(-1))
    if isinstance(model, AlbertForTokenClassification):  # the comparison covers more than one label
        assert len(set(ours.argmax(-1).tolist())) > 1
    else:  # a random pooler scores the texts alike, but not within the tolerance
        assert (ours - ours[0]).abs().max() > 1e-4


def test_model_card_names_the_task_head_and_labels(exported):
    model, labels, out = exported
    card = open(os.path.join(out, "README.md"), encoding="utf-8").read()
    assert "## Task head" in card and type(model).__name__ in card
    assert all(f"`{name}`" in card for name in labels)
    assert "fill-mask" not in card.split("---")[1]  # the front matter's pipeline tag is the task's


def test_labels_must_match_the_head(tmp_path):
    model = _classifier(AlbertForTokenClassification, 7, 64, "all")
    with pytest.raises(ValueError, match="7 distinct label names"):
        save_pretrained(model, tmp_path / "a", labels=["O", "B-PER"])
    with pytest.raises(ValueError, match="fine-tuning head"):
        save_pretrained(AlbertModel(tiny_config()), tmp_path / "b", labels=["O"])


def test_tf_export_of_a_classifier_and_hf_export_of_a_bare_backbone_are_refused(tmp_path):
    save_pretrained(
        _classifier(AlbertForTokenClassification, 7, 64, "all"), tmp_path / "ckpt", labels=BIO_TAGS
    )
    r = albert(
        "export", "--checkpoint", str(tmp_path / "ckpt"), "--format", "tf", "--out", str(tmp_path / "tf")
    )
    r.fails(2, "--format tf takes a pretraining checkpoint", "AlbertForTokenClassification")
    assert not (tmp_path / "tf").exists()
    save_pretrained(AlbertModel(tiny_config()), tmp_path / "backbone")
    with pytest.raises(
        UserError, match="holds an AlbertModel: export takes a checkpoint of AlbertForPreTraining"
    ):
        export_hf(tmp_path / "backbone", tmp_path / "hf")
    assert not (tmp_path / "hf").exists()


def test_a_foreign_config_with_label_names_that_are_not_the_ids_is_refused(tmp_path):
    save_pretrained(
        _classifier(AlbertForTokenClassification, 2, 64, "all"), tmp_path / "ckpt", labels=["O", "X"]
    )
    os.remove(tmp_path / "ckpt" / "checksums.json")  # a foreign folder: parsed strictly instead
    config = json.load(open(tmp_path / "ckpt" / "config.json"))
    config["id2label"] = {"0": "O", "5": "X"}
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="id2label must map the label ids 0..n-1"):
        read_checkpoint(tmp_path / "ckpt")
