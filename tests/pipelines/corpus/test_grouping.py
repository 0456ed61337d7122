"""grouping.py: batched GroupByKey / CoGroupByKey give what Beam's own give, on a real runner."""

import subprocess
import sys

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from pipelines.corpus.grouping import CoGroupInPartitions, GroupInPartitions, partition_of

ARGS = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]


def _sorted_groups(kv):
    key, values = kv
    return key, sorted(values)


def _sorted_cogroups(kv):
    key, groups = kv
    return key, {tag: sorted(values) for tag, values in groups.items()}


def test_group_in_partitions_equals_group_by_key():
    # many keys, repeated values, keys of three kinds in three collections; tiny batches and few
    # partitions so that every key spans several batches and partitions hold several keys
    pairs = [(k % 97, f"v{k}") for k in range(2000)] + [(5, "v5")]
    strings = [(f"key-{k % 13}", k) for k in range(300)]
    tuples = [((k % 3, k % 7), b"x" * (k % 4)) for k in range(100)]
    with BeamTestPipeline(argv=ARGS) as p:
        for name, data in (("ints", pairs), ("strings", strings), ("tuples", tuples)):
            pcoll = p | f"Create{name}" >> beam.Create(data)
            ours = pcoll | f"Ours{name}" >> GroupInPartitions(partitions=7, flush=50)
            theirs = pcoll | f"Beam{name}" >> beam.GroupByKey()
            expected = {}
            for k, v in data:
                expected.setdefault(k, []).append(v)
            assert_that(
                ours | f"Sort{name}" >> beam.Map(_sorted_groups),
                equal_to([(k, sorted(v)) for k, v in expected.items()]),
                label=f"ours-{name}",
            )
            assert_that(
                theirs | f"SortBeam{name}" >> beam.Map(_sorted_groups),
                equal_to([(k, sorted(v)) for k, v in expected.items()]),
                label=f"beam-{name}",
            )


def test_cogroup_in_partitions_lists_every_tag():
    left = [("a", 1), ("b", 2), ("a", 3)]
    right = [("b", "x"), ("c", "y")]
    with BeamTestPipeline(argv=ARGS) as p:
        out = {
            "left": p | "l" >> beam.Create(left),
            "right": p | "r" >> beam.Create(right),
        } | CoGroupInPartitions(partitions=3, flush=2)
        assert_that(
            out | beam.Map(_sorted_cogroups),
            equal_to(
                [
                    ("a", {"left": [1, 3], "right": []}),
                    ("b", {"left": [2], "right": ["x"]}),
                    ("c", {"left": [], "right": ["y"]}),
                ]
            ),
        )


def test_partitions_agree_across_processes():
    """Workers are separate processes with their own str hash seed: the partition must not depend
    on it, or a key's entries would be regrouped in different places."""
    keys = ["zhwiki:12", "news2016zh:abc", ("x", 3), 12345678901234567890]
    code = (
        f"from pipelines.corpus.grouping import partition_of; print([partition_of(k, 256) for k in {keys!r}])"
    )
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONHASHSEED": seed, "PYTHONPATH": "."},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert seen == {f"{[partition_of(k, 256) for k in keys]}\n"}


def _letters(word):
    """explode: a word -> (letter, word) for each of its letters (repeats included)."""
    return [(letter, word) for letter in word]


def _count_words(kv):
    """then: (letter, [words]) -> one (letter, count) for letters in two or more words."""
    letter, words = kv
    if len(set(words)) >= 2:
        yield letter, len(words)


def test_explode_and_then_equal_the_steps_they_replace():
    """explode runs inside the batching step and then inside the regrouping step: the result is what
    FlatMap(explode) | GroupByKey | FlatMap(then) gives, on a real runner."""
    words = ["beam", "batch", "group", "bandit", "zz", "map", "abba"]
    with BeamTestPipeline(argv=ARGS) as p:
        pcoll = p | beam.Create(words)
        ours = pcoll | "Ours" >> GroupInPartitions(partitions=3, flush=4, explode=_letters, then=_count_words)
        theirs = (
            pcoll
            | "Explode" >> beam.FlatMap(_letters)
            | "Group" >> beam.GroupByKey()
            | "Then" >> beam.FlatMap(lambda kv: _count_words((kv[0], list(kv[1]))))
        )
        expected = {}
        for w in words:
            for letter in w:
                expected.setdefault(letter, []).append(w)
        want = [(k, len(v)) for k, v in expected.items() if len(set(v)) >= 2]
        assert ("a", 6) in want and ("z", 2) not in want  # "zz": one word, so no z
        assert_that(ours, equal_to(want), label="ours")
        assert_that(theirs, equal_to(want), label="beam")


def _joined(kv):
    key, groups = kv
    yield key, sorted(groups["left"]), sorted(groups["right"])


def test_cogroup_explode_per_input_and_then():
    """Each input has its own explode (or none); then sees every tag, empty lists included."""
    with BeamTestPipeline(argv=ARGS) as p:
        left = p | "l" >> beam.Create([("a", [1, 2]), ("b", [3])])  # exploded: (a, 1), (a, 2), (b, 3)
        right = p | "r" >> beam.Create([("b", "x"), ("c", "y")])  # as they are
        out = {"left": left, "right": right} | CoGroupInPartitions(
            partitions=2, flush=1, explode={"left": lambda kv: [(kv[0], v) for v in kv[1]]}, then=_joined
        )
        assert_that(out, equal_to([("a", [1, 2], []), ("b", [3], ["x"]), ("c", [], ["y"])]))
