"""Evaluation sets kept out of pretraining, as the gate sees them: a downstream task is compared only
when the candidate's corpus was decontaminated against that task's evaluation sets (docs/gate.md,
docs/decontamination.md). Pure logic: the corpus manifest is read by the caller."""

from __future__ import annotations


def task_of(pair: tuple) -> str | None:
    """The task of a (candidate, production) pair of DownstreamSample, either side may be None."""
    return next((side.task for side in pair if side is not None), None)


def refused_tasks(
    tasks: list[str | None], decontaminated: dict[str, bool | None], reasons: list[str]
) -> set[str]:
    """The downstream tasks the gate refuses to compare (the candidate's corpus was not decontaminated
    against their evaluation sets); a reason for each, and for each task whose status is unknown."""
    refused = set()
    for task in sorted({t for t in tasks if t is not None}):
        status = decontaminated.get(task)
        if status is False:
            refused.add(task)
            reasons.append(
                f"downstream ({task}): REFUSED, not compared: the candidate's corpus was not "
                f"decontaminated against {task}'s evaluation sets, so its score may reward memorised "
                f"test examples (rebuild the corpus with --decontaminate {task})"
            )
        elif status is None and task in decontaminated:
            reasons.append(
                f"downstream ({task}): compared, but whether the candidate's corpus was decontaminated "
                f"against its evaluation sets is unknown (no corpus lineage)"
            )
    return refused


def coverage(tasks: list[str], corpus_manifest: dict | None) -> dict[str, bool | None]:
    """Per task: was the corpus of this manifest decontaminated against it (`--decontaminate TASK`,
    recorded under config.options.decontaminate)? None for every task when there is no manifest (the
    candidate's corpus is not known)."""
    if corpus_manifest is None:
        return {task: None for task in tasks}
    kept_out = set(corpus_manifest.get("config", {}).get("options", {}).get("decontaminate") or ())
    return {task: task in kept_out for task in tasks}
