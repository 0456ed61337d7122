"""Corpus-stage benchmark: throughput on the bundled sample and measured near-duplicate quality.

Throughput (read + clean + dedup + segment on People's Daily, ~1.8M characters):
  - `pipeline`: the real Beam pipeline (`run_corpus`, DirectRunner multi_processing over all cores),
    wall time, reported per core;
  - `single_core`: the same per-record functions in one process without Beam (read, clean and
    fingerprint, finalize/segment), the cost a worker pays per document.

Dedup quality: near-duplicates are planted into the sample: `originals` articles each get one copy
per edit rate (random character substitutions, insertions and deletions at that rate, plus for some a
dropped or repeated sentence). The copies go through the real pipeline next to the sample. Ground
truth is the exact character-shingle Jaccard (the pipeline's own shingling, on cleaned text):
  - recall: share of pairs inside a planted group with Jaccard >= 0.8 that end up in one cluster;
  - precision: share of merges (removed document -> its survivor) whose Jaccard is >= 0.5
    (natural duplicates of the sample count as well: every merge is checked).

`python -m benchmarks.corpus` (`albert bench corpus`) prints the table; `--sweep` compares shingle sizes and bands x rows
with the same pure functions (no Beam) to justify the defaults.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import tempfile
import time

import numpy as np

from benchmarks.report import add_json_argument, report, write_json
from benchmarks.sample_text import cleaned_shingles, edit_text, sample_records
from pipelines.corpus import clean, minhash
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.text_cleaning import ChineseConverter

PLANTED = "planted.json"  # the planted copies, news2016zh lines: their ids are news2016zh:planted.json:ID
DEFAULT_EDIT_RATES = (0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12, 0.2, 0.3)


# --- throughput -------------------------------------------------------------------------------------------


def single_core_throughput(limit: int | None = None, opts: CorpusOptions | None = None) -> dict:
    """Per-record cost of each step in one process (no Beam): documents/s and characters/s."""
    opts = opts or CorpusOptions()
    t0 = time.perf_counter()
    records = sample_records(limit)
    t_read = time.perf_counter() - t0
    chars = sum(len(r["text"]) for r in records)
    convert = ChineseConverter(opts.cleaning.opencc)
    t0 = time.perf_counter()
    cleaned = []
    for r in records:
        verdict, doc, _ = clean.clean_record(r, opts, convert)
        if verdict == "doc":
            cleaned.append(doc)
    t_clean = time.perf_counter() - t0
    t0 = time.perf_counter()
    for doc in cleaned:
        clean.text_hash(doc["lines"])
        clean.doc_signature(doc["lines"], opts)
        clean.line_hashes(doc["lines"], opts)
    t_fingerprint = time.perf_counter() - t0
    t0 = time.perf_counter()
    for doc in cleaned:
        clean.finalize_document([doc], None, None, set(), opts)
    t_segment = time.perf_counter() - t0
    total = t_read + t_clean + t_fingerprint + t_segment
    steps = {
        "read": t_read,
        "clean": t_clean,
        "fingerprint": t_fingerprint,
        "segment": t_segment,
        "total": total,
    }
    return {
        "documents": len(records),
        "characters": chars,
        "seconds": {k: round(v, 3) for k, v in steps.items()},
        "docs_per_s": {k: round(len(records) / v, 1) for k, v in steps.items()},
        "chars_per_s": {k: round(chars / v) for k, v in steps.items()},
    }


def pipeline_throughput(workers: int | None = None, out_dir: str | None = None) -> dict:
    """The real pipeline on the whole sample (DirectRunner multi_processing), and on a slice of 60
    paragraphs to measure what any run costs regardless of its size (worker start-up, ~25 shuffles):
    `marginal_*` are the rates once that fixed cost is paid, what a large corpus approaches."""
    from core.peoples_daily import sample_path
    from pipelines.corpus.stage import run_corpus

    workers = workers or os.cpu_count() or 1
    chars = sum(len(r["text"]) for r in sample_records())
    out = out_dir or tempfile.mkdtemp(prefix="corpus-bench-")
    os.makedirs(out, exist_ok=True)
    flags = ["--direct_running_mode", "multi_processing", "--direct_num_workers", str(workers)]
    tiny = os.path.join(out, "sample-head.txt")
    with open(sample_path(), encoding="utf-8") as src, open(tiny, "w", encoding="utf-8") as dst:
        dst.writelines(line for _, line in zip(range(60), src))
    whole = CorpusOptions().replace(hold_out_ner_eval=False)  # every article, as sample_records
    t0 = time.perf_counter()
    run_corpus(
        [f"peoples-daily:{tiny}"], os.path.join(out, "fixed-cost"), whole, force=True, extra_beam_flags=flags
    )
    fixed = time.perf_counter() - t0
    t0 = time.perf_counter()
    manifest = run_corpus(
        ["peoples-daily:"], os.path.join(out, "throughput"), whole, force=True, extra_beam_flags=flags
    )
    wall = time.perf_counter() - t0
    docs = manifest["counts"]["read"]
    marginal = max(wall - fixed, 1e-9)
    return {
        "workers": workers,
        "documents": docs,
        "characters": chars,
        "kept": manifest["counts"]["kept"],
        "seconds": round(wall, 2),
        "docs_per_s": round(docs / wall, 1),
        "chars_per_s": round(chars / wall),
        "docs_per_s_per_core": round(docs / wall / workers, 1),
        "chars_per_s_per_core": round(chars / wall / workers),
        "fixed_cost_seconds": round(fixed, 2),
        "marginal_docs_per_s_per_core": round(docs / marginal / workers, 1),
        "marginal_chars_per_s_per_core": round(chars / marginal / workers),
    }


# --- planted near-duplicates ------------------------------------------------------------------------------


def plant_duplicates(records: list[dict], originals: int, rates, seed: int) -> tuple[list[dict], dict]:
    """Copies of `originals` sample articles, one per rate. Returns (copy records in news2016zh form,
    {group: [original id, copy ids...]})."""
    rng = random.Random(seed)
    long_enough = [r for r in records if len(r["text"]) >= 300]
    chosen = rng.sample(long_enough, min(originals, len(long_enough)))
    copies, groups = [], {}
    for g, rec in enumerate(sorted(chosen, key=lambda r: r["id"])):
        members = [rec["id"]]
        for rate in rates:
            lines = rec["text"].split("\n")
            if rng.random() < 0.3 and len(lines) > 3:  # some copies also lose or repeat a sentence
                k = rng.randrange(1, len(lines))
                lines = lines[:k] + lines[k + 1 :] if rng.random() < 0.5 else lines[: k + 1] + lines[k:]
            news_id = f"planted-{g:04d}-{rate:.3f}"
            copies.append(
                {"news_id": news_id, "title": rec["title"], "content": edit_text("\n".join(lines), rate, rng)}
            )
            members.append(f"news2016zh:{PLANTED}:{news_id}")
        groups[g] = members
    return copies, groups


def _as_raw_records(copies: list[dict]) -> list[dict]:
    """Planted copies (news2016zh lines) as the raw records the corpus reader makes of them."""
    return [
        {
            "source": "news2016zh",
            "id": f"news2016zh:{PLANTED}:{c['news_id']}",
            "title": c["title"],
            "text": c["content"],
            "markup": "plain",
        }
        for c in copies
    ]


def score_merges(merges: dict[str, str], groups: dict, shingles: dict[str, np.ndarray]) -> dict:
    """Precision over merges, recall over planted pairs with Jaccard >= 0.8 (and per Jaccard band)."""
    rep = lambda x: merges.get(x, x)  # noqa: E731 -- survivors are cluster minima: one hop
    bands = {"[0.8,1.0]": [0, 0], "[0.5,0.8)": [0, 0], "[0.0,0.5)": [0, 0]}
    for members in groups.values():
        members = [m for m in members if m in shingles]
        for i in range(len(members)):
            for j in range(i + 1, len(members)):
                a, b = members[i], members[j]
                jac = minhash.jaccard(shingles[a], shingles[b])
                band = "[0.8,1.0]" if jac >= 0.8 else "[0.5,0.8)" if jac >= 0.5 else "[0.0,0.5)"
                bands[band][0] += 1
                bands[band][1] += rep(a) == rep(b)
    wrong = []
    for removed, survivor in merges.items():
        if removed in shingles and survivor in shingles:
            jac = minhash.jaccard(shingles[removed], shingles[survivor])
            if jac < 0.5:
                wrong.append((removed, survivor, round(jac, 3)))
    pairs, found = bands["[0.8,1.0]"]
    return {
        "recall_j_ge_0.8": round(found / pairs, 4) if pairs else None,
        "pairs_j_ge_0.8": pairs,
        "merged_share_by_jaccard": {
            k: (round(v[1] / v[0], 4) if v[0] else None, v[0]) for k, v in bands.items()
        },
        "merges": len(merges),
        "precision": round(1 - len(wrong) / len(merges), 4) if merges else None,
        "merges_below_0.5": wrong[:10],
    }


def dedup_quality(
    originals: int = 200,
    rates=DEFAULT_EDIT_RATES,
    seed: int = 0,
    workers: int | None = None,
    out_dir: str | None = None,
) -> dict:
    """Plant near-duplicates, run the real pipeline over sample + copies, score what it merged."""
    from pipelines.corpus.stage import run_corpus

    opts = CorpusOptions().replace(hold_out_ner_eval=False)  # every article, as sample_records
    records = sample_records()
    copies, groups = plant_duplicates(records, originals, rates, seed)
    out = out_dir or tempfile.mkdtemp(prefix="corpus-bench-")
    os.makedirs(out, exist_ok=True)
    planted = os.path.join(out, PLANTED)
    with open(planted, "w", encoding="utf-8") as f:
        for c in copies:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    workers = workers or os.cpu_count() or 1
    corpus = os.path.join(out, "dedup")
    run_corpus(
        ["peoples-daily:", f"news2016zh:{planted}"],
        corpus,
        opts,
        force=True,
        extra_beam_flags=["--direct_running_mode", "multi_processing", "--direct_num_workers", str(workers)],
    )
    merges = {}
    for name in sorted(os.listdir(corpus)):
        if name.startswith("rejected-"):
            with gzip.open(os.path.join(corpus, name), "rt", encoding="utf-8") as f:
                for line in f:
                    r = json.loads(line)
                    if r["reason"] in ("near_duplicate", "exact_duplicate"):
                        merges[r["id"]] = r["detail"].rsplit(" of ", 1)[1]
    copy_records = _as_raw_records(copies)
    shingles = cleaned_shingles(records + copy_records, opts)
    result = score_merges(merges, groups, shingles)
    result.update({"originals": len(groups), "copies": len(copies), "edit_rates": list(rates)})
    result["options"] = {
        "shingle_chars": opts.dedup.shingle_chars,
        "bands": opts.dedup.minhash_bands,
        "rows": opts.dedup.minhash_rows,
        "threshold": opts.dedup.near_dup_threshold,
    }
    return result


# --- parameter sweep (pure functions, no Beam) -------------------------------------------------------------


def dedup_in_memory(signatures: dict[str, np.ndarray], opts: CorpusOptions) -> dict[str, str]:
    """The pipeline's near-dup logic in one process: LSH buckets, verified pairs, union-find, the
    survivor check."""
    buckets: dict = {}
    for doc_id, sig in signatures.items():
        for key in minhash.band_keys(sig, opts.dedup.minhash_bands, opts.dedup.minhash_rows):
            buckets.setdefault(key, []).append(doc_id)
    uf = minhash.UnionFind()
    for ids in buckets.values():
        if len(ids) > 1:
            members = sorted((i, signatures[i]) for i in set(ids))
            for a, b in minhash.similar_pairs(
                members, opts.dedup.near_dup_threshold, opts.dedup.max_bucket_pairs
            ):
                uf.union(a, b)
    return {
        member: root
        for member, root in uf.roots().items()
        if minhash.estimate_jaccard(signatures[member], signatures[root])
        >= opts.dedup.min_survivor_similarity
    }


def sweep(originals: int = 200, seed: int = 0, configs=None) -> list[dict]:
    configs = configs or [
        (3, 16, 8, 0.7),
        (5, 16, 8, 0.7),
        (5, 20, 5, 0.7),
        (5, 32, 4, 0.7),
        (5, 20, 5, 0.6),
        (5, 20, 5, 0.8),
        (7, 20, 5, 0.7),
    ]
    records = sample_records()
    copies, groups = plant_duplicates(records, originals, DEFAULT_EDIT_RATES, seed)
    copy_records = _as_raw_records(copies)
    rows = []
    for k, bands, r, threshold in configs:
        opts = CorpusOptions().replace(
            shingle_chars=k, minhash_bands=bands, minhash_rows=r, near_dup_threshold=threshold
        )
        shingles = cleaned_shingles(records + copy_records, opts)
        t0 = time.perf_counter()
        sigs = {
            i: minhash.signature(s, opts.dedup.num_perm, opts.dedup.minhash_seed) for i, s in shingles.items()
        }
        merges = dedup_in_memory(sigs, opts)
        seconds = time.perf_counter() - t0
        score = score_merges(merges, groups, shingles)
        rows.append(
            {
                "shingle_chars": k,
                "bands": bands,
                "rows": r,
                "threshold": threshold,
                "recall_j_ge_0.8": score["recall_j_ge_0.8"],
                "precision": score["precision"],
                "merged_0.5_0.8": score["merged_share_by_jaccard"]["[0.5,0.8)"][0],
                "merges": score["merges"],
                "seconds": round(seconds, 2),
            }
        )
    return rows


# --- entry points -----------------------------------------------------------------------------------------------


def run_corpus_bench(
    originals: int = 200,
    seed: int = 0,
    workers: int | None = None,
    single_core_limit: int | None = None,
    curation_copies: int = 16,
    curation_repeats: int = 2,
) -> dict:
    """All corpus figures as one dict (what `albert bench corpus` reports); `curation_copies` 0 skips
    the curation on/off runs (benchmarks/curation.py), `curation_repeats` is how often each setting runs
    (its fastest run is reported)."""
    with tempfile.TemporaryDirectory(prefix="corpus-bench-") as tmp:
        result = {
            "single_core": single_core_throughput(single_core_limit),
            "pipeline": pipeline_throughput(workers, tmp),
            "dedup": dedup_quality(originals, seed=seed, workers=workers, out_dir=tmp),
        }
    if curation_copies:
        from benchmarks import curation  # the curation figures: a few Beam runs of their own

        result["curation"] = curation.curation_cost(
            curation_copies, workers or os.cpu_count() or 1, repeats=curation_repeats
        )
    return result


def format_table(result: dict) -> str:
    lines = []
    s = result["single_core"]
    lines.append(f"single core (no Beam), {s['documents']} documents, {s['characters']:,} characters")
    lines.append(f"  {'step':<12}{'seconds':>9}{'docs/s':>11}{'chars/s':>14}")
    for step in ("read", "clean", "fingerprint", "segment", "total"):
        lines.append(
            f"  {step:<12}{s['seconds'][step]:>9.2f}{s['docs_per_s'][step]:>11,.0f}{s['chars_per_s'][step]:>14,}"
        )
    p = result["pipeline"]
    lines.append(
        f"Beam pipeline (DirectRunner multi_processing, {p['workers']} workers): {p['seconds']} s, "
        f"{p['docs_per_s']:,} docs/s, {p['chars_per_s']:,} chars/s; "
        f"per core {p['docs_per_s_per_core']:,} docs/s, {p['chars_per_s_per_core']:,} chars/s"
    )
    lines.append(
        f"  fixed cost of any run (60-paragraph slice): {p['fixed_cost_seconds']} s; beyond it, per core "
        f"{p['marginal_docs_per_s_per_core']:,} docs/s, {p['marginal_chars_per_s_per_core']:,} chars/s"
    )
    d = result["dedup"]
    lines.append(
        f"near-dup quality ({d['originals']} originals x {len(d['edit_rates'])} edit rates, "
        f"shingles {d['options']['shingle_chars']}, {d['options']['bands']}x{d['options']['rows']}, "
        f"threshold {d['options']['threshold']}):"
    )
    lines.append(f"  recall (Jaccard >= 0.8): {d['recall_j_ge_0.8']}  over {d['pairs_j_ge_0.8']} pairs")
    lines.append(f"  precision (merges with Jaccard >= 0.5): {d['precision']}  over {d['merges']} merges")
    for band, (share, n) in d["merged_share_by_jaccard"].items():
        lines.append(f"  merged share, planted pairs with Jaccard in {band}: {share} ({n} pairs)")
    if "curation" in result:
        from benchmarks import curation

        lines.append(curation.format_table(result["curation"]))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.corpus", description=__doc__.split("\n")[0])
    parser.add_argument("--originals", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--sweep", action="store_true", help="compare dedup parameters instead")
    parser.add_argument(
        "--curation-copies",
        type=int,
        default=16,
        help="scale corpus of the curation on/off runs, copies of the sample; 0 skips them [%(default)s]",
    )
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if args.sweep:
        rows = sweep(args.originals, args.seed)
        keys = list(rows[0])
        print("  ".join(f"{k:>14}" for k in keys))
        for row in rows:
            print("  ".join(f"{row[k]!s:>14}" for k in keys))
        write_json(rows, args.json)
        return 0
    result = run_corpus_bench(args.originals, args.seed, args.workers, curation_copies=args.curation_copies)
    return report(result, format_table(result), args.json)


if __name__ == "__main__":
    raise SystemExit(main())
