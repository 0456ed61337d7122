"""TestPipeline tests of the dedup transforms (in-memory DirectRunner)."""

import random

import apache_beam as beam
import numpy as np
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from pipelines.corpus import minhash
from pipelines.corpus.dedup import ConnectedComponents, ExactDuplicates, NearDuplicates, RepeatedLines
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.spill import SpillWriter
from pipelines.corpus.tally import Tally, TotalCounts

ARGS = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]


def _pipeline():
    return BeamTestPipeline(argv=ARGS)


def test_exact_duplicates_smallest_id_survives():
    with _pipeline() as p:
        out = (
            p
            | beam.Create([("h1", "b"), ("h1", "a"), ("h1", "c"), ("h2", "d"), ("h1", "a")])
            | ExactDuplicates()
        )
        assert_that(out, equal_to([("b", "a"), ("c", "a")]))


def test_connected_components_exact_even_when_rounds_do_not_converge():
    # a chain of 12 nodes (diameter 11) and a star: 1 round cannot converge, the fallback finishes it
    chain = [(f"n{i:02d}", f"n{i + 1:02d}") for i in range(11)]
    star = [("s0", f"s{i}") for i in range(1, 5)]
    edges = chain[::-1] + star
    expected = [(f"n{i:02d}", "n00") for i in range(1, 12)] + [(f"s{i}", "s0") for i in range(1, 5)]
    for rounds in (0, 2):
        with _pipeline() as p:
            out = p | beam.Create(edges) | ConnectedComponents(rounds)
            assert_that(out, equal_to(expected))


def _handles(folder, sigs: dict[str, bytes]):
    """Signatures written as the cleaning step writes them (one spill file); their handles."""
    writer = SpillWriter(str(folder))
    handles = []
    for doc_id, sig in sigs.items():
        stem, position = writer.add({"id": doc_id}, sig)
        handles.append((doc_id, (f"hash-{doc_id}", stem, position)))
    writer.close()
    return handles


def _doc_signatures(texts: dict[str, str], opts: CorpusOptions):
    return {
        i: minhash.signature(minhash.shingles(t, opts.dedup.shingle_chars), opts.dedup.num_perm).tobytes()
        for i, t in texts.items()
    }


def test_near_duplicates_cluster_and_survivor(tmp_path):
    rng = random.Random(0)
    base = "".join(
        rng.choice("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动")
        for _ in range(400)
    )
    other = "".join(
        rng.choice("天地玄黄宇宙洪荒日月盈昃辰宿列张寒来暑往秋收冬藏闰余成岁律吕调阳云腾致雨露结为霜")
        for _ in range(400)
    )
    edited = base[:200] + "改" + base[201:]  # one character changed
    texts = {"doc-c": base, "doc-a": edited, "doc-b": other, "doc-d": base[:300] + other[:100]}
    opts = CorpusOptions()
    with _pipeline() as p:
        handles = _handles(tmp_path, _doc_signatures(texts, opts))
        out, _ = p | beam.Create(handles) | NearDuplicates(opts, str(tmp_path))
        assert_that(out, equal_to([("doc-c", "doc-a")]))


def test_repeated_lines_boilerplate_and_first_occurrence():
    # per document, its line keys (line 1 listed twice in "a": one entry per occurrence)
    documents = [("a", [1, 1]), ("b", [1, 2]), ("c", [1, 2]), ("z", [3])]
    with _pipeline() as p:
        out, tallies = p | beam.Create(documents) | RepeatedLines(boilerplate_min_docs=3)
        # the keys found repeated, counted as pipeline data (tally.py)
        assert_that(
            (tallies,) | TotalCounts(),
            equal_to([{"lines/boilerplate_keys": 1, "lines/repeated_keys": 1}]),
            label="counts",
        )
        # line 1 is in 3 documents: removed from all; line 2 in two: stays in "b" only
        assert_that(
            out,
            equal_to(
                [
                    ("a", (1, "boilerplate_line")),
                    ("b", (1, "boilerplate_line")),
                    ("c", (1, "boilerplate_line")),
                    ("a", (1, "boilerplate_line")),
                    ("c", (2, "repeated_line")),
                ]
            ),
        )


def test_signature_bytes_roundtrip():
    sig = minhash.signature(minhash.shingles("中华人民共和国成立了。"), 100)
    assert np.array_equal(np.frombuffer(sig.tobytes(), dtype=np.uint32), sig)


def test_survivor_check_keeps_documents_far_from_their_survivor(tmp_path):
    """The survivor check (ComparePairs on (member, survivor)): signatures read from the spill files."""
    from pipelines.corpus.near import ComparePairs

    s = np.arange(10, dtype=np.uint32)
    close, far = s.copy(), s + 50
    close[0] = 77  # agrees on 9 of 10
    far[:3] = s[:3]  # agrees on 3 of 10: chained into the cluster through someone else
    handles = _handles(tmp_path, {"a": s.tobytes(), "b": close.tobytes(), "c": far.tobytes()})
    with _pipeline() as p:
        out, far = {
            "pairs": p | "r" >> beam.Create([("b", "a"), ("c", "a")]),
            "handles": p | "s" >> beam.Create(handles),
        } | ComparePairs(0.6, str(tmp_path), 40, "near_dup/kept_far_from_survivor")
        assert_that(out, equal_to([("b", "a")]))
        assert_that((far,) | TotalCounts(), equal_to([{"near_dup/kept_far_from_survivor": 1}]), label="far")


def test_big_lsh_buckets_link_members_to_the_smallest(monkeypatch, tmp_path):
    from pipelines.corpus import near

    monkeypatch.setattr(near, "BIG_BUCKET", 3)
    # big bucket (4 > 3 members): every member is paired with the smallest id only
    tally = Tally()
    assert sorted(near._bucket_candidates(("k", ["d", "b", "c", "e", "b"]), tally, 64)) == [
        ("b", "c"),
        ("b", "d"),
        ("b", "e"),
    ]
    # small bucket: each member with its window predecessors, in id order
    assert sorted(near._bucket_candidates(("k", ["d", "b", "c"]), tally, 64)) == [
        ("b", "c"),
        ("b", "d"),
        ("c", "d"),
    ]
    assert sorted(near._bucket_candidates(("k", ["d", "b", "c"]), tally, 1)) == [("b", "c"), ("c", "d")]
    assert tally.counts == {"lsh/big_buckets": 1, "lsh/buckets_with_candidates": 2}
    s = np.arange(10, dtype=np.uint32)
    close = s.copy()
    close[0] = 99
    sigs = {"d": close.tobytes(), "b": s.tobytes(), "c": (s + 7).tobytes(), "e": s.tobytes()}
    with _pipeline() as p:
        verified = {
            "pairs": p | "pairs" >> beam.Create([("b", "c"), ("b", "d"), ("b", "e"), ("b", "d")]),
            "handles": p | "handles" >> beam.Create(_handles(tmp_path, sigs)),
        } | near.ComparePairs(0.7, str(tmp_path), 40)
        assert_that(verified[0], equal_to([("b", "d"), ("b", "e")]))  # a repeated pair is compared once
