"""Models that predict one thing, named as such: an SOP head that predicts the same sentence order for
every eval sequence, a fine-tuned classifier that is right on one class only, an NER model that finds
no entity. Their scores can pass a comparison with a trivial baseline (a constant head IS the majority
baseline, or its mirror image), so the gate and the summaries say what they are (docs/gate.md,
"Constant predictors").

What each detection reads, and why it is exact or how far it goes:
- SOP (`sop_constant`): the eval sample holds whether the model was right per sequence, and the
  baselines whether "always the train-majority label" was right, i.e. whether the sequence's label IS
  that label. With two labels, the model predicted the majority label on sequence i exactly when both
  agree there. So the head is constant exactly when they agree everywhere (it always predicts the
  majority label) or nowhere (always the other one). No prediction needs to be stored.
- NER (`downstream_degenerate`, entity F1): the per-example counts give the entities a model predicted
  (true + false positives); none in a seed's whole test split is "finds no entity", exactly.
- Classification: right/wrong per example cannot tell a constant predictor. The report's accuracy a
  and macro-F1 over K labels can: a model whose right answers are all of one class c, with every
  example gold c or predicted c, has F1 2a/(1 + a) on c and 0 on every other class, so macro-F1 =
  2a / ((1 + a) K). A constant predictor always satisfies it, and with two labels a model satisfies
  it exactly when it is never right on one of the two classes (a constant predictor or worse). Any
  other model satisfies it only by an exact coincidence of fractions.
"""

from __future__ import annotations

import math

from promotion.samples import Baselines, DownstreamSample, EvalSample


def sop_constant(sample: EvalSample, baselines: Baselines | None) -> str | None:
    """The label an SOP head predicts for every eval sequence ("the train-majority label" or "the
    other label"), or None when it predicts both (or there are no baselines to tell)."""
    if baselines is None or sample.n == 0 or baselines.n != sample.n:
        return None
    majority = sample.sop_correct == baselines.sop_majority_correct  # predicted the majority label
    if majority.all():
        return "the train-majority label"
    if not majority.any():
        return "the other label than the train majority's"
    return None


def sop_constant_warning(label: str) -> str:
    """The line every text shows for a constant SOP head (the decision's reasons, the summaries)."""
    return (
        f"the SOP head predicts one label for every sequence ({label}): a constant predictor, it has not "
        "learned the sentence order (named, not a veto: docs/gate.md)"
    )


def _seeds(seeds: list, k: int) -> str:
    if k == 1:
        return "its one run"
    return f"{len(seeds)} of {k} seeds" if len(seeds) < k else f"all {k} seeds"


def _one_class(scores: dict, labels: int) -> bool:
    """Accuracy and macro-F1 of a run are those of a model right on one class only (module docstring)."""
    a, macro = scores.get("accuracy"), scores.get("macro_f1")
    if not isinstance(a, int | float) or not isinstance(macro, int | float) or labels < 2:
        return False
    return math.isclose(macro, 2 * a / ((1 + a) * labels), rel_tol=1e-9, abs_tol=1e-12)


def downstream_degenerate(report: dict) -> dict[str, str]:
    """Model name -> what it does, for each model of an `albert finetune` report that finds no entity
    (entity F1) or is right on one class only (accuracy) on the compared split, in some seed's run:
    "finds no entity (all 2 seeds)", "is right on one class only, as a constant predictor (1 of 2
    seeds)". Models that do neither are left out."""
    metric = report.get("metric", "accuracy")
    per_example = report.get("per_example") or {}
    split = per_example.get("split") or (report.get("lift") or {}).get("split")
    found: dict[str, str] = {}
    for name, entry in (report.get("models") or {}).items():
        if metric == "entity_f1":
            if not per_example.get(name):
                continue
            sample = DownstreamSample.from_json(per_example[name])
            predicted = sample.true_positives + sample.false_positives  # [k, n] entities predicted
            empty = [seed for seed, row in zip(sample.seeds, predicted) if not row.any()]
            if empty:
                found[name] = f"finds no entity ({_seeds(empty, sample.k)})"
        else:
            runs = entry.get("runs") or []
            labels = len(report.get("labels") or [])
            flat = [run.get("seed") for run in runs if _one_class(run.get(split) or {}, labels)]
            if flat:
                found[name] = (
                    f"is right on one class only, as a constant predictor ({_seeds(flat, len(runs))})"
                )
    return found
