"""The corpus counts: one builder per family, one parser, and stats.json from them. A name the
parser does not know is refused, never filed under `other`. The counts are pipeline data (tally.py):
a run on a runner without metrics publishes, and its counts equal the Beam counters where a runner
keeps both."""

from __future__ import annotations

import pytest

from pipelines.corpus.accounting import (
    CounterName,
    counters_from_result,
    diagnostic_counter,
    file_counter,
    kept_counter,
    lines_removed_counter,
    parse_counter,
    read_counter,
    rejected_counter,
    stats_from_counts,
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
    stats = stats_from_counts({read_counter("news2016zh"): 3, kept_counter("news2016zh"): 2, name: 1})
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
        stats_from_counts({read_counter("text"): 1, name: 1})


def test_builders_refuse_what_the_parser_could_not_read_back():
    with pytest.raises(ValueError, match="source"):
        read_counter("zh/wiki")
    with pytest.raises(ValueError, match="reason"):
        rejected_counter("text", "", False)
    with pytest.raises(ValueError, match="per-file count"):
        file_counter("lost_pages", "zhwiki:x.bz2")
    with pytest.raises(ValueError, match="diagnostic"):
        diagnostic_counter("dedup", "pairs")


def test_stats_from_counts_files_each_family_where_it_belongs():
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
    stats = stats_from_counts(counters)
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
    stats = stats_from_counts(counters)
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


# --- the counts as pipeline data (tally.py) -----------------------------------------------------------------


def test_a_tally_emits_its_bundle_once_as_data_and_starts_anew():
    from apache_beam.pvalue import TaggedOutput

    from pipelines.corpus.tally import TALLY, SumCounts, Tally

    tally = Tally()
    tally.add(read_counter("text"), 2)
    tally.add(read_counter("text"))
    tally.add(file_counter("lost_bytes", "text:a.txt"), 0)  # a name counted at 0 is kept, as Beam's counter
    (out,) = tally.emit()
    assert isinstance(out, TaggedOutput) and out.tag == TALLY
    assert out.value.value == {"read/text": 3, "file/lost_bytes/text:a.txt": 0}  # a windowed value
    assert tally.counts == {} and list(tally.emit()) == []  # the next bundle starts from nothing
    combine = SumCounts()
    acc = combine.add_input(combine.create_accumulator(), {"read/text": 3})
    merged = combine.merge_accumulators([acc, {"read/text": 1, "kept/text": 1}])
    assert combine.extract_output(merged) == {"read/text": 4, "kept/text": 1}


@pytest.fixture(scope="module")
def run_without_metrics(tmp_path_factory, corpus_inputs, sample_docs):
    """The stage over inputs of every source kind (broken records, a truncated dump, a multistream
    index) plus documents with personal data, another language and a near-duplicate, on a runner
    whose result has no metrics (its metrics() raises NotImplementedError, as DaskRunner's does).
    Returns (out_dir, manifest, the Beam counters as the DirectRunner kept them)."""
    import apache_beam as beam

    from pipelines.corpus.stage import run_corpus
    from tests.pipelines.corpus.fixtures import write_text

    root = tmp_path_factory.mktemp("no-metrics")
    articles = [a["sentences"] for a in sample_docs if sum(len(s) for s in a["sentences"]) > 400][-3:]
    near = [*articles[0][:-1], articles[0][-1][:-2] + "。"]  # the same article, its last sentence cut
    docs = [articles[1] + ["如有疑问，请拨打联系电话13812345678。"], articles[0], near, articles[2]]
    docs.append(
        ["今日は朝から雨が降っていたので、私たちは駅の近くの喫茶店でしばらく休むことにしました。"] * 3
    )
    extra = str(root / "extra.txt")
    write_text(extra, docs)
    real_run, results = beam.Pipeline.run, []

    def run_hiding_metrics(pipeline, *args, **kwargs):
        result = real_run(pipeline, *args, **kwargs)
        results.append(result.metrics)  # the runner's own, read only by this test

        def no_metrics():
            raise NotImplementedError("this runner has no metrics")

        result.metrics = no_metrics
        return result

    mp = pytest.MonkeyPatch()
    mp.setattr(beam.Pipeline, "run", run_hiding_metrics)
    try:
        out = str(root / "corpus")
        specs = [*corpus_inputs["specs"], f"text:{extra}"]
        flags = ["--direct_running_mode=in_memory"]
        manifest = run_corpus(
            specs, out, extra_beam_flags=flags, max_dead_letter_fraction=0.05, accept_cut_inputs=True
        )
    finally:
        mp.undo()
    (metrics,) = results

    class _Result:  # counters_from_result reads result.metrics()
        def metrics(self):
            return metrics()

    return out, manifest, counters_from_result(_Result())


def test_a_runner_without_metrics_publishes_and_the_counts_equal_the_counters(run_without_metrics):
    import json
    import os

    out, manifest, counters = run_without_metrics
    assert os.path.exists(os.path.join(out, "manifest.json")) and manifest["counts"]["kept"] > 0
    with open(os.path.join(out, "stats.json"), encoding="utf-8") as f:
        stats = json.load(f)
    # what the launcher adds after the counts: the mode, the sets kept out, the lost ids per file
    for key in ("pii_mode", "decontamination"):
        stats.pop(key)
    for entry in stats["files"].values():
        entry.get("lost", {}).pop("ids", None)
    assert stats == json.loads(json.dumps(stats_from_counts(counters)))
    # every family of counts took part but two diagnostics (index_unreadable, counted in _ReadWork
    # as `read` is; near_dup, in a counted regroup as lsh is: test_dedup.py checks its tally)
    families = {parse_counter(name).family for name in counters}
    assert families >= {
        "read",
        "kept",
        "dropped",
        "dead_letter",
        "lines_removed",
        "file",
        "chars",
        "length",
        "language",
        "pii",
        "near_cluster",
        "lsh",
        "lines",
    }, families
    assert stats["invariant"]["holds"] and stats["lost"]["records"] > 0
