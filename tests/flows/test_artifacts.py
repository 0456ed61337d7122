"""The stage artifacts as a person reads them in the Prefect UI: every number rounded (core.figures.sig),
number columns that hold numbers only, narrow tables, paths in the description and never in a cell,
the corpus accounting as a sum that holds on the numbers shown, the vocabulary's size asked and built,
and training-summary's eval figures labelled with the sequences they cover. The row builders on
hand-made inputs, then the artifacts of the tiny chain read back from the test Prefect API."""

from __future__ import annotations

import json
import re

import pytest

from flows.build_corpus import corpus_stats_rows
from flows.build_instances import instance_stats_rows
from flows.pretrain_artifact import training_rows
from flows.train_vocab import vocab_stats_rows
from pipelines.vocab import size_reasons
from tests.flows.conftest import Artifact, _post

NUMBER = re.compile(r"-?\d{1,3}(,\d{3})*(\.\d+)?(e[-+]\d+)?")


def rounded_number(cell: str, digits: int = 4) -> bool:
    """A number as core.figures.sig writes it: digits with thousands commas; a fraction keeps at most
    `digits` significant digits (a whole number keeps all of its own: a count is exact)."""
    if not isinstance(cell, str) or not NUMBER.fullmatch(cell):
        return False
    mantissa = cell.lstrip("-").split("e")[0].replace(",", "")
    if "." not in mantissa:
        return True
    return len(mantissa.replace(".", "").lstrip("0")) <= digits


def count(cell: str) -> int:
    return int(cell.replace(",", ""))


def assert_numbers_only(rows: list[dict], columns: list[str], digits: int = 4) -> None:
    for row in rows:
        for column in columns:
            assert rounded_number(row[column], digits), (column, row)


# ------------------------------------------------------------------------------------ the row builders


def corpus_stats(read: int = 1000) -> dict:
    return {
        "read": read,
        "kept": 953,
        "dropped": {"too_short": 31, "near_duplicate": 12},
        "dead_letter": {"unreadable": 4},
    }


def test_corpus_stats_rows_are_a_sum_a_person_can_check():
    rows = corpus_stats_rows(corpus_stats())
    assert_numbers_only(rows, ["documents"])
    assert_numbers_only(rows, ["% of read"], digits=3)
    by = {(r["outcome"], r["reason"]): count(r["documents"]) for r in rows}
    assert by[("dead letters", "unreadable")] == 4 and by[("dead letters", "all reasons")] == 4
    assert by[("dropped", "all reasons")] == 31 + 12
    # the accounting, on the numbers shown: kept + dropped + dead letters = read
    total = by[("kept", "")] + by[("dropped", "all reasons")] + by[("dead letters", "all reasons")]
    assert total == by[("read", "every record of the inputs")] == 1000
    assert rows[-1] == {
        "outcome": "kept + dropped + dead letters",
        "reason": "= read: holds",
        "documents": "1,000",
        "% of read": "100",
    }
    assert next(r for r in rows if r["reason"] == "too_short")["% of read"] == "3.10"


def test_corpus_stats_rows_show_a_broken_accounting_and_an_empty_dead_letter_row():
    stats = {**corpus_stats(read=1001), "dead_letter": {}}
    rows = corpus_stats_rows(stats)
    assert ("dead letters", "all reasons", "0") in [(r["outcome"], r["reason"], r["documents"]) for r in rows]
    assert rows[-1]["reason"] == "≠ read: BROKEN" and rows[-1]["documents"] == "996"


def test_instance_stats_rows_are_rounded_and_narrow():
    figures = {
        "documents": 2948,
        "instances": 16650,
        "fill_rate": 0.83661234,
        "masked_fraction": 0.149912,
        "masked_per_instance": 16.0612,
        "sop_swapped_fraction": 0.4953987,
    }
    rows = instance_stats_rows({"accounting": {}, "train": figures})
    assert rows == [
        {
            "split": "train",
            "documents": "2,948",
            "instances": "16,650",
            "fill rate": "0.8366",
            "masked share": "0.1499",
            "SOP swapped": "0.4954",
        }
    ]


