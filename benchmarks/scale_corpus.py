"""A scale corpus: N distinct copies of the bundled sample in the real formats, with planted
near-duplicates, as the input of the cost-growth benchmark.

Copy 0 is the sample's articles unchanged (People's Daily, ~3,225 articles, ~1.84M characters). Copy
k > 0 is the sample under a bijection of its characters that permutes them only within bands of
similar frequency: the sample's ideographs (and, separately, each kind of digit and Latin letter) are
ranked by frequency and cut into bands of `BAND` characters, and each band is shuffled with a seed
drawn from (seed, k). Punctuation and white space stay, so a copy keeps the sample's document
lengths, sentence boundaries, character-frequency profile and n-gram repetition (the quality filters
decide the same), while its character shingles are new: no copy is a near-duplicate of another, and
the corpus stage's dedup keeps them all.

Each article goes to one of two outputs, alternating with (index + copy): `news2016zh.json`
(brightmart's JSON lines, `dumps.news2016zh_line`, one sentence a line of its content as in the
sample; joined into one line, a quarter of the sample's articles would fail `no_terminal_punct`) or
a zhwiki multistream dump with its index (`dumps.article_wikitext` around the sentences, written
page by page). Ids are unique across copies and tell the copy (`copy_of`): news id
`scale-<copy>-<article>`, page id `copy * stride + 2 * article + 1`.

Planted near-duplicates: per copy, `near_dup_rate` x articles of its articles of at least
`PLANT_MIN_CHARS` characters get an edited copy (`benchmarks.sample_text.edit_text`, a rate drawn in
`EDIT_RATES`, where the character-shingle Jaccard stays above 0.8), written right after the original,
in the same output, with its own id. `truth.json` holds the pairs as the corpus stage names documents
(`news2016zh:news2016zh.json:<news_id>`, `zhwiki:<dump file name>:<page id>`) and the counts; `near_dup_scores` scores a finished
`albert corpus` run against it.

    python -m benchmarks.scale_corpus --copies 4 --out DIR [--near-dup-rate 0.02] [--seed 0]
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import random
import sys
from collections import Counter
from dataclasses import dataclass

from benchmarks.sample_text import cleaned_shingles, edit_text, sample_records
from core.errors import UserError
from pipelines.corpus import minhash
from pipelines.corpus.dumps import MultistreamWriter, article_wikitext, news2016zh_line, page_xml
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.sources import plan_sources, read_work

BAND = 24  # characters per frequency band: small enough to keep the profile, large enough to mix
EDIT_RATES = (0.002, 0.02)  # planted copies: edit rate drawn uniformly in this range
PLANT_MIN_CHARS = 300  # only articles this long get a planted copy (short ones are filter-prone)
NEWS_FILE = "news2016zh.json"
WIKI_DUMP = "zhwiki-20261001-pages-articles-multistream.xml.bz2"
TRUTH_FILE = "truth.json"
_DUP_REASONS = ("near_duplicate", "exact_duplicate")


@dataclass
class ScaleCorpus:
    out_dir: str
    copies: int
    sources: list[str]  # the `--source KIND:PATH` values for `albert corpus`
    documents: int  # articles written, planted ones included
    characters: int  # characters of article text written (the sentences; wiki markup not counted)
    planted: int
    truth_path: str


# --- the copies ------------------------------------------------------------------------------------------


def _char_class(ch: str) -> str | None:
    """The class a character is permuted within; None: it stays (punctuation, symbols, spaces)."""
    o = ord(ch)
    if 0x3400 <= o <= 0x9FFF or 0xF900 <= o <= 0xFAFF or 0x20000 <= o <= 0x3FFFF:
        return "ideograph"
    for name, first, last in (
        ("digit", "0", "9"),
        ("upper", "A", "Z"),
        ("lower", "a", "z"),
        ("wide-digit", "０", "９"),
        ("wide-upper", "Ａ", "Ｚ"),
        ("wide-lower", "ａ", "ｚ"),
    ):
        if first <= ch <= last:
            return name
    return None


def frequency_bands(texts, band: int = BAND) -> list[list[str]]:
    """The characters of `texts` per class, ranked by frequency (ties by code point), cut into bands
    of `band`; a short last band joins the one before it."""
    counts = Counter()
    for text in texts:
        counts.update(text)
    by_class: dict[str, list[str]] = {}
    for ch, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        cls = _char_class(ch)
        if cls is not None:
            by_class.setdefault(cls, []).append(ch)
    bands = []
    for cls in sorted(by_class):
        ranked = by_class[cls]
        cuts = [ranked[i : i + band] for i in range(0, len(ranked), band)]
        if len(cuts) > 1 and len(cuts[-1]) < band // 2:
            cuts[-2:] = [cuts[-2] + cuts[-1]]
        bands.extend(cuts)
    return bands


def copy_table(bands: list[list[str]], seed: int, copy: int) -> dict[int, int]:
    """`str.translate` table of copy `copy`: each band shuffled; copy 0 is the identity."""
    if copy == 0:
        return {}
    rng = random.Random(f"scale-corpus:{seed}:{copy}")  # str seeds hash with sha512: stable everywhere
    table = {}
    for chars in bands:
        shuffled = list(chars)
        rng.shuffle(shuffled)
        table.update((ord(a), ord(b)) for a, b in zip(chars, shuffled) if a != b)
    return table


def sample_articles(articles: int | None = None) -> list[tuple[str, list[str]]]:
    """(title, sentences) of the sample's first `articles` articles (all when None)."""
    return [(r["title"], r["text"].split("\n")) for r in sample_records(articles)]


