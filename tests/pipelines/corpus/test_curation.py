"""The curation steps inside the real corpus stage (Beam, in memory): language identification,
personal data and evaluation sets kept out, their counts in stats.json, the sets in the manifest,
the rejected records scrubbed too, and report.html beside them. The rules themselves are tested in
test_langid.py, test_pii.py and test_decontam.py."""

from __future__ import annotations

import gzip
import hashlib
import json
import os

import pytest

from pipelines.corpus import clean
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.stage import run_corpus
from tests.pipelines.corpus.fixtures import write_text

RUNNER_FLAGS = ["--direct_running_mode=in_memory"]
ENGLISH = "This paragraph is written in English and must leave the Chinese document that holds it."
JAPANESE = [
    "今日は朝から雨が降っていたので、私たちは駅の近くの喫茶店でしばらく休むことにしました。",
    "店の中はとても静かで、窓の外を歩く人々を眺めながら、温かいコーヒーをゆっくり飲みました。",
    "午後になると雨はやみ、空が明るくなったので、私たちは再び町を歩き始めました。",
]
PHONE = "13812345678"
EMAIL = "zhang.san@example.com"
REVIEW = "这家酒店的服务态度非常好房间干净整洁早餐也很丰富下次出差还会再来入住"  # the evaluation example


def _read_gz_lines(path: str) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def curated(tmp_path_factory, sample_docs) -> dict:
    """One corpus run over a text source with a document of each case, decontaminated against a
    plain-text evaluation file that holds REVIEW."""
    root = tmp_path_factory.mktemp("curation")
    articles = [a["sentences"] for a in sample_docs if sum(len(s) for s in a["sentences"]) > 300][:3]
    docs = [
        articles[0] + [ENGLISH],  # Chinese with a foreign line
        JAPANESE,  # another language
        articles[1] + [f"如有疑问，请拨打联系电话{PHONE}。"],  # personal data
        articles[2][:2] + [f"网友评论说：{REVIEW}。"] + articles[2][2:],  # an evaluation example inside
        [f"邮箱：{EMAIL}。"],  # too short, with an e-mail address in its excerpt
    ]
    source = os.path.join(root, "docs.txt")
    write_text(source, docs)
    eval_file = os.path.join(root, "reviews-test.txt")
    with open(eval_file, "w", encoding="utf-8") as f:
        f.write(f"{REVIEW}\n很好\n")
    out = os.path.join(root, "corpus")
    opts = CorpusOptions().replace(decontaminate=(eval_file,))
    manifest = run_corpus([f"text:{source}"], out, opts, extra_beam_flags=RUNNER_FLAGS)
    with open(eval_file, "rb") as f:
        eval_sha256 = hashlib.sha256(f.read()).hexdigest()
    kept = [
        d
        for path in sorted(os.listdir(out))
        if path.startswith("docs-")
        for d in _read_gz_lines(os.path.join(out, path))
    ]
    rejected = [
        r
        for p in sorted(os.listdir(out))
        if p.startswith("rejected-")
        for r in _read_gz_lines(os.path.join(out, p))
    ]
    with open(os.path.join(out, "stats.json"), encoding="utf-8") as f:
        stats = json.load(f)
    return {
        "out": out,
        "manifest": manifest,
        "stats": stats,
        "kept": kept,
        "rejected": rejected,
        "eval_sha256": eval_sha256,
    }


def test_each_curation_step_acts_and_is_counted(curated):
    stats = curated["stats"]
    assert stats["read"] == 5 and stats["kept"] == 2 and stats["invariant"]["holds"]
    assert stats["dropped"] == {"wrong_language": 1, "eval_contamination": 1, "too_short": 1}
    assert stats["lines_removed"]["foreign_language"] == 1
    assert stats["languages"] == {"ja": 1, "zh": 4}  # every document identified, dropped ones too
    assert (
        stats["pii"] == {"mobile": 1} and stats["pii_mode"] == "redact"
    )  # the too-short one never got there
    text = "\n".join(s for d in curated["kept"] for s in d["sentences"])
    assert ENGLISH not in text and PHONE not in text and "<PHONE>" in text
    assert REVIEW not in text


def test_rejected_records_say_why_and_keep_no_personal_data(curated):
    by_reason = {r["reason"]: r for r in curated["rejected"]}
    assert by_reason["wrong_language"]["detail"].startswith("ja ")
    assert by_reason["eval_contamination"]["detail"].startswith(
        "shares a 20-character n-gram with reviews-test.txt"
    )
    short = by_reason["too_short"]
    assert EMAIL not in short["excerpt"] and "<EMAIL>" in short["excerpt"]


def test_the_sets_kept_out_are_in_the_manifest_and_stats(curated):
    record = curated["manifest"]["config"]["decontamination"][0]
    assert record["name"] == "reviews-test.txt" and record["kind"] == "file"
    assert record["sha256"] == curated["eval_sha256"] and record["examples"] == 2 and record["n"] == 20
    decontamination = curated["stats"]["decontamination"]
    assert decontamination["sets"] == [record]
    assert (decontamination["mode"], decontamination["documents"], decontamination["sentences"]) == (
        "document",
        1,
        0,
    )


def test_report_html_is_written_and_listed(curated):
    out = curated["out"]
    with open(os.path.join(out, "report.html"), encoding="utf-8") as f:
        html = f.read()
    assert "wrong_language" in html and "reviews-test.txt" in html and EMAIL not in html
    assert "report.html" in {o["file"] for o in curated["manifest"]["outputs"]}


def test_options_off_leave_the_text_alone(sample_docs):
    """clean_record with the steps off: the foreign line and the phone number stay."""
    article = [a["sentences"] for a in sample_docs if sum(len(s) for s in a["sentences"]) > 300][0]
    record = {"id": "text:x", "source": "text", "text": "\n".join([*article, ENGLISH, f"电话{PHONE}。"])}
    off = CorpusOptions().replace(languages="off", pii="keep")
    verdict, doc, counts = clean.clean_record(record, off, None)
    assert verdict == "doc" and doc["lines"][-2:] == [ENGLISH, f"电话{PHONE}。"]
    assert not [name for name in counts if name.startswith(("pii/", "language/", "lines_removed/foreign"))]
    verdict, doc, counts = clean.clean_record(record, CorpusOptions().replace(pii="drop"), None)
    assert verdict == "drop" and doc["reason"] == "personal_data" and doc["detail"] == "mobile 1"
    assert counts["pii/mobile"] == 1 and counts["lines_removed/foreign_language"] == 1
    rec = clean.rejected(
        {"id": "text:y", "source": "text", "text": f"电话{PHONE}", "title": EMAIL}, "too_short", "filter"
    )
    assert clean.redact_rejected(dict(rec), CorpusOptions().replace(pii="keep")) == rec
    scrubbed = clean.redact_rejected(dict(rec), CorpusOptions())
    assert (scrubbed["excerpt"], scrubbed["title"]) == ("电话<PHONE>", "<EMAIL>")