def vocab_manifest(built: int = 4751) -> dict:
    return {
        "config": {"vocab_size": 8000, "character_coverage": 0.9995},
        "counts": {
            "sentences_seen": 45769,
            "sentences_sampled": 45769,
            "atomic_single_char_pieces": 4054,
            "vocab_size": built,
            "repeated_pieces_dropped": 18,
        },
    }


def test_vocab_stats_rows_state_asked_and_built():
    rows = {r["figure"]: r["value"] for r in vocab_stats_rows(vocab_manifest(), 3113)}
    assert rows["vocabulary size asked"] == "8,000" and rows["pieces built"] == "4,751"
    assert rows["character coverage"] == "0.9995" and rows["corpus documents"] == "3,113"
    assert rows["corpus sentences"] == "45,769"
    assert all(rounded_number(v) for v in rows.values())


def test_size_reasons_say_why_fewer_pieces_were_built():
    why = size_reasons(vocab_manifest()["counts"], 8000)
    assert why == [
        "SentencePiece found no more in this text (45,769 sentences), where 4,054 pieces are single CJK "
        "characters and punctuation marks (split_cjk) that no learned piece may contain",
        "18 repeated pieces were dropped (such as '11' beside '1')",
    ]
    # only the repeated pieces: SentencePiece learned all that was asked
    assert size_reasons(vocab_manifest(built=7982)["counts"], 8000) == [why[1]]
    assert size_reasons(vocab_manifest(built=8000)["counts"], 8000) == []


def training_summary(sequences: int | None = 320) -> dict:
    last_eval = {
        "kind": "eval",
        "step": 250,
        "masked_lm_loss": 6.297901184189593,
        "masked_lm_accuracy": 0.07851967887213629,
        "sentence_order_accuracy": 0.51875,
    }
    if sequences is not None:
        last_eval["sequences"] = sequences
    return {
        "first_train": {"step": 10, "loss": 7.193497735348039},
        "last_train": {
            "step": 250,
            "loss": 6.979805905611076,
            "mlm_acc": 0.06830243810568773,
            "sop_acc": 0.44375,
            "tokens_per_s": 635.2697825432106,
        },
        "last_eval": last_eval,
        "loss_curve_png": "/x/runs/k/curves.png",
    }


def test_training_rows_are_rounded_and_say_what_the_eval_covered():
    rows = training_rows(training_summary(), split_sequences=905)
    assert all(set(r) == {"figure", "value", "measured on"} for r in rows)
    assert_numbers_only(rows, ["value"])
    values = [(r["figure"], r["value"]) for r in rows]
    assert ("train loss", "7.193") in values and ("tokens/s", "635.3") in values
    assert ("train MLM accuracy", "0.06830") in values and ("eval MLM loss", "6.298") in values
    evals = [r for r in rows if r["figure"].startswith("eval ")]
    assert len(evals) == 3
    assert {r["measured on"] for r in evals} == {"trainer's eval, step 250: 320 of 905 sequences"}
    assert not any("/" in r["value"] or "/x/" in r["measured on"] for r in rows)  # paths: the description


@pytest.mark.parametrize(
    "sequences, split, scope",
    [
        (905, 905, "all 905 sequences"),
        (160, 40, "160 sequences (40 repeated)"),
        (320, None, "320 sequences"),
        (None, 905, "first batches"),  # a record from before the count
    ],
)
def test_training_rows_name_the_eval_scope_in_every_case(sequences, split, scope):
    rows = training_rows(training_summary(sequences), split_sequences=split)
    assert rows[-1]["measured on"] == f"trainer's eval, step 250: {scope}"


# ----------------------------------------------------------------------- the chain's artifacts, read back