def copy_articles(sample, table: dict[int, int]) -> list[tuple[str, list[str]]]:
    return [(title.translate(table), [s.translate(table) for s in sents]) for title, sents in sample]


def planted_edits(articles, rate: float, seed: int, copy: int) -> dict[int, list[str]]:
    """{article index: edited sentences} of the articles of one copy that get a planted near-duplicate."""
    rng = random.Random(f"scale-corpus-plant:{seed}:{copy}")
    eligible = [i for i, (_, sents) in enumerate(articles) if len("\n".join(sents)) >= PLANT_MIN_CHARS]
    n = min(len(eligible), round(rate * len(articles)))
    edits = {}
    for i in sorted(rng.sample(eligible, n)):
        edited = edit_text("\n".join(articles[i][1]), rng.uniform(*EDIT_RATES), rng)
        edits[i] = edited.split("\n")
    return edits


# --- writing -----------------------------------------------------------------------------------------------


def wiki_id_stride(articles: int) -> int:
    """Page ids of copy k lie in [k * stride, (k + 1) * stride): article i is 2i + 1, its planted copy
    2i + 2, so an id tells its copy (`id // stride`) as a news id does (`scale-<copy>-<article>`)."""
    return 10 ** len(str(2 * articles + 2))


def copy_of(doc_id: str, stride: int) -> int:
    """The copy a document of the scale corpus belongs to, from its corpus-stage id."""
    kind, native = doc_id.partition(":")[0], doc_id.rsplit(":", 1)[1]
    return int(native) // stride if kind == "zhwiki" else int(native.split("-")[1])


def _check_out_dir(out_dir: str) -> None:
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UserError(f"--out {out_dir} is a file, not a folder")
    if os.path.isdir(out_dir) and os.listdir(out_dir):
        raise UserError(f"--out {out_dir} is not empty: give a new or empty folder")


