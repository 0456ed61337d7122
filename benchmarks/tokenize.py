"""`albert bench tokenize`: the encode path with compiled normalization vs the older Python path.

Both vocabularies are trained here on the same text with the same settings (`albert vocab`'s
defaults, `--normalization compiled` and `--normalization python`), then every document of the text
is normalized and tokenized by each, interleaved, best of `--repeats` (CPU time, one process):

    normalize   raw sentences -> the text the tokenizer segments (SentencePiece's own normalizer, in
                C++, vs the Python rules)
    segment     normalized sentences -> ids (Tokenizer.encode_document, the instance stage's call)
    together    both: what a document costs on the way to an instance

Also printed: pieces per character (the compiled vocabulary's dummy prefix adds a "▁" per sentence)
and, for the compiled vocabulary, how many sentences get exactly `sentencepiece.encode(raw)`.
`--json PATH` also writes these figures (characters per CPU-second, pieces per character) as JSON.
"""

from __future__ import annotations

import argparse
import time

from benchmarks.report import add_json_argument, write_json


def _timed(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        fn()
        best = min(best, time.process_time() - started)
    return best


def main(argv: list[str] | None = None) -> int:
    from core.tokenizer import Tokenizer
    from pipelines.peoples_daily import read_articles
    from pipelines.vocab import VocabConfig, train_vocab

    p = argparse.ArgumentParser(prog="albert bench tokenize", description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--docs", type=int, default=None, help="first N articles of the sample (default all)")
    add_json_argument(p)
    args = p.parse_args(argv)

    docs = [d["sentences"] for d in read_articles(limit=args.docs)]
    sentences = [s for d in docs for s in d]
    chars = sum(map(len, sentences))
    print(
        f"text: the bundled sample, {len(docs):,} documents, {len(sentences):,} sentences, {chars:,} characters"
    )
    tokenizers = {}
    for kind in ("python", "compiled"):
        proto, stats = train_vocab(iter(sentences), VocabConfig(normalization=kind))
        tokenizers[kind] = Tokenizer(proto)
        print(f"vocabulary {kind}: {stats['vocab_size']} pieces")

    rows = {}
    for kind, tok in tokenizers.items():
        normalized = [[s for s in tok.normalizer.many(d) if s] for d in docs]
        for d in normalized[:50]:  # warm the run cache as a long-running worker has it
            tok.encode_document("w", d, "none")
        t_norm = _timed(lambda tok=tok: [tok.normalizer.many(d) for d in docs], args.repeats)
        t_seg = _timed(
            lambda tok=tok, nd=normalized: [tok.encode_document("b", d, "none") for d in nd if d],
            args.repeats,
        )
        pieces = sum(len(tok.encode_document("b", d, "none").ids) for d in normalized if d)
        rows[kind] = (chars / t_norm, chars / t_seg, chars / (t_norm + t_seg), pieces / chars)

    print(f"\n{'chars per CPU-second':<26}{'python (before)':>18}{'compiled (after)':>18}{'ratio':>8}")
    for k, name in enumerate(("normalize", "segment", "together")):
        a, b = rows["python"][k], rows["compiled"][k]
        print(f"{name:<26}{a / 1e6:>17.2f}M{b / 1e6:>17.2f}M{b / a:>8.2f}")
    a, b = rows["python"][3], rows["compiled"][3]
    print(f"{'pieces per character':<26}{a:>18.4f}{b:>18.4f}{b / a:>8.3f}")

    tok = tokenizers["compiled"]
    same = sum(tok.encode(s).tolist() == tok.sp.encode(s) for s in sentences)
    print(f"\ncompiled: {same:,}/{len(sentences):,} sentences give exactly sentencepiece.encode(raw text)")
    names = ("normalize_chars_per_cpu_s", "segment_chars_per_cpu_s", "together_chars_per_cpu_s")
    result = {
        "documents": len(docs),
        "sentences": len(sentences),
        "characters": chars,
        "paths": {
            kind: {**dict(zip(names, map(round, row[:3]))), "pieces_per_char": round(row[3], 4)}
            for kind, row in rows.items()
        },
        "compiled_same_as_sentencepiece": same,
    }
    write_json(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