def artifact_of(key: str, folder: str) -> Artifact:
    """The newest artifact with this key whose description names `folder` (other tests of the session
    make artifacts of the same key for other folders)."""
    body = {"artifacts": {"key": {"any_": [key]}}, "sort": "CREATED_DESC", "limit": 50}
    found = [Artifact(raw) for raw in _post("/artifacts/filter", body)]
    matching = [a for a in found if f"`{folder}`" in a.description]
    assert matching, f"no {key} artifact of {folder} among {len(found)}"
    return matching[0]


def no_path_in_cells(rows: list[dict], root: str) -> None:
    assert not any(root in str(cell) for row in rows for cell in [*row, *row.values()])


def test_chain_corpus_stats_add_up(chain):
    r = chain["result"]["corpus"]
    art = artifact_of("corpus-stats", r["dir"])
    rows = json.loads(art.data)
    assert len(rows[0]) <= 6
    assert_numbers_only(rows, ["documents"])
    by = {(row["outcome"], row["reason"]): count(row["documents"]) for row in rows}
    assert by[("read", "every record of the inputs")] == r["counts"]["read"] == 50
    assert by[("kept", "")] == r["counts"]["kept"]
    assert ("dead letters", "all reasons") in by
    shown = by[("kept", "")] + by[("dropped", "all reasons")] + by[("dead letters", "all reasons")]
    assert (
        shown
        == by[("read", "every record of the inputs")]
        == by[("kept + dropped + dead letters", "= read: holds")]
    )
    assert f"= read {r['counts']['read']}: **holds**" in art.description
    no_path_in_cells(rows, chain["root"])


def test_chain_vocab_stats_say_asked_and_built(chain):
    r = chain["result"]["vocab"]
    art = artifact_of("vocab-stats", r["dir"])
    rows = {row["figure"]: row["value"] for row in json.loads(art.data)}
    built = r["counts"]["vocab_size"]
    assert rows["vocabulary size asked"] == "3,000" and count(rows["pieces built"]) == built
    assert all(rounded_number(v) for v in rows.values()), rows
    assert built < 3000  # 50 articles hold fewer pieces: the description says why
    assert f"Asked 3,000 pieces, built {built:,}: SentencePiece found no more in this text" in art.description


def test_chain_instance_stats_are_rounded(chain):
    r = chain["result"]["instances"]
    rows = json.loads(artifact_of("instance-stats", r["dir"]).data)
    assert [row["split"] for row in rows] == ["train", "eval"] and len(rows[0]) <= 6
    assert_numbers_only(rows, ["documents", "instances", "fill rate", "masked share", "SOP swapped"])
    assert count(rows[0]["instances"]) == r["summary"]["train"]["instances"]
    assert 0.4 < float(rows[0]["SOP swapped"]) < 0.6


def test_chain_training_summary_labels_its_eval_figures(chain):
    run = chain["result"]["pretrain"]
    art = artifact_of("training-summary", run["dir"])
    rows = json.loads(art.data)
    assert all(len(row) == 3 for row in rows)
    assert_numbers_only(rows, ["value"])
    no_path_in_cells(rows, chain["root"])
    # the paths and the word on the gate's figures are in the description
    assert f"`{run['checkpoint']}`" in art.description and "curves.png`" in art.description
    assert "eval-metrics" in art.description
    # the eval figures say how many sequences they cover: those the trainer counted in its record
    last_eval = run["summary"]["last_eval"]
    assert last_eval["sequences"] == 20 * 8  # eval_batches (default) batches of the chain's batch of 8
    split = chain["result"]["instances"]["summary"]["eval"]["instances"]
    mlm = next(row for row in rows if row["figure"] == "eval MLM loss")
    assert mlm["measured on"].startswith("trainer's eval, step 4: 160 ")
    assert f"{split:,}" in mlm["measured on"]


def test_training_rows_of_a_run_that_logged_no_window():
    summary = {**training_summary(), "first_train": None, "last_train": None}
    rows = training_rows(summary, split_sequences=905)
    assert [r["figure"] for r in rows] == ["steps", "eval MLM loss", "eval MLM accuracy", "eval SOP accuracy"]
    assert rows[0]["value"] == "250"
