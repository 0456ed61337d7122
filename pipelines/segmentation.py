"""How well the Chinese word segmenter (rjieba) agrees with a gold segmentation.

Whole-word masking is only as good as the word boundaries: this measures them against the People's
Daily sample's gold words, on NFKC-normalised text, ignoring white space.
"""

from __future__ import annotations

from core.tokenizer_normalizer import normalize


def _spans(words: list[str]) -> set[tuple[int, int]]:
    spans, pos = set(), 0
    for w in words:
        spans.add((pos, pos + len(w)))
        pos += len(w)
    return spans


def boundary_agreement(docs: list[dict]) -> dict:
    """Precision/recall/F1 of rjieba's word boundaries and of whole words, against each document's
    gold `words` (sentence by sentence)."""
    import rjieba

    tp_b = pred_b = gold_b = tp_w = pred_w = gold_w = 0
    for d in docs:
        for gold in d.get("words", []):
            gold = [x for x in (normalize(w).replace(" ", "") for w in gold) if x]
            text = "".join(gold)
            if not text:
                continue
            pred = [w for w in rjieba.cut(text) if w.strip()]
            g, p = _spans(gold), _spans(pred)
            gb, pb = {s for s, _ in g} - {0}, {s for s, _ in p} - {0}
            tp_b += len(gb & pb)
            pred_b += len(pb)
            gold_b += len(gb)
            tp_w += len(g & p)
            pred_w += len(p)
            gold_w += len(g)

    def f1(tp, pred, gold):
        prec, rec = tp / max(pred, 1), tp / max(gold, 1)
        return prec, rec, 2 * prec * rec / max(prec + rec, 1e-12)

    bp, br, bf = f1(tp_b, pred_b, gold_b)
    wp, wr, wf = f1(tp_w, pred_w, gold_w)
    return {
        "boundary_precision": round(bp, 4),
        "boundary_recall": round(br, 4),
        "boundary_f1": round(bf, 4),
        "word_precision": round(wp, 4),
        "word_recall": round(wr, 4),
        "word_f1": round(wf, 4),
        "gold_words": gold_w,
    }
