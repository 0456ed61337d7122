"""The gate's decision for people: p-values as they are printed, the names of the references, the
markdown table of every test, and a promotion's outcome around it (the promote flow's
`promotion-decision` artifact).
"""

from __future__ import annotations

from typing import Protocol


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


def _cell(x: float | None, digits: int) -> str:
    return "-" if x is None else f"{x:+.{digits}f}"


def decision_table_markdown(decision: DecisionLike | dict) -> str:
    """The decision as a markdown table: every test with its estimate, 95% interval and p-value, then
    the rule in one sentence and the reasons. Accepts a Decision or its to_dict()."""
    decided = decision if isinstance(decision, dict) else decision.to_dict()
    gate = decided.get("gate") or {}
    alpha = gate.get("alpha", 0.05)
    lines = [
        f"Gate: **{'pass' if decided['promote'] else 'fail'}**",
        "",
        "| role | metric | candidate | reference | change (+ = candidate better) | 95% CI | p | threshold "
        "| test | ok |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in [*decided["checks"], *decided.get("info", [])]:
        digits = 4 if c["role"] == "primary" else 3  # nats of the MLM loss; accuracies
        metric = c["metric"] + (f" ({c['task']})" if c.get("task") else "")
        p = format_p(c["p_value"])
        if c["p_value"] != c.get("p_raw", c["p_value"]):
            p += f" (raw {format_p(c['p_raw'])})"
        lo, hi = c["ci95"]
        ok = {True: "yes", False: "**NO**", None: "(info)"}[c["ok"]]
        cells = [
            c["role"],
            metric,
            f"{c['candidate']:.{digits}f}",
            f"{c['reference']:.{digits}f} {vs_label(c['reference_kind'])}",
            f"{c['delta']:+.{digits}f}",
            f"[{_cell(lo, digits)}, {_cell(hi, digits)}]",
            p,
            _cell(c["threshold"], digits),
            c["test"],
            ok,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    n_secondary = sum(c["role"] == "secondary" for c in decided["checks"])
    adjusted = f", p {gate.get('correction', 'bonferroni')}-adjusted over {n_secondary} secondaries"
    rule = (
        "Promote only if the MLM loss improves by more than its threshold significantly"
        f" (one-sided p < {alpha:g})"
        " and no secondary metric drops by more than its threshold significantly"
        f" (one-sided{adjusted if n_secondary > 1 else ''})."
    )
    lines += ["", rule, "", "Reasons:", ""] + [f"- {r}" for r in decided["reasons"]]
    return "\n".join(lines)


def promotion_markdown(result: dict, model: str, registry: str) -> str:
    """A promotion's outcome (PromotionResult.to_dict() with its "candidate") for people: the verdict,
    what the candidate faced, the decision table and the reasons (the `promotion-decision` artifact)."""
    verdict = {
        "promote": f"PROMOTED as **{result['version']}**",
        "reject": "REJECTED",
        "conflict": f"NOT PROMOTED (conflict): registered as {result['version']}, production is {result['production']}",
    }[result["event"]]
    lines = [
        f"# Promotion of `{result.get('candidate', '')}`: {verdict}",
        "",
        f"Registry `{registry}`, model `{model}`; compared against: "
        f"{result['previous'] or 'the trivial baselines (no production model yet)'}.",
        "",
        decision_table_markdown(result["decision"]),
        "",
        "Reasons:",
        "",
    ]
    lines += [f"- {r}" for r in result["decision"]["reasons"]]
    return "\n".join(lines)
