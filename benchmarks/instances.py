"""`albert bench instances`: our instance pipeline next to the original generator's algorithm.

For each whole-word mode (zh = rjieba words, sp = the SentencePiece "▁" rule) on the People's Daily
sample, written as a 2-shard corpus folder, at each dupe factor (1 and 10 by default: the fixed cost
of a command weighs most at dupe 1), side by side in the same run:

    ours (Beam)  `albert instances` itself (flows.cli.main) through the DirectRunner: the whole run
                 (read, prepare, tokenize, pack, mask, serialise, write, stats, manifest) as a user runs it
    ours (core)  `prepare_document` + `encode_group` + `build_group` in-process on the same documents
                 (already in memory), without Beam and without writing: the pure instance-building cost
    reference    `benchmarks.reference_generator` (the original create_pretraining_data.py algorithm) on
                 the FIRST `reference_docs` documents only (it is slow), in the original's text format

Every measured configuration runs in a fresh subprocess (benchmarks/instance_runs.py, which prints
one JSON line), so its peak RSS and CPU are its own: the parent reads them from `os.wait4` (ru_maxrss
of that child and of the processes it waited for, i.e. the largest single process; with workers > 1
that is one Beam worker or the driver, not their sum). Two CPU figures, user + system, never wall
time (the machine is shared):

    whole command  the child process from start to exit, with the processes it waited for (Beam
                   workers): interpreter start-up and imports (Beam ~1.3 CPU-s for ours, TensorFlow
                   ~4 s for the reference) included, as a user pays them
    work           measured in the child around the work itself, after those imports

Throughput = real (non-padding) tokens written per CPU-second, i.e. per core. "One more dupe" is the
CPU cost of one more copy (from the smallest and largest dupe factor), and "fixed" the rest of a run.

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
from core.errors import UserError

REFERENCE_DOCS = 800
DUPE_FACTORS = (1, 10)
"""Measured side by side in one run: the fixed cost of a command weighs most at dupe 1."""
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
    from core.manifest import write_manifest

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
    dupe_factors: tuple[int, ...] = DUPE_FACTORS,
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
    """Run the benchmark; returns every figure (see `format_table`). Every configuration runs at each
    of `dupe_factors`, side by side in the same run. `documents` limits the sample (for quick runs);
    `max_predictions` defaults to the full 15% budget, round(0.15 * max_seq_length)."""
    from core.tokenizer import Tokenizer
    from pipelines.vocab import VocabConfig, train_vocab, write_vocab

    if set(modes) - {"zh", "sp"} or workers < 1:
        raise ValueError(f"modes must be zh and/or sp, workers >= 1 (got {modes}, {workers})")
    if not dupe_factors or min(dupe_factors) < 1 or len(set(dupe_factors)) < len(dupe_factors):
        raise ValueError(f"dupe factors must be distinct and >= 1 (got {dupe_factors})")
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
        common = {"vocab": vocab, "max_seq_length": max_seq_length, "max_predictions": P}

        def run(kind: str, mode: str, dupe: int, scale: int = 1) -> dict:
            log(f"bench instances: {kind} {mode} dupe {dupe} {scale}x")
            spec = dict(common, kind=kind, mode=mode, dupe_factor=dupe, workers=workers)
            spec["corpus"] = corpus.get(scale)
            spec["out"] = os.path.join(work, f"out-{kind}-{mode}-d{dupe}-{scale}x")
            if kind == "reference":
                spec["text"], spec["out"] = texts[scale], spec["out"] + ".tfrecord"
            return run_child(spec)

        result: dict = {
            "config": dict(
                common,
                dupe_factors=list(dupe_factors),
                workers=workers,
                modes=list(modes),
                vocab_size=Tokenizer(proto).vocab_size,
            ),
            "sample_documents": len(docs),
            "reference_documents": n_ref if reference else None,
            "modes": {},
        }
        whos = ("ours", "core", "reference") if reference else ("ours", "core")
        for mode in modes:
            rows = {str(d): {who: run(who, mode, d) for who in whos} for d in dupe_factors}
            if reference:
                for row in rows.values():
                    row["ratios"] = _ratios(row)
            result["modes"][mode] = {"dupe": rows, "per_dupe": _per_dupe(rows, whos)}
        if memory_scaling and modes:
            mode, dupe = modes[0], dupe_factors[0]
            first = result["modes"][mode]["dupe"][str(dupe)]
            memory = {"mode": mode, "dupe_factor": dupe, "scale": SCALE}
            for who in ("ours", "reference") if reference else ("ours",):
                scaled = run(who, mode, dupe, SCALE)
                for key, name in (
                    ("peak_rss_mb", "mb"),
                    ("real_tokens", "tokens"),
                    ("tokens_per_cpu_s",) * 2,
                ):
                    memory[f"{who}_{name}"] = {"1x": first[who][key], f"{SCALE}x": scaled[key]}
            result["memory_scaling"] = memory
        result["bench_wall_s"] = round(time.perf_counter() - started, 1)
        return result
    finally:
        if out_dir is None:
            shutil.rmtree(work, ignore_errors=True)


def _ratio(a, b):
    return round(a / b, 2) if a and b else None


def _ratios(row: dict) -> dict:
    """Ours over the reference at one dupe factor (throughput per CPU-second, fill, peak RSS)."""
    ours, core, ref = row["ours"], row["core"], row["reference"]
    return {
        "command_throughput": _ratio(ours["command_tokens_per_cpu_s"], ref["command_tokens_per_cpu_s"]),
        "beam_throughput": _ratio(ours["tokens_per_cpu_s"], ref["tokens_per_cpu_s"]),
        "core_throughput": _ratio(core["tokens_per_cpu_s"], ref["tokens_per_cpu_s"]),
        "fill_rate": _ratio(ours["fill_rate"], ref["fill_rate"]),
        "peak_rss": _ratio(ours["peak_rss_mb"], ref["peak_rss_mb"]),
    }


def _per_dupe(rows: dict, whos: tuple[str, ...]) -> dict | None:
    """CPU-seconds of one more dupe copy (whole command; core: its work), from the smallest and the
    largest dupe factor, and the fixed part (what a run costs beyond its copies)."""
    dupes = sorted(int(d) for d in rows)
    if len(dupes) < 2:
        return None
    lo, hi = rows[str(dupes[0])], rows[str(dupes[-1])]
    out = {}
    for who in whos:
        key = "cpu_s" if who == "core" else "command_cpu_s"
        step = (hi[who][key] - lo[who][key]) / (dupes[-1] - dupes[0])
        out[who] = {"cpu_s": round(step, 3), "fixed_cpu_s": round(lo[who][key] - dupes[0] * step, 3)}
    return out


def format_table(r: dict) -> str:
    c = r["config"]
    lines = [
        f"albert instances benchmark: L={c['max_seq_length']} P={c['max_predictions']} "
        f"dupe factors {', '.join(map(str, c['dupe_factors']))} side by side, workers={c['workers']}, "
        f"vocab={c['vocab_size']} pieces",
        f"ours: all {r['sample_documents']} sample documents"
        + (
            f"; reference: the first {r['reference_documents']} only (it is slow)"
            if r["reference_documents"]
            else ""
        ),
        "throughput = real (non-padding) tokens written per CPU-second (self + children): per core;",
        "whole command = the process from start to exit (interpreter, imports: Beam for ours, TensorFlow "
        "for the reference);",
        "work = after the imports (core: our instance building alone, in memory, no Beam, no writing)",
    ]
    rows = [
        ("documents", "documents", "{:,}"),
        ("real tokens", "real_tokens", "{:,}"),
        ("CPU s, whole command", "command_cpu_s", "{:.2f}"),
        ("tokens / CPU-s, command", "command_tokens_per_cpu_s", "{:,}"),
        ("CPU s, work", "cpu_s", "{:.2f}"),
        ("tokens / CPU-s, work", "tokens_per_cpu_s", "{:,}"),
        ("wall s, work", "wall_s", "{:.2f}"),
        ("fill rate", "fill_rate", "{:.1%}"),
        ("masked fraction", "masked_fraction", "{:.1%}"),
        ("peak RSS MB", "peak_rss_mb", "{:,.0f}"),
        ("RSS at start of work MB", "rss_after_imports_mb", "{:,.0f}"),
    ]
    heads = {"ours": "ours (Beam)", "core": "ours (core)", "reference": "reference"}
    for mode, by_mode in r["modes"].items():
        dupes = by_mode["dupe"]
        cols = [(d, k) for d, row in dupes.items() for k in ("ours", "core", "reference") if k in row]
        lines += [
            "",
            f"{MODE_NAMES.get(mode, mode):<26}" + "".join(f"{'dupe ' + d:>14}" for d, _ in cols),
            f"{'':<26}" + "".join(f"{heads[k]:>14}" for _, k in cols),
        ]
        for label, key, fmt in rows:
            cells = []
            for d, k in cols:
                # core is no command: its process also reads the documents, untimed
                v = None if k == "core" and key.startswith("command") else dupes[d][k].get(key)
                cells.append(f"{fmt.format(v) if v is not None else '-':>14}")
            lines.append(f"{label:<26}" + "".join(cells))
        for d, row in dupes.items():
            if "ratios" in row:
                q = row["ratios"]
                lines.append(
                    f"{'ours / reference, dupe ' + d:<26}throughput whole command {q['command_throughput']}x, "
                    f"work: Beam {q['beam_throughput']}x, core {q['core_throughput']}x; fill {q['fill_rate']}x; "
                    f"peak RSS {q['peak_rss']}x (different input sizes)"
                )
        if by_mode["per_dupe"]:
            lines.append(
                f"{'one more dupe, CPU-s':<26}"
                + "; ".join(
                    f"{heads[k]} {v['cpu_s']:.2f} (fixed {v['fixed_cpu_s']:.2f})"
                    for k, v in by_mode["per_dupe"].items()
                )
            )
    m = r.get("memory_scaling")
    if m:
        s = f"{m['scale']}x"
        lines += [
            "",
            f"memory scaling, mode {m['mode']}, dupe {m['dupe_factor']}{'tokens 1x':>12}{'tokens ' + s:>14}"
            f"{'RSS MB 1x':>11}{'RSS MB ' + s:>11}{'growth':>9}{'tok/CPU-s 1x':>14}{'tok/CPU-s ' + s:>14}",
        ]
        for who, what in (("ours", "full sample"), ("reference", "its subset")):
            if f"{who}_mb" in m:
                (a, b), (t1, t3) = m[f"{who}_mb"].values(), m[f"{who}_tokens"].values()
                p1, p3 = m[f"{who}_tokens_per_cpu_s"].values()
                lines.append(
                    f"{who + ' (' + what + ')':<33}{t1:>14,}{t3:>14,}{a:>11,.0f}{b:>11,.0f}{b - a:>+9,.0f}"
                    f"{p1:>14,.0f}{p3:>14,.0f}"
                )
    lines.append(f"\nbench wall time {r['bench_wall_s']} s")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ CLI


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-seq-length", type=int, default=512)
    p.add_argument("--max-predictions", type=int, default=None, help="default round(0.15 * L)")
    p.add_argument(
        "--dupe-factors",
        default=",".join(map(str, DUPE_FACTORS)),
        help="dupe factors measured side by side, comma separated [%(default)s]",
    )
    p.add_argument("--workers", type=int, default=1, help="1: in-memory DirectRunner; N: N processes")
    p.add_argument("--modes", default="zh,sp", help="whole-word modes to compare, comma separated")
    p.add_argument("--no-reference", dest="reference", action="store_false")
    p.add_argument("--no-memory-scaling", dest="memory_scaling", action="store_false")
    p.add_argument("--documents", type=int, default=None, help="use only the first N sample documents")
    p.add_argument("--reference-docs", type=int, default=REFERENCE_DOCS)
    p.add_argument("--out", default=None, help="keep inputs and outputs here (default: a temp dir)")
    add_json_argument(p)


def _dupe_factors(text: str) -> tuple[int, ...]:
    try:
        dupes = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        dupes = ()
    if not dupes or min(dupes) < 1 or len(set(dupes)) < len(dupes):
        raise UserError(f"--dupe-factors: distinct comma-separated integers >= 1, got {text!r}")
    return dupes


def run(args: argparse.Namespace) -> int:
    result = run_instances_bench(
        max_seq_length=args.max_seq_length,
        dupe_factors=_dupe_factors(args.dupe_factors),
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
