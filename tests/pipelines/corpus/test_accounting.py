"""The corpus counters: one builder per family, one parser, and stats.json from them. A name the
parser does not know is refused, never filed under `other`."""

from __future__ import annotations

import pytest

from pipelines.corpus.accounting import (
    CounterName,
    diagnostic_counter,
    file_counter,
    kept_counter,
    lines_removed_counter,
    parse_counter,
    read_counter,
    rejected_counter,
    stats_from_counters,
)


def test_every_builder_round_trips_through_the_parser():
    assert parse_counter(read_counter("zhwiki")) == CounterName("read", source="zhwiki")
    assert parse_counter(kept_counter("text")) == CounterName("kept", source="text")
    assert parse_counter(rejected_counter("text", "too_short", False)) == CounterName(
        "dropped", source="text", detail="too_short"
    )
    assert parse_counter(rejected_counter("text", "malformed_json", True)) == CounterName(
        "dead_letter", source="text", detail="malformed_json"
    )
    assert parse_counter(lines_removed_counter("boilerplate_line")) == CounterName(
        "lines_removed", detail="boilerplate_line"
    )
    key = "wiki2019zh:AA/wiki_00"  # a file key whose NAME holds a folder
    assert parse_counter(file_counter("lost_bytes", key)) == CounterName(
        "file", detail="lost_bytes", file=key
    )
    assert parse_counter(diagnostic_counter("lsh", "big_buckets")) == CounterName("lsh", detail="big_buckets")


def test_a_reason_with_a_slash_is_counted_as_that_reason():
    name = rejected_counter("news2016zh", "bad/encoding", True)
    assert parse_counter(name) == CounterName("dead_letter", source="news2016zh", detail="bad/encoding")
    stats = stats_from_counters({read_counter("news2016zh"): 3, kept_counter("news2016zh"): 2, name: 1})
    assert stats["dead_letter"] == {"bad/encoding": 1}
    assert stats["by_source"]["news2016zh"]["dead_letter"] == {"bad/encoding": 1}
    assert stats["other"] == {} and stats["invariant"]["holds"]


@pytest.mark.parametrize(
    "name",
    [
        "skipped/text/too_short",  # a new family nobody taught the parser
        "read",  # no source
        "read/a/b",  # a source is one word
        "dropped/text",  # no reason
        "file/lost_pages/zhwiki:x.bz2",  # a per-file count that does not exist
        "file/read",  # no file key
        "lsh/",  # a diagnostic without its name
    ],
)
def test_a_name_of_no_known_shape_is_refused(name):
    with pytest.raises(ValueError, match="corpus counter"):
        parse_counter(name)
    with pytest.raises(ValueError, match="corpus counter"):
        stats_from_counters({read_counter("text"): 1, name: 1})


def test_builders_refuse_what_the_parser_could_not_read_back():
    with pytest.raises(ValueError, match="source"):
        read_counter("zh/wiki")
    with pytest.raises(ValueError, match="reason"):
        rejected_counter("text", "", False)
    with pytest.raises(ValueError, match="per-file count"):
        file_counter("lost_pages", "zhwiki:x.bz2")
    with pytest.raises(ValueError, match="diagnostic"):
        diagnostic_counter("dedup", "pairs")


def test_stats_from_counters_files_each_family_where_it_belongs():
    key = "zhwiki:zhwiki-1-pages-articles-multistream.xml.bz2"
    counters = {
        read_counter("zhwiki"): 10,
        kept_counter("zhwiki"): 7,
        rejected_counter("zhwiki", "redirect", False): 2,
        rejected_counter("zhwiki", "record_too_large", True): 1,
        lines_removed_counter("repeated_line"): 4,
        file_counter("read", key): 10,
        file_counter("listed", key): 10,
        diagnostic_counter("lines", "boilerplate_keys"): 2,
        diagnostic_counter("index_unreadable", "zhwiki"): 1,
    }
    stats = stats_from_counters(counters)
    assert (stats["read"], stats["kept"], stats["dropped_total"], stats["dead_letter_total"]) == (10, 7, 2, 1)
    assert stats["by_source"]["zhwiki"] == {
        "read": 10,
        "kept": 7,
        "dropped": {"redirect": 2},
        "dead_letter": {"record_too_large": 1},
    }
    assert stats["lines_removed"] == {"repeated_line": 4}
    assert stats["files"] == {key: {"read": 10, "listed": 10}}
    assert stats["other"] == {"index_unreadable/zhwiki": 1, "lines/boilerplate_keys": 2}
    assert stats["invariant"]["holds"] and stats["index_invariant"]["holds"]


def test_the_report_families_round_trip_and_land_in_their_stats_keys():
    from pipelines.corpus.accounting import (
        chars_counter,
        language_counter,
        length_bucket,
        length_counter,
        near_cluster_counter,
        pii_counter,
    )

    assert [length_bucket(n) for n in (0, 1, 2, 3, 4, 7, 8, 1000, 1 << 30)] == [
        0,
        1,
        2,
        2,
        4,
        4,
        8,
        512,
        1 << 20,
    ]
    assert parse_counter(chars_counter("kept", "zhwiki")) == CounterName(
        "chars", source="zhwiki", detail="kept"
    )
    assert parse_counter(length_counter("before", 1000)) == CounterName("length", detail="before", bucket=512)
    assert parse_counter(language_counter("ja")) == CounterName("language", detail="ja")
    assert parse_counter(pii_counter("email")) == CounterName("pii", detail="email")
    assert parse_counter(near_cluster_counter(3)) == CounterName("near_cluster", bucket=3)
    counters = {
        read_counter("text"): 3,
        kept_counter("text"): 3,
        chars_counter("read", "text"): 900,
        chars_counter("kept", "text"): 700,
        length_counter("before", 300): 2,
        length_counter("before", 3): 1,
        length_counter("after", 300): 3,
        language_counter("zh"): 3,
        pii_counter("mobile_phone"): 2,
        near_cluster_counter(12): 1,
        near_cluster_counter(2): 4,
    }
    stats = stats_from_counters(counters)
    assert stats["chars"] == {"read": {"text": 900}, "kept": {"text": 700}}
    # buckets in numeric order, keyed by their lower bound as a string (JSON)
    assert list(stats["length_hist"]["before"].items()) == [("2", 1), ("256", 2)]
    assert stats["length_hist"]["after"] == {"256": 3}
    assert stats["languages"] == {"zh": 3} and stats["pii"] == {"mobile_phone": 2}
    assert list(stats["near_dup_clusters"].items()) == [("2", 4), ("12", 1)]
    assert stats["other"] == {} and stats["invariant"]["holds"]


@pytest.mark.parametrize(
    "name", ["chars/written/text", "chars/read", "length/before/x", "length/during/4", "near_cluster/two"]
)
def test_a_report_counter_of_the_wrong_shape_is_refused(name):
    with pytest.raises(ValueError, match="corpus counter"):
        parse_counter(name)