def write_scale_corpus(
    out_dir: str, copies: int, *, near_dup_rate: float = 0.02, seed: int = 0, articles: int | None = None
) -> ScaleCorpus:
    """Write `copies` copies of the sample (the first `articles` articles of each) with planted
    near-duplicates into `out_dir` (new or empty). One copy's articles are in memory at a time."""
    if copies < 1:
        raise UserError(f"--copies must be at least 1, got {copies}")
    if not 0 <= near_dup_rate <= 1:
        raise UserError(f"--near-dup-rate must lie in [0, 1], got {near_dup_rate}")
    if articles is not None and articles < 1:
        raise UserError(f"articles must be at least 1, got {articles}")
    _check_out_dir(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    sample = sample_articles(articles)
    bands = frequency_bands(text for title, sents in sample for text in (title, *sents))
    news_path, wiki_path = os.path.join(out_dir, NEWS_FILE), os.path.join(out_dir, WIKI_DUMP)
    counts = {"news2016zh": 0, "zhwiki": 0}
    pairs, characters = [], 0
    stride = wiki_id_stride(len(sample))
    with open(news_path, "w", encoding="utf-8", newline="\n") as news, MultistreamWriter(wiki_path) as wiki:

        def write(copy: int, i: int, title: str, sents: list[str], to_wiki: bool, planted: bool) -> str:
            nonlocal characters
            characters += len("\n".join(sents))
            if to_wiki:
                page_id = copy * stride + 2 * i + 1 + planted
                wiki.add(page_xml(page_id, title or f"条目{page_id}", article_wikitext(title, sents)))
                counts["zhwiki"] += 1
                return f"zhwiki:{WIKI_DUMP}:{page_id}"
            news_id = f"scale-{copy:04d}-{i:05d}{'-near' if planted else ''}"
            news.write(news2016zh_line(news_id, title, sents, source="scale-corpus", sep="\n") + "\n")
            counts["news2016zh"] += 1
            return f"news2016zh:{NEWS_FILE}:{news_id}"

        for copy in range(copies):
            arts = copy_articles(sample, copy_table(bands, seed, copy))
            edits = planted_edits(arts, near_dup_rate, seed, copy)
            for i, (title, sents) in enumerate(arts):
                # article_wikitext puts the title in place of the first sentence: one-sentence articles
                # would be empty pages, so they go to the news file
                to_wiki = (i + copy) % 2 == 0 and len(sents) > 1
                original = write(copy, i, title, sents, to_wiki, False)
                if i in edits:
                    planted = write(copy, i, title, edits[i], to_wiki, True)
                    pairs.append([original, planted])
    sources = [f"news2016zh:{news_path}", f"zhwiki:{wiki_path}"]
    truth = {
        "copies": copies,
        "seed": seed,
        "near_dup_rate": near_dup_rate,
        "articles_per_copy": len(sample),
        "documents": sum(counts.values()),
        "characters": characters,
        "planted": len(pairs),
        "by_output": counts,
        "files": {"news2016zh": NEWS_FILE, "zhwiki": WIKI_DUMP},
        "wiki_id_stride": stride,
        "pairs": pairs,  # [original id, planted id]
    }
    truth_path = os.path.join(out_dir, TRUTH_FILE)
    with open(truth_path, "w", encoding="utf-8") as f:
        json.dump(truth, f, ensure_ascii=False, indent=1)
        f.write("\n")
    return ScaleCorpus(out_dir, copies, sources, truth["documents"], characters, len(pairs), truth_path)


# --- scoring a finished corpus run ---------------------------------------------------------------------------


def _run_options(corpus_dir: str) -> CorpusOptions:
    """The options the corpus run used (its manifest), so shingles are computed as it computed them."""
    manifest = os.path.join(corpus_dir, "manifest.json")
    if not os.path.isfile(manifest):
        raise UserError(f"{corpus_dir} holds no finished corpus (no manifest.json)")
    with open(manifest, encoding="utf-8") as f:
        saved = json.load(f)["config"]["options"]
    fields = CorpusOptions().to_dict()
    return CorpusOptions().replace(
        **{
            k: tuple(tuple(x) for x in v) if isinstance(v, list) else v
            for k, v in saved.items()
            if k in fields
        }
    )


def _rejections(corpus_dir: str) -> tuple[dict[str, str], dict[str, str]]:
    """({removed id: survivor id} of the duplicate removals, {id: reason} of every other rejection)."""
    merges, others = {}, {}
    for path in sorted(glob.glob(os.path.join(corpus_dir, "rejected-*.jsonl.gz"))):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                if r["reason"] in _DUP_REASONS:
                    merges[r["id"]] = r["detail"].rsplit(" of ", 1)[1]
                elif r["id"] is not None:
                    others[r["id"]] = r["reason"]
    return merges, others


def _shingles_of(ids: set[str], truth_dir: str, files: dict, opts: CorpusOptions) -> dict:
    """Shingles of the cleaned text of `ids`, re-read from the scale corpus' files (one pass each)."""
    specs = [f"{kind}:{os.path.join(truth_dir, name)}" for kind, name in files.items()]
    found = {}
    for item in plan_sources(specs):
        records = [r for r in read_work(item, opts) if r.get("id") in ids]
        found.update(cleaned_shingles(records, opts))
    return found


def near_dup_scores(corpus_dir: str, truth_path: str) -> dict:
    """Recall and precision of a finished `albert corpus` run over a scale corpus against its truth.

    recall: share of the planted pairs (both documents survived the quality filters) that ended in one
    cluster: the planted document removed as a duplicate of its original, or the other way round, or
    both removed into one survivor. precision: share of the duplicate removals that are planted pairs,
    or whose true character-shingle Jaccard (cleaned text, the run's shingling) with their survivor is
    at least 0.5."""
    with open(truth_path, encoding="utf-8") as f:
        truth = json.load(f)
    opts = _run_options(corpus_dir)
    merges, others = _rejections(corpus_dir)

    def root(doc_id: str) -> str:
        seen = {doc_id}
        while doc_id in merges and merges[doc_id] not in seen:
            doc_id = merges[doc_id]
            seen.add(doc_id)
        return doc_id

    pairs = [tuple(p) for p in truth["pairs"]]
    scorable = [p for p in pairs if p[0] not in others and p[1] not in others]
    planted_sets = {frozenset(p) for p in pairs}
    unplanted = {(a, b) for a, b in merges.items() if frozenset((a, b)) not in planted_sets}
    need = {x for p in scorable for x in p} | {x for m in unplanted for x in m}
    shingles = _shingles_of(need, os.path.dirname(os.path.abspath(truth_path)), truth["files"], opts)

    def jaccard(a: str, b: str) -> float | None:
        return minhash.jaccard(shingles[a], shingles[b]) if a in shingles and b in shingles else None

    found = [root(a) == root(b) for a, b in scorable]
    high = [(f, j) for (a, b), f in zip(scorable, found) if (j := jaccard(a, b)) is not None and j >= 0.8]
    wrong = [(a, b, j) for a, b in sorted(unplanted) if (j := jaccard(a, b)) is None or j < 0.5]
    stride = truth["wiki_id_stride"]
    cross = sum(copy_of(a, stride) != copy_of(b, stride) for a, b in merges.items())
    missed = [list(p) for p, f in zip(scorable, found) if not f]
    return {
        "recall": round(sum(found) / len(scorable), 4) if scorable else None,
        "recall_j_ge_0.8": round(sum(f for f, _ in high) / len(high), 4) if high else None,
        "precision": round(1 - len(wrong) / len(merges), 4) if merges else None,
        "planted": len(pairs),
        "scorable_pairs": len(scorable),
        "found_pairs": sum(found),
        "pairs_j_ge_0.8": len(high),
        "removals": len(merges),
        "planted_removals": len(merges) - len(unplanted),
        "other_removals": len(unplanted),
        "wrong_removals": len(wrong),
        "cross_copy_removals": cross,  # a copy removed as a duplicate of another copy: should be 0
        "missed_examples": missed[:10],
        "wrong_examples": [[a, b, None if j is None else round(j, 3)] for a, b, j in wrong[:10]],
    }


# --- command line ----------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scale_corpus", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--copies", type=int, required=True, help="copies of the sample (1 = the sample)")
    parser.add_argument("--out", required=True, help="a new or empty folder")
    parser.add_argument("--near-dup-rate", type=float, default=0.02, help="planted share of articles [0.02]")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        sc = write_scale_corpus(args.out, args.copies, near_dup_rate=args.near_dup_rate, seed=args.seed)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(
        f"wrote {sc.copies} copies to {sc.out_dir}: {sc.documents:,} documents, {sc.characters:,} characters, "
        f"{sc.planted:,} planted near-duplicates (truth: {sc.truth_path})"
    )
    for name in sorted(os.listdir(sc.out_dir)):
        print(f"  {name}  {os.path.getsize(os.path.join(sc.out_dir, name)):,} bytes")
    print("sources: " + " ".join(f"--source {s}" for s in sc.sources))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
