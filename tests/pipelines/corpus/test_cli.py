"""End to end: `albert corpus` over inputs of every source kind, broken ones included.

The corpus is built once per session with the default runner mode (DirectRunner, multi_processing,
2 workers), then checked from every side: the accounting invariant (stats.json AND the files), the
reasons of what was dropped, the output contract the instance stage reads, manifest last, and a
rerun (in_memory mode) that must produce byte-identical shards.
"""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter

import pytest

from flows.cli import main
from pipelines.corpus import sources
from pipelines.corpus.options import CorpusOptions
from pipelines.documents import corpus_files, read_jsonl_documents


def _albert_corpus(specs, out, *extra):
    args = ["corpus", *[a for s in specs for a in ("--source", s)], "--out", out, *extra]
    args += ["--max-dead-letter-fraction", "0.05"]  # the inputs are broken on purpose: 6 of 239 records
    args += ["--accept-cut-inputs"]  # one of them a dump cut short, whose lost rest is of unknown size
    return main(args)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, corpus_inputs):
    out = str(tmp_path_factory.mktemp("corpus") / "v1")
    code = _albert_corpus(corpus_inputs["specs"], out, "--direct_num_workers", "2")
    assert code == 0
    return out


def _lines(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _files(out, prefix):
    return sorted(os.path.join(out, f) for f in os.listdir(out) if f.startswith(prefix))


def _expected_reads(specs) -> int:
    """Records read, counted with the plain readers (no Beam): pages, lines, documents; a dead letter
    of damaged input counts the records it lost."""
    opts = CorpusOptions()
    return sum(
        r["lost"]["records"] if "lost" in r else 1
        for item in sources.plan_sources(specs)
        for part in sources.split_work(item, opts)
        for r in sources.read_work(part, opts)
    )


def test_outputs_and_manifest_last(corpus):
    names = sorted(os.listdir(corpus))
    assert "stats.json" in names and "manifest.json" in names and "_tmp" not in names
    assert any(n.startswith("docs-") for n in names) and any(n.startswith("rejected-") for n in names)
    manifest_time = os.path.getmtime(os.path.join(corpus, "manifest.json"))
    assert all(os.path.getmtime(os.path.join(corpus, n)) <= manifest_time for n in names)
    manifest = json.load(open(os.path.join(corpus, "manifest.json")))
    assert manifest["stage"] == "corpus"
    not_outputs = ("manifest.json", ".albert-stage.json")  # the manifest itself, core.outdir's marker
    assert {e["file"] for e in manifest["outputs"]} == {n for n in names if n not in not_outputs}
    assert (
        all("sha256" in e for e in manifest["inputs"]) and len(manifest["inputs"]) >= 6
    )  # dumps + index + ...
    assert manifest["config"]["options"]["minhash_bands"] == CorpusOptions().dedup.minhash_bands


def test_accounting_invariant_in_stats_and_files(corpus, corpus_inputs):
    stats = json.load(open(os.path.join(corpus, "stats.json")))
    assert stats["invariant"]["holds"]
    assert stats["read"] == _expected_reads(corpus_inputs["specs"])
    assert stats["read"] == stats["kept"] + stats["dropped_total"] + stats["dead_letter_total"]
    docs = [d for f in _files(corpus, "docs-") for d in _lines(f)]
    rejected = [r for f in _files(corpus, "rejected-") for r in _lines(f)]
    assert len(docs) == stats["kept"]
    assert Counter(r["reason"] for r in rejected if not r["dead_letter"]) == Counter(stats["dropped"])
    dead = Counter()
    for r in rejected:
        if r["dead_letter"]:
            dead[r["reason"]] += r["lost"]["records"] if "lost" in r else 1
    assert dead == Counter(stats["dead_letter"])
    for source, s in stats["by_source"].items():
        assert s["read"] == s["kept"] + sum(s["dropped"].values()) + sum(s["dead_letter"].values()), source
    assert set(stats["by_source"]) == {"zhwiki", "wiki2019zh", "news2016zh", "text", "peoples-daily"}


def test_every_broken_record_is_dead_lettered_with_its_reason(corpus):
    stats = json.load(open(os.path.join(corpus, "stats.json")))
    dead, dropped = stats["dead_letter"], stats["dropped"]
    assert dead["truncated_input"] == 1  # the truncated zhwiki dump
    assert dead["malformed_json"] == 2  # one in wiki2019zh, one in news2016zh
    assert dead["invalid_utf8"] == 2  # a JSON line and a text document
    assert dead["missing_field"] == 1  # wiki2019zh record without text
    assert dropped["redirect"] == 2  # #REDIRECT and the localized #重定向
    assert dropped["disambiguation"] == 1
    assert dropped["not_main_namespace"] == 1
    assert dropped["empty"] == 1  # the empty page
    assert dropped["exact_duplicate"] >= 2  # a repeated text document, news copy of a wiki2019zh text
    assert dropped["near_duplicate"] >= 1  # wiki articles and the People's Daily originals


def test_documents_follow_the_contract_the_instance_stage_reads(corpus):
    files = corpus_files(corpus)  # requires manifest.json
    docs = [d for f in files for d in read_jsonl_documents(f)]
    assert docs and not [d for d in docs if "_error" in d]
    ids = [d["id"] for d in docs]
    assert len(ids) == len(set(ids))
    for d in docs:
        assert list(d) == ["id", "source", "title", "url", "sentences"]
        assert d["sentences"] and all(s.strip() and len(s) <= 256 for s in d["sentences"])
        text = "".join(d["sentences"])
        for markup in ("{{", "}}", "[[", "-{", "<ref", "&lt;", "Category:", "（附图片"):
            assert markup not in text, (d["id"], markup)
    wiki = [d for d in docs if d["source"] == "zhwiki"]
    assert wiki and all(d["url"].startswith("https://zh.wikipedia.org/wiki?curid=") for d in wiki)
    assert any("一篇报道" in "".join(d["sentences"]) for d in wiki)  # -{zh-hans:..;zh-hant:..}- resolved
    assert not any("１" in "".join(d["sentences"]) for d in docs)  # full-width digits folded (NFKC)


def test_rerun_is_deterministic_and_skips_finished_work(corpus, corpus_inputs, tmp_path):
    again = str(tmp_path / "again")
    assert _albert_corpus(corpus_inputs["specs"], again, "--direct_running_mode", "in_memory") == 0
    for prefix in ("docs-", "rejected-"):
        first, second = _files(corpus, prefix), _files(again, prefix)
        assert [os.path.basename(f) for f in first] == [os.path.basename(f) for f in second]
        for a, b in zip(first, second):
            assert open(a, "rb").read() == open(b, "rb").read(), a
    manifest = open(os.path.join(again, "manifest.json")).read()
    # stats.json too (its hash keys the vocabulary and instances built on this corpus): no run time in it
    assert (
        open(os.path.join(corpus, "stats.json"), "rb").read()
        == open(os.path.join(again, "stats.json"), "rb").read()
    )
    assert (
        json.loads(manifest)["outputs"] == json.load(open(os.path.join(corpus, "manifest.json")))["outputs"]
    )
    # same inputs and options: nothing is redone
    assert _albert_corpus(corpus_inputs["specs"], again, "--direct_running_mode", "in_memory") == 0
    assert open(os.path.join(again, "manifest.json")).read() == manifest
    # other options over a finished corpus: refused without --force
    assert _albert_corpus(corpus_inputs["specs"], again, "--min-chars", "80") == 2


def test_bad_arguments_are_one_line_errors(corpus_inputs, tmp_path, capsys):
    out = str(tmp_path / "x")
    assert _albert_corpus(corpus_inputs["specs"], out, "--no_such_beam_flag", "1") == 2
    assert "unknown option" in capsys.readouterr().err
    assert _albert_corpus(["nosuchkind:/x"], out) == 2
    assert _albert_corpus([f"text:{tmp_path}/missing-*.txt"], out) == 2
    with pytest.raises(SystemExit) as exc:  # argparse rejects a bad choice itself
        _albert_corpus(corpus_inputs["specs"], out, "--opencc", "s2t")
    assert exc.value.code == 2
