"""Original TF checkpoints: import, export, round trip, and outputs against a NumPy reference.

The fixture checkpoint is written the way google-research/albert wrote them (tf.compat.v1 variables in
a graph, saved with a Saver), with the original names and shapes listed here independently of
model/convert_tf.py, plus LAMB slots and global_step that the import must skip.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from core.errors import UserError
from flows.cli import main as cli
from model.config import AlbertConfig
from model.convert import load_pretrained
from tests.model.tiny import VOCAB, tiny_config, toy_batch

tf = pytest.importorskip("tensorflow")


def original_variables(c: AlbertConfig) -> dict[str, tuple[int, ...]]:
    """Variable name -> shape of an original ALBERT pretraining checkpoint (kernels are [in, out])."""
    E, H, F_, V = c.embedding_size, c.hidden_size, c.intermediate_size, c.vocab_size
    out = {
        "bert/embeddings/word_embeddings": (V, E),
        "bert/embeddings/position_embeddings": (c.max_position_embeddings, E),
        "bert/embeddings/token_type_embeddings": (c.type_vocab_size, E),
        "bert/embeddings/LayerNorm/gamma": (E,),
        "bert/embeddings/LayerNorm/beta": (E,),
        "bert/encoder/embedding_hidden_mapping_in/kernel": (E, H),
        "bert/encoder/embedding_hidden_mapping_in/bias": (H,),
        "bert/pooler/dense/kernel": (H, H),
        "bert/pooler/dense/bias": (H,),
        "cls/predictions/transform/dense/kernel": (H, E),
        "cls/predictions/transform/dense/bias": (E,),
        "cls/predictions/transform/LayerNorm/gamma": (E,),
        "cls/predictions/transform/LayerNorm/beta": (E,),
        "cls/predictions/output_bias": (V,),
        "cls/seq_relationship/output_weights": (2, H),
        "cls/seq_relationship/output_bias": (2,),
    }
    for g in range(c.num_hidden_groups):
        for k in range(c.inner_group_num):
            p = f"bert/encoder/transformer/group_{g}/inner_group_{k}/"
            for name in ("query", "key", "value"):
                out[p + f"attention_1/self/{name}/kernel"] = (H, H)
                out[p + f"attention_1/self/{name}/bias"] = (H,)
            out[p + "attention_1/output/dense/kernel"] = (H, H)
            out[p + "attention_1/output/dense/bias"] = (H,)
            out[p + "LayerNorm/gamma"] = (H,)
            out[p + "LayerNorm/beta"] = (H,)
            out[p + "ffn_1/intermediate/dense/kernel"] = (H, F_)
            out[p + "ffn_1/intermediate/dense/bias"] = (F_,)
            out[p + "ffn_1/intermediate/output/dense/kernel"] = (F_, H)
            out[p + "ffn_1/intermediate/output/dense/bias"] = (H,)
            out[p + "LayerNorm_1/gamma"] = (H,)
            out[p + "LayerNorm_1/beta"] = (H,)
    return out


def write_original_checkpoint(prefix, values: dict[str, np.ndarray], slots: bool = True) -> None:
    """tf.compat.v1 variables in a graph + Saver: the layout of the released checkpoints."""
    with tf.Graph().as_default():
        variables = []
        for name, value in values.items():
            variables.append(tf.compat.v1.get_variable(name, initializer=tf.constant(value)))
            if slots:  # the LAMB optimizer's slots, as in the released pretraining checkpoints
                zeros = tf.constant(np.zeros_like(value))
                variables.append(tf.compat.v1.get_variable(name + "/adam_m", initializer=zeros))
                variables.append(tf.compat.v1.get_variable(name + "/adam_v", initializer=zeros))
        variables.append(tf.compat.v1.get_variable("global_step", initializer=tf.constant(1000, tf.int64)))
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, str(prefix))


def random_values(config: AlbertConfig, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    values = {}
    for name, shape in original_variables(config).items():
        if name.endswith("gamma"):
            values[name] = (1 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:  # O(1) activations; biases and betas random too: a swapped mapping must change outputs
            values[name] = (0.3 * rng.standard_normal(shape)).astype(np.float32)
    return values


# -- a NumPy ALBERT written against the TF names -------------------------------------------------------


def _ln(x, v, scope):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * v[scope + "/gamma"] + v[scope + "/beta"]


def _dense(x, v, scope):
    return x @ v[scope + "/kernel"] + v[scope + "/bias"]


def _gelu(x):  # the original code's gelu: tanh approximation
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def numpy_albert(v, c: AlbertConfig, ids, mask, types, positions):
    v = {k: a.astype(np.float64) for k, a in v.items()}
    B, L = ids.shape
    nh, hs = c.num_attention_heads, c.hidden_size // c.num_attention_heads
    x = v["bert/embeddings/word_embeddings"][ids] + v["bert/embeddings/position_embeddings"][:L]
    x = _ln(x + v["bert/embeddings/token_type_embeddings"][types], v, "bert/embeddings/LayerNorm")
    h = _dense(x, v, "bert/encoder/embedding_hidden_mapping_in")
    bias = (1.0 - mask[:, None, None, :]) * -10000.0  # the TF reference's additive mask
    for i in range(c.num_hidden_layers):
        g = int(i / (c.num_hidden_layers / c.num_hidden_groups))
        for k in range(c.inner_group_num):
            p = f"bert/encoder/transformer/group_{g}/inner_group_{k}/"

            def heads(t):
                return t.reshape(B, L, nh, hs).transpose(0, 2, 1, 3)

            q, kk, vv = (heads(_dense(h, v, p + f"attention_1/self/{n}")) for n in ("query", "key", "value"))
            scores = q @ kk.transpose(0, 1, 3, 2) / math.sqrt(hs) + bias
            probs = np.exp(scores - scores.max(-1, keepdims=True))
            probs /= probs.sum(-1, keepdims=True)
            ctx = (probs @ vv).transpose(0, 2, 1, 3).reshape(B, L, -1)
            a = _ln(h + _dense(ctx, v, p + "attention_1/output/dense"), v, p + "LayerNorm")
            f = _dense(
                _gelu(_dense(a, v, p + "ffn_1/intermediate/dense")), v, p + "ffn_1/intermediate/output/dense"
            )
            h = _ln(a + f, v, p + "LayerNorm_1")
    pooled = np.tanh(_dense(h[:, 0], v, "bert/pooler/dense"))
    at = np.take_along_axis(h, positions[..., None], axis=1)
    t = _ln(_gelu(_dense(at, v, "cls/predictions/transform/dense")), v, "cls/predictions/transform/LayerNorm")
    mlm = t @ v["bert/embeddings/word_embeddings"].T + v["cls/predictions/output_bias"]
    sop = pooled @ v["cls/seq_relationship/output_weights"].T + v["cls/seq_relationship/output_bias"]
    return mlm, sop


# -- tests ------------------------------------------------------------------------------------------------


@pytest.fixture
def grouped_config() -> AlbertConfig:
    return tiny_config(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2)


def test_import_then_export_is_identical_and_outputs_match(tmp_path, grouped_config):
    config = grouped_config
    values = random_values(config)
    write_original_checkpoint(tmp_path / "orig" / "model.ckpt-1000", values)
    config.to_json_file(tmp_path / "albert_config.json", format="google")

    args = ["--tf-checkpoint", str(tmp_path / "orig"), "--config", str(tmp_path / "albert_config.json")]
    assert cli(["import", *args, "--out", str(tmp_path / "ckpt")]) == 0
    model = load_pretrained(tmp_path / "ckpt").eval()
    assert model.config == config

    batch = toy_batch(seed=3)
    with torch.no_grad():
        out = model(**batch)
    mlm, sop = numpy_albert(
        values,
        config,
        batch["input_ids"].numpy(),
        batch["attention_mask"].numpy().astype(np.float64),
        batch["token_type_ids"].numpy(),
        batch["masked_lm_positions"].numpy(),
    )
    assert np.abs(out.mlm_logits.numpy() - mlm).max() < 1e-4
    assert np.abs(out.sop_logits.numpy() - sop).max() < 1e-4

    assert (
        cli(
            [
                "export",
                "--checkpoint",
                str(tmp_path / "ckpt"),
                "--format",
                "tf",
                "--out",
                str(tmp_path / "tf"),
            ]
        )
        == 0
    )
    exported = dict(tf.train.list_variables(str(tmp_path / "tf" / "model.ckpt")))
    assert exported == {name: list(shape) for name, shape in original_variables(config).items()}
    reader = tf.train.load_checkpoint(str(tmp_path / "tf"))  # the folder works too: a `checkpoint` file
    for name, value in values.items():
        assert np.array_equal(reader.get_tensor(name), value), name
    written = json.loads((tmp_path / "tf" / "albert_config.json").read_text())
    assert written["hidden_act"] == "gelu" and AlbertConfig.from_google_dict(written) == config


def test_export_of_partial_sharing_writes_one_group_per_layer(tmp_path):
    from model.albert import AlbertForPreTraining
    from model.convert import save_pretrained
    from model.convert_tf import export_tf, import_tf_checkpoint

    config = tiny_config(num_hidden_layers=3, num_hidden_groups=3, sharing="ffn")
    torch.manual_seed(0)
    model = AlbertForPreTraining(config).eval()
    save_pretrained(model, tmp_path / "ckpt")
    export_tf(tmp_path / "ckpt", tmp_path / "tf")
    names = dict(tf.train.list_variables(str(tmp_path / "tf" / "model.ckpt")))
    assert "bert/encoder/transformer/group_2/inner_group_0/ffn_1/intermediate/dense/kernel" in names
    back = import_tf_checkpoint(
        tmp_path / "tf" / "model.ckpt", tmp_path / "tf" / "albert_config.json", tmp_path / "b"
    )
    batch = toy_batch()
    with torch.no_grad():
        torch.testing.assert_close(
            load_pretrained(back).eval()(**batch).mlm_logits, model(**batch).mlm_logits
        )


def test_unmapped_misshaped_and_missing_variables_are_named(tmp_path):
    config = tiny_config()
    config.to_json_file(tmp_path / "albert_config.json", format="google")
    from model.convert_tf import import_tf_checkpoint

    extra = {
        **random_values(config),
        "bert/encoder/transformer/group_0/inner_group_0/mystery/kernel": np.zeros(3),
    }
    write_original_checkpoint(tmp_path / "a" / "model.ckpt", extra, slots=False)
    with pytest.raises(UserError, match="mystery/kernel"):
        import_tf_checkpoint(tmp_path / "a" / "model.ckpt", tmp_path / "albert_config.json", tmp_path / "out")

    bad = random_values(config)
    bad["bert/pooler/dense/kernel"] = np.zeros((16, 8), np.float32)
    write_original_checkpoint(tmp_path / "b" / "model.ckpt", bad, slots=False)
    with pytest.raises(
        UserError, match=r"bert/pooler/dense/kernel has shape \[16, 8\]; the config needs \[16, 16\]"
    ):
        import_tf_checkpoint(tmp_path / "b" / "model.ckpt", tmp_path / "albert_config.json", tmp_path / "out")

    missing = random_values(config)
    del missing["cls/seq_relationship/output_weights"]
    write_original_checkpoint(tmp_path / "c" / "model.ckpt", missing, slots=False)
    with pytest.raises(UserError, match="lacks variable.*cls/seq_relationship/output_weights"):
        import_tf_checkpoint(tmp_path / "c" / "model.ckpt", tmp_path / "albert_config.json", tmp_path / "out")

    # A config with more groups than the checkpoint: the error names what does not fit.
    tiny_config(num_hidden_groups=2).to_json_file(tmp_path / "two.json", format="google")
    write_original_checkpoint(tmp_path / "d" / "model.ckpt", random_values(config), slots=False)
    with pytest.raises(UserError, match="group_1"):
        import_tf_checkpoint(tmp_path / "d" / "model.ckpt", tmp_path / "two.json", tmp_path / "out")

    assert cli(["import", "--tf-checkpoint", str(tmp_path / "none"), "--config", str(tmp_path / "two.json"),
                "--out", str(tmp_path / "out")]) == 2  # fmt: skip


def test_vocab_matters(tmp_path):
    # The import must read vocab_size from the config: a wrong one is a shape error, not a silent crop.
    config = tiny_config()
    write_original_checkpoint(tmp_path / "model.ckpt", random_values(config), slots=False)
    tiny_config(vocab_size=VOCAB + 1).to_json_file(tmp_path / "albert_config.json", format="google")
    from model.convert_tf import import_tf_checkpoint

    with pytest.raises(UserError, match="word_embeddings has shape"):
        import_tf_checkpoint(tmp_path / "model.ckpt", tmp_path / "albert_config.json", tmp_path / "out")


def test_export_and_import_through_a_bucket(tmp_path, bucket):
    """Checkpoint folders, TF checkpoints and transformers exports on gs://: written locally and
    uploaded, downloaded and read; the round trip computes the same function."""
    from core import storage
    from model.albert import AlbertForPreTraining
    from model.convert import export_hf, save_pretrained
    from model.convert_tf import export_tf, import_tf_checkpoint

    config = tiny_config()
    torch.manual_seed(0)
    model = AlbertForPreTraining(config).eval()
    save_pretrained(model, f"{bucket}/ckpt")
    export_tf(f"{bucket}/ckpt", f"{bucket}/tf")
    assert {"checkpoint", "albert_config.json", "model.ckpt.index"} <= set(storage.listdir(f"{bucket}/tf"))
    back = import_tf_checkpoint(
        f"{bucket}/tf/model.ckpt", f"{bucket}/tf/albert_config.json", f"{bucket}/back"
    )
    export_hf(back, f"{bucket}/hf")
    assert {"config.json", "model.safetensors"} <= set(storage.listdir(f"{bucket}/hf"))
    batch = toy_batch()
    with torch.no_grad():
        for path in (back, f"{bucket}/hf"):
            torch.testing.assert_close(
                load_pretrained(path).eval()(**batch).mlm_logits, model(**batch).mlm_logits
            )
