"""`albert bench instances`: our instance pipeline next to the original generator's algorithm.

For each whole-word mode (zh = rjieba words, sp = the SentencePiece "▁" rule) on the People's Daily
sample, written as a 2-shard corpus folder:

    ours (Beam)  `pipelines.instances.run_pipeline` through the DirectRunner: the whole run (read,
                 prepare, tokenize, pack, mask, serialise, write, stats, manifest) as a user runs it
    ours (core)  `prepare_document` + `encode_group` + `build_group` in-process on the same documents
                 (already in memory), without Beam and without writing: the pure instance-building cost
    reference    `benchmarks.reference_generator` (the original create_pretraining_data.py algorithm) on
                 the FIRST `reference_docs` documents only (it is slow), in the original's text format

Every measured configuration runs in a fresh subprocess (benchmarks/instance_runs.py, which prints
one JSON line), so its peak RSS is its own: the parent reads it from `os.wait4` (ru_maxrss of that
child and of the processes it waited for, i.e. the largest single process; with workers > 1 that is
one Beam worker or the driver, not their sum). CPU seconds are measured in the
child around the work itself (RUSAGE_SELF + RUSAGE_CHILDREN deltas, so Beam worker processes count),
not wall time: the machine is shared. Throughput = real (non-padding) tokens written per CPU-second,
i.e. per core. Interpreter start-up and imports (Beam ~2 s, TensorFlow ~4 s) are outside the timed
region of both sides, but inside their peak RSS.

Memory scaling: ours on 1x and 3x the sample, the reference on 1x and 3x its subset (3x = the
documents repeated with new ids), to show how peak RSS grows with the input.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
import time

from benchmarks.instance_runs import run_child
from benchmarks.report import add_json_argument, report

REFERENCE_DOCS = 800
"""The reference generator runs on the first this-many documents of the sample (~470k tokens)."""
SCALE = 3
MODE_NAMES = {"zh": "zh (rjieba words)", "sp": "sp (SentencePiece rule)"}


# ------------------------------------------------------------------------------------- inputs


def sample_documents(limit: int | None = None) -> list[dict]:
    """The sample's articles as corpus documents (the gold `words` removed)."""
    from pipelines import peoples_daily

    docs = []
    for d in peoples_daily.read_articles(limit=limit):
        d.pop("words", None)
        docs.append(d)
    return docs


def repeat_documents(docs: list[dict], times: int) -> list[dict]:
    """The documents `times` times over, the copies with new ids (so they are distinct documents)."""
    return [dict(d, id=d["id"] if r == 0 else f"{d['id']}-copy{r}") for r in range(times) for d in docs]


def write_corpus(out_dir: str, docs: list[dict], shards: int = 2) -> str:
    """A corpus-stage folder: `docs-0000k-of-0000n.jsonl.gz` shards (contiguous runs) + manifest."""
    from pipelines.core.manifest import write_manifest

    os.makedirs(out_dir, exist_ok=True)
    per = -(-len(docs) // shards)
    for k in range(shards):
        with gzip.open(
            os.path.join(out_dir, f"docs-{k:05d}-of-{shards:05d}.jsonl.gz"), "wt", encoding="utf-8"
        ) as f:
            for d in docs[k * per : (k + 1) * per]:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
    write_manifest(out_dir, "corpus", counts={"documents": len(docs)}, note="benchmark input")
    return out_dir


def write_text(path: str, docs: list[dict]) -> str:
    """The original generator's input format: one sentence per line, a blank line between documents."""
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            lines = [s.replace("\n", " ").strip() for s in d["sentences"]]
            f.write("".join(line + "\n" for line in lines if line) + "\n")
    return path


# ------------------------------------------------------------------------------------------ bench


def run_instances_bench(
    max_seq_length: int = 512,
    dupe_factor: int = 1,
    workers: int = 1,
    modes: tuple[str, ...] = ("zh", "sp"),
    reference: bool = True,
    out_dir: str | None = None,
    documents: int | None = None,
    reference_docs: int = REFERENCE_DOCS,
    memory_scaling: bool = True,
    max_predictions: int | None = None,
    log=None,
) -> dict:
    """Run the benchmark; returns every figure (see `format_table`). `documents` limits the sample (for
    quick runs); `max_predictions` defaults to the full 15% budget, round(0.15 * max_seq_length)."""
    from pipelines.tokenizer import Tokenizer
    from pipelines.vocab import VocabConfig, train_vocab, write_vocab

    if set(modes) - {"zh", "sp"} or workers < 1:
        raise ValueError(f"modes must be zh and/or sp, workers >= 1 (got {modes}, {workers})")
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    P = max_predictions or max(1, round(0.15 * max_seq_length))
    work = out_dir or tempfile.mkdtemp(prefix="bench-instances-")
    os.makedirs(work, exist_ok=True)
    started = time.perf_counter()
    try:
        log("bench instances: preparing the sample, its vocabulary and the reference's text files")
        docs = sample_documents(limit=documents)
        proto, _ = train_vocab((s for d in docs for s in d["sentences"]), VocabConfig())
        vocab = os.path.join(work, "vocab")
        write_vocab(vocab, proto)
        corpus = {1: write_corpus(os.path.join(work, "corpus-1x"), docs)}
        n_ref = min(reference_docs, len(docs))
        texts = {1: write_text(os.path.join(work, "reference-1x.txt"), docs[:n_ref])}
        if memory_scaling:
            corpus[SCALE] = write_corpus(
                os.path.join(work, f"corpus-{SCALE}x"), repeat_documents(docs, SCALE)
            )
            texts[SCALE] = write_text(
                os.path.join(work, f"reference-{SCALE}x.txt"), repeat_documents(docs[:n_ref], SCALE)
            )
        common = {
            "vocab": vocab,
            "max_seq_length": max_seq_length,
            "max_predictions": P,
            "dupe_factor": dupe_factor,
        }

        def run(kind: str, mode: str, scale: int = 1) -> dict:
            log(f"bench instances: {kind} {mode} {scale}x")
            spec = dict(common, kind=kind, mode=mode, workers=workers, corpus=corpus.get(scale))
            spec["out"] = os.path.join(work, f"out-{kind}-{mode}-{scale}x")
            if kind == "reference":
                spec["text"], spec["out"] = texts[scale], spec["out"] + ".tfrecord"
            return run_child(spec)

        result: dict = {
            "config": dict(
                common, workers=workers, modes=list(modes), vocab_size=Tokenizer(proto).vocab_size
            ),
            "sample_documents": len(docs),
            "reference_documents": n_ref if reference else None,
            "modes": {},
        }
        for mode in modes:
            row = {"ours": run("ours", mode), "core": run("core", mode)}
            if reference:
                row["reference"] = ref = run("reference", mode)
                row["ratios"] = {
                    "beam_throughput": _ratio(row["ours"]["tokens_per_cpu_s"], ref["tokens_per_cpu_s"]),
                    "core_throughput": _ratio(row["core"]["tokens_per_cpu_s"], ref["tokens_per_cpu_s"]),
                    "fill_rate": _ratio(row["ours"]["fill_rate"], ref["fill_rate"]),
                    "peak_rss": _ratio(row["ours"]["peak_rss_mb"], ref["peak_rss_mb"]),
                }
            result["modes"][mode] = row
        if memory_scaling and modes:
            mode = modes[0]
            first = result["modes"][mode]
            memory = {"mode": mode, "scale": SCALE}
            for who in ("ours", "reference") if reference else ("ours",):
                scaled = run(who, mode, SCALE)
                memory[f"{who}_mb"] = {"1x": first[who]["peak_rss_mb"], f"{SCALE}x": scaled["peak_rss_mb"]}
                memory[f"{who}_tokens"] = {
                    "1x": first[who]["real_tokens"],
                    f"{SCALE}x": scaled["real_tokens"],
                }
                # Beam's fixed cost (~1 CPU-s to build and start a pipeline) weighs on a 1.8M-token
                # sample; the larger input shows the throughput it tends to on real corpora.
                memory[f"{who}_tokens_per_cpu_s"] = {
                    "1x": first[who]["tokens_per_cpu_s"],
                    f"{SCALE}x": scaled["tokens_per_cpu_s"],
                }
            result["memory_scaling"] = memory
        result["bench_wall_s"] = round(time.perf_counter() - started, 1)
        return result
    finally:
        if out_dir is None:
            shutil.rmtree(work, ignore_errors=True)


def _ratio(a, b):
    return round(a / b, 2) if a and b else None


def format_table(r: dict) -> str:
    c = r["config"]
    lines = [
        f"albert instances benchmark: L={c['max_seq_length']} P={c['max_predictions']} "
        f"dupe_factor={c['dupe_factor']} workers={c['workers']} vocab={c['vocab_size']} pieces",
        f"ours: all {r['sample_documents']} sample documents"
        + (
            f"; reference: the first {r['reference_documents']} only (it is slow)"
            if r["reference_documents"]
            else ""
        ),
        "throughput = real (non-padding) tokens written per CPU-second (self + children): per core",
    ]
    rows = [
        ("documents", "documents", "{:,}"),
        ("real tokens", "real_tokens", "{:,}"),
        ("CPU s", "cpu_s", "{:.2f}"),
        ("tokens / CPU-s", "tokens_per_cpu_s", "{:,}"),
        ("wall s", "wall_s", "{:.2f}"),
        ("fill rate", "fill_rate", "{:.1%}"),
        ("masked fraction", "masked_fraction", "{:.1%}"),
        ("peak RSS MB", "peak_rss_mb", "{:,.0f}"),
        ("RSS at start of work MB", "rss_after_imports_mb", "{:,.0f}"),
    ]
    for mode, row in r["modes"].items():
        cols = [k for k in ("ours", "core", "reference") if k in row]
        heads = {"ours": "ours (Beam)", "core": "ours (core)", "reference": "reference"}
        lines += ["", f"{MODE_NAMES.get(mode, mode):<24}" + "".join(f"{heads[k]:>16}" for k in cols)]
        for label, key, fmt in rows:
            cells = []
            for k in cols:
                v = row[k].get(key)
                cells.append(f"{fmt.format(v) if v is not None else '-':>16}")
            lines.append(f"{label:<24}" + "".join(cells))
        if "ratios" in row:
            q = row["ratios"]
            lines.append(
                f"{'ours / reference':<24}throughput Beam {q['beam_throughput']}x, core {q['core_throughput']}x; "
                f"fill {q['fill_rate']}x; peak RSS {q['peak_rss']}x (different input sizes)"
            )
    m = r.get("memory_scaling")
    if m:
        s = f"{m['scale']}x"
        lines += [
            "",
            f"memory scaling, mode {m['mode']}{'tokens 1x':>17}{'tokens ' + s:>14}"
            f"{'RSS MB 1x':>11}{'RSS MB ' + s:>11}{'growth':>9}{'tok/CPU-s 1x':>14}{'tok/CPU-s ' + s:>14}",
        ]
        for who, what in (("ours", "full sample"), ("reference", "its subset")):
            if f"{who}_mb" in m:
                (a, b), (t1, t3) = m[f"{who}_mb"].values(), m[f"{who}_tokens"].values()
                p1, p3 = m[f"{who}_tokens_per_cpu_s"].values()
                lines.append(
                    f"{who + ' (' + what + ')':<26}{t1:>14,}{t3:>14,}{a:>11,.0f}{b:>11,.0f}{b - a:>+9,.0f}"
                    f"{p1:>14,.0f}{p3:>14,.0f}"
                )
    lines.append(f"\nbench wall time {r['bench_wall_s']} s")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ CLI


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-seq-length", type=int, default=512)
    p.add_argument("--max-predictions", type=int, default=None, help="default round(0.15 * L)")
    p.add_argument("--dupe-factor", type=int, default=1)
    p.add_argument("--workers", type=int, default=1, help="1: in-memory DirectRunner; N: N processes")
    p.add_argument("--modes", default="zh,sp", help="whole-word modes to compare, comma separated")
    p.add_argument("--no-reference", dest="reference", action="store_false")
    p.add_argument("--no-memory-scaling", dest="memory_scaling", action="store_false")
    p.add_argument("--documents", type=int, default=None, help="use only the first N sample documents")
    p.add_argument("--reference-docs", type=int, default=REFERENCE_DOCS)
    p.add_argument("--out", default=None, help="keep inputs and outputs here (default: a temp dir)")
    add_json_argument(p)


def run(args: argparse.Namespace) -> int:
    result = run_instances_bench(
        max_seq_length=args.max_seq_length,
        dupe_factor=args.dupe_factor,
        workers=args.workers,
        modes=tuple(m for m in args.modes.split(",") if m),
        reference=args.reference,
        out_dir=args.out,
        documents=args.documents,
        reference_docs=args.reference_docs,
        memory_scaling=args.memory_scaling,
        max_predictions=args.max_predictions,
    )
    return report(result, format_table(result), args.json)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.instances", description=__doc__.split("\n")[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
