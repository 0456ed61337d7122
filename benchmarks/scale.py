"""`albert bench scale` (`make bench-scale`): how each stage's cost grows from the sample to N times it.

For each scale N (`--scales 1,4,16`; `1,4,16,64` is the long run) a scale corpus of N distinct copies
of the bundled sample with planted near-duplicates (benchmarks/scale_corpus.py) goes through the real
commands, each a subprocess: `albert corpus` -> `albert vocab` -> `albert instances`, the DirectRunner
in multi_processing mode with `--workers` (2) workers, the demo's vocabulary and instance options.
Per scale and stage: CPU-seconds of the whole process tree (benchmarks/proctree.py), wall time, peak
RSS of the main process, of the largest worker and of the tree at its worst moment, output bytes,
documents in and out, and characters per CPU-second (per core: a CPU-second is one core busy).

Then, against the input characters of each scale: the growth exponent of every figure (least-squares
slope of log(figure) on log(characters); also over the last step alone, where a run's fixed cost, which
flattens the fit, matters least), the corpus stage's peak RSS per added document (slope of the
tree's peak RSS on documents read) and the largest corpus it predicts on a 24 GB machine, and the
near-duplicate recall and precision at the largest scale next to the smallest. Targets:
  - CPU exponent <= 1.05 per stage (cost linear in the input);
  - instances: peak RSS per worker flat, taken as exponent <= 0.10 (at most 1.32x over 16x input);
  - corpus: <= 12 KB of peak RSS per added document (zhwiki's 1.3M articles then fit in 24 GB);
  - corpus: >= 400k characters per CPU-second at the largest scale;
  - near-duplicate recall and precision at the largest scale at most 0.02 below the smallest's.
Each is printed PASS or FAIL next to its figure; none is asserted.

Not part of `albert bench all`: it runs for tens of minutes (an hour and more with 64x).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict

from benchmarks.proctree import run_measured
from benchmarks.report import add_json_argument, module_main, write_json
from benchmarks.scale_corpus import near_dup_scores, write_scale_corpus
from core import storage
from core.errors import UserError

STAGES = ("corpus", "vocab", "instances")
# The demo's options (flows/demo.py, flows/repretrain.py): realistic, and fast enough to repeat.
VOCAB_ARGS = ["--vocab-size", "8000"]
INSTANCE_ARGS = ["--max-seq-length", "128", "--max-predictions", "20", "--dupe-factor", "1"]
INSTANCE_ARGS += ["--whole-word", "zh"]
MEMORY_BUDGET = 24 * 2**30  # the one machine, 24 GB
ZHWIKI_ARTICLES = 1_300_000
CPU_EXPONENT_MAX = 1.05
WORKER_RSS_EXPONENT_MAX = 0.10
KB_PER_DOC_MAX = 12.0
CHARS_PER_CPU_S_MIN = 400_000
NEAR_DUP_TOLERANCE = 0.02
MB = 2**20


# --- fits -------------------------------------------------------------------------------------------------


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (slope, intercept) of y on x; needs two distinct x."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if n < 2 or sxx == 0:
        raise ValueError("a line needs at least two distinct x")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return slope, my - slope * mx


def growth_exponent(xs: list[float], ys: list[float]) -> float | None:
    """The k of y ~ x^k: slope of log(y) on log(x); None without two distinct x or with a value <= 0."""
    if len(set(xs)) < 2 or min(ys, default=0) <= 0 or min(xs) <= 0:
        return None
    return fit_line([math.log(x) for x in xs], [math.log(y) for y in ys])[0]


# --- one scale ------------------------------------------------------------------------------------------


def albert_command(*args: str) -> list[str]:
    """The real `albert` CLI (flows/cli.py) of this interpreter."""
    return [sys.executable, "-m", "flows.cli", *args]


def albert_env() -> dict:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def stage_commands(sources: list[str], folder: str, workers: int) -> dict[str, list[str]]:
    """The three commands of one scale, reading `sources` and writing under `folder`."""
    beam = ["--direct_running_mode", "multi_processing", "--direct_num_workers", str(workers)]
    corpus, vocab, instances = (os.path.join(folder, s) for s in STAGES)
    return {
        "corpus": albert_command(
            "corpus", *(a for s in sources for a in ("--source", s)), "--out", corpus, *beam
        ),
        "vocab": albert_command("vocab", "--corpus", corpus, "--out", vocab, *VOCAB_ARGS),
        "instances": albert_command(
            "instances", "--corpus", corpus, "--vocab", vocab, "--out", instances, *INSTANCE_ARGS, *beam
        ),
    }


def folder_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def _documents(stage: str, out: str, previous: dict) -> tuple[int, int, str]:
    """(documents in, count out, unit out) from the stage's manifest."""
    manifest = storage.read_json(os.path.join(out, "manifest.json"))
    if stage == "corpus":
        return manifest["counts"]["read"], manifest["counts"]["kept"], "documents"
    if stage == "vocab":
        return previous["corpus"]["docs_out"], manifest["counts"]["vocab_size"], "pieces"
    splits = [manifest["summary"][s] for s in ("train", "eval") if manifest["summary"].get(s)]
    return sum(s["documents"] for s in splits), sum(s["instances"] for s in splits), "instances"


class StageError(Exception):
    """A stage's command failed; the message ends with its log's tail."""


def measure_stage(
    stage: str, cmd: list[str], folder: str, characters: int, previous: dict, interval: float
) -> dict:
    """Run one stage's command, its output to `folder/STAGE.log`, and return its figures (`previous`:
    the figures of the stages before it in this scale)."""
    log = os.path.join(folder, f"{stage}.log")
    tree = run_measured(cmd, env=albert_env(), log_path=log, interval=interval)
    if tree.returncode:
        with open(log, encoding="utf-8", errors="replace") as f:
            tail = f.read()[-2000:]
        raise StageError(f"albert {stage} failed (exit {tree.returncode}); the end of {log}:\n{tail}")
    out = os.path.join(folder, stage)
    docs_in, out_count, unit = _documents(stage, out, previous)
    return {
        "cpu_s": round(tree.cpu_s, 2),
        "rusage_cpu_s": round(tree.rusage_cpu_s, 2),
        "polled_cpu_s": round(tree.polled_cpu_s, 2),
        "wall_s": round(tree.wall_s, 2),
        "main_peak_rss_mb": round(tree.root.peak_rss / MB, 1),
        "worker_peak_rss_mb": round(tree.max_worker_rss / MB, 1) if tree.workers else None,
        "worker_processes": len(tree.workers),
        "sum_peak_rss_mb": round(tree.sum_peak_rss / MB, 1),
        "output_bytes": folder_bytes(out),
        "docs_in": docs_in,
        "docs_out": out_count,
        "out_unit": unit,
        "chars_per_cpu_s": round(characters / tree.cpu_s) if tree.cpu_s > 0 else None,
        "processes": [asdict(tree.root)] + [asdict(w) for w in tree.workers],
        "samples": tree.samples,
    }


def run_scale(copies: int, work: str, args: argparse.Namespace) -> dict:
    """Generate the N-copy corpus, run the three stages on it, score its near-duplicates."""
    folder = os.path.join(work, f"scale-{copies}x")
    started = time.perf_counter()
    corpus = write_scale_corpus(
        os.path.join(folder, "input"),
        copies,
        near_dup_rate=args.near_dup_rate,
        seed=args.seed,
        articles=args.articles,
    )
    generated = time.perf_counter() - started
    stages: dict[str, dict] = {}
    for stage, cmd in stage_commands(corpus.sources, folder, args.workers).items():
        print(f"  {copies}x {stage} ...", flush=True)
        stages[stage] = measure_stage(stage, cmd, folder, corpus.characters, stages, args.interval)
    return {
        "copies": copies,
        "documents": corpus.documents,
        "characters": corpus.characters,
        "planted": corpus.planted,
        "generate_s": round(generated, 2),
        "stages": stages,
        "near_dup": near_dup_scores(os.path.join(folder, "corpus"), corpus.truth_path),
    }


# --- the curve ------------------------------------------------------------------------------------------

METRICS = ("cpu_s", "wall_s", "main_peak_rss_mb", "worker_peak_rss_mb", "sum_peak_rss_mb", "output_bytes")
LABELS = ("CPU-s", "wall s", "main RSS", "worker RSS", "sum RSS", "output")
NEAR_DUP_SHOWN = (
    "recall",
    "precision",
    "scorable_pairs",
    "removals",
    "wrong_removals",
    "cross_copy_removals",
)


def growth(runs: list[dict]) -> dict:
    """Per stage and figure, its growth exponent against input characters."""
    xs = [r["characters"] for r in runs]
    out = {}
    for stage in STAGES:
        out[stage] = {}
        for m in METRICS:
            ys = [r["stages"][stage][m] for r in runs]
            exp = None if None in ys else growth_exponent(xs, ys)
            out[stage][m] = None if exp is None else round(exp, 3)
    return out


def corpus_memory(runs: list[dict]) -> dict | None:
    """The corpus stage's added peak RSS per added document read (the tree's peak and the main
    process's), and what that line predicts for zhwiki and for the 24 GB machine."""
    docs = [r["stages"]["corpus"]["docs_in"] for r in runs]
    if len(set(docs)) < 2:
        return None
    tree = fit_line(docs, [r["stages"]["corpus"]["sum_peak_rss_mb"] * MB for r in runs])
    main = fit_line(docs, [r["stages"]["corpus"]["main_peak_rss_mb"] * MB for r in runs])
    slope, intercept = tree
    return {
        "kb_per_doc": round(slope / 1024, 2),
        "main_kb_per_doc": round(main[0] / 1024, 2),
        "intercept_mb": round(intercept / MB, 1),
        "zhwiki_peak_gb": round((intercept + slope * ZHWIKI_ARTICLES) / 2**30, 2),
        "max_documents_24gb": int((MEMORY_BUDGET - intercept) / slope) if slope > 0 else None,
    }


def _target(name: str, value, ok: bool | None) -> dict:
    return {"target": name, "value": value, "pass": ok}


def targets(runs: list[dict], exps: dict, memory: dict | None) -> list[dict]:
    first, last = runs[0], runs[-1]
    out = []
    for stage in STAGES:
        e = exps[stage]["cpu_s"]
        out.append(
            _target(
                f"{stage}: CPU exponent <= {CPU_EXPONENT_MAX}",
                e,
                None if e is None else e <= CPU_EXPONENT_MAX,
            )
        )
    e = exps["instances"]["worker_peak_rss_mb"]
    ok = None if e is None else e <= WORKER_RSS_EXPONENT_MAX
    out.append(_target(f"instances: peak RSS per worker exponent <= {WORKER_RSS_EXPONENT_MAX}", e, ok))
    kb = memory and memory["kb_per_doc"]
    ok = None if kb is None else kb <= KB_PER_DOC_MAX
    out.append(_target(f"corpus: peak RSS per added document <= {KB_PER_DOC_MAX:g} KB", kb, ok))
    gb = memory and memory["zhwiki_peak_gb"]
    ok = None if gb is None else gb <= MEMORY_BUDGET / 2**30
    out.append(
        _target(f"corpus: {ZHWIKI_ARTICLES / 1e6:g}M documents (zhwiki) fit in 24 GB (predicted GB)", gb, ok)
    )
    rate = last["stages"]["corpus"]["chars_per_cpu_s"]
    ok = None if rate is None else rate >= CHARS_PER_CPU_S_MIN
    out.append(
        _target(
            f"corpus at {last['copies']}x: >= {CHARS_PER_CPU_S_MIN:,} characters per CPU-second", rate, ok
        )
    )
    for key in ("recall", "precision"):
        a, b = first["near_dup"].get(key), last["near_dup"].get(key)
        ok = None if a is None or b is None or last is first else b >= a - NEAR_DUP_TOLERANCE
        name = f"near-dup {key} at {last['copies']}x within {NEAR_DUP_TOLERANCE} of {first['copies']}x's {a}"
        out.append(_target(name, b, ok))
    return out


# --- report ---------------------------------------------------------------------------------------------


def _mb(x) -> str:
    return "-" if x is None else f"{x:,.0f}"


def format_table(result: dict) -> str:
    runs = result["scales"]
    lines = [
        f"albert bench scale: corpus -> vocab -> instances, DirectRunner multi_processing, "
        f"{result['workers']} workers; {result['cpus']} cores, load average {result['load_average']} at start",
        f"{'scale':<6}{'stage':<11}{'docs in':>9}{'out':>20}{'chars in':>13}{'CPU-s':>9}{'rusage':>9}"
        f"{'polled':>9}{'wall s':>8}{'main MB':>9}{'worker MB':>13}{'sum MB':>8}{'output MB':>10}{'chars/CPU-s':>12}",
    ]
    for r in runs:
        for stage in STAGES:
            s = r["stages"][stage]
            worker = (
                "-"
                if s["worker_peak_rss_mb"] is None
                else f"{s['worker_peak_rss_mb']:,.0f} ({s['worker_processes']})"
            )
            out = f"{s['docs_out']:,} {s['out_unit']}"
            lines.append(
                f"{str(r['copies']) + 'x':<6}{stage:<11}{s['docs_in']:>9,}{out:>20}"
                f"{r['characters']:>13,}{s['cpu_s']:>9.1f}{s['rusage_cpu_s']:>9.1f}{s['polled_cpu_s']:>9.1f}"
                f"{s['wall_s']:>8.1f}{_mb(s['main_peak_rss_mb']):>9}{worker:>13}{_mb(s['sum_peak_rss_mb']):>8}"
                f"{s['output_bytes'] / MB:>10.1f}{s['chars_per_cpu_s'] or 0:>12,}"
            )
    lines.append(
        "  CPU-s: the larger of rusage (reaped processes) and polled (every process seen); worker MB:"
    )
    lines.append(
        "  the largest worker (the processes besides main, shell wrappers included); sum MB: the tree at its peak"
    )
    for r in runs:
        nd = ", ".join(f"{k} {r['near_dup'][k]}" for k in NEAR_DUP_SHOWN if k in r["near_dup"])
        lines.append(f"near-dup at {r['copies']}x ({r['planted']} planted): {nd}")
    blocks = [("growth", runs), ("growth_last_step", runs[-2:])] if len(runs) > 2 else [("growth", runs)]
    for key, span in blocks if len(runs) > 1 else []:
        what = (
            "the least-squares fit" if key == "growth" else "the last step alone (fixed costs matter least)"
        )
        lines.append(
            f"growth exponents against input characters, {span[0]['copies']}x..{span[-1]['copies']}x, {what}"
        )
        lines.append(f"  {'stage':<11}" + "".join(f"{label:>11}" for label in LABELS))
        for stage, exps in result[key].items():
            lines.append(
                f"  {stage:<11}" + "".join(f"{'-' if exps[m] is None else exps[m]:>11}" for m in METRICS)
            )
    m = result["corpus_memory"]
    if m:
        most = m["max_documents_24gb"]
        lines.append(
            f"corpus memory: +{m['kb_per_doc']} KB peak RSS per added document (main process "
            f"+{m['main_kb_per_doc']} KB), {m['intercept_mb']:,} MB at 0; zhwiki's {ZHWIKI_ARTICLES:,} "
            f"articles: {m['zhwiki_peak_gb']} GB; the largest corpus in 24 GB: "
            f"{'unbounded' if most is None else f'{most:,}'} documents (extrapolated)"
        )
    lines.append("targets")
    for t in result["targets"]:
        verdict = {True: "PASS", False: "FAIL", None: "n/a "}[t["pass"]]
        lines.append(f"  {verdict}  {t['target']}: {'-' if t['value'] is None else t['value']}")
    return "\n".join(lines)


def write_plot(result: dict, path: str) -> None:
    """Log-log CPU-seconds and the tree's peak RSS against input characters, one line per stage."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    runs = result["scales"]
    xs = [r["characters"] for r in runs]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, metric, label in (
        (axes[0], "cpu_s", "CPU-seconds (process tree)"),
        (axes[1], "sum_peak_rss_mb", "peak RSS of the tree (MB)"),
    ):
        for stage in STAGES:
            ax.plot(xs, [r["stages"][stage][metric] for r in runs], marker="o", label=stage)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # decades only: minor labels overlap
        ax.set_xlabel("input characters")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    sizes = ", ".join(f"{r['copies']}x" for r in runs)
    fig.suptitle(f"albert bench scale: {sizes} the sample, {result['workers']} workers")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# --- entry point ----------------------------------------------------------------------------------------


def parse_scales(text: str) -> list[int]:
    try:
        scales = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise UserError(f"--scales takes comma-separated whole numbers (e.g. 1,4,16), not {text!r}") from None
    if not scales or min(scales) < 1 or len(set(scales)) != len(scales):
        raise UserError(f"--scales takes distinct numbers >= 1 (e.g. 1,4,16), not {text!r}")
    return sorted(scales)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scales", default="1,4,16", help="copies of the sample per run [1,4,16]; 1,4,16,64 is the long run"
    )
    p.add_argument("--workers", type=int, default=2, help="DirectRunner workers of corpus and instances [2]")
    p.add_argument(
        "--articles", type=int, default=None, help="only the first K sample articles per copy (quick runs)"
    )
    p.add_argument(
        "--near-dup-rate", type=float, default=0.02, help="planted near-duplicates per document [0.02]"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--work", default=None, help="folder for the corpora and outputs (kept) [a temporary folder, removed]"
    )
    p.add_argument("--keep", action="store_true", help="keep the temporary work folder")
    p.add_argument(
        "--plot", default=None, metavar="PATH", help="the PNG [next to --json, else in a kept work folder]"
    )
    p.add_argument(
        "--interval", type=float, default=0.15, help="seconds between polls of the process tree [0.15]"
    )
    add_json_argument(p)


def _check(args: argparse.Namespace) -> list[int]:
    scales = parse_scales(args.scales)
    if args.workers < 1:
        raise UserError(f"--workers must be at least 1, not {args.workers}")
    if args.articles is not None and args.articles < 1:
        raise UserError(f"--articles must be at least 1, not {args.articles}")
    if not 0 <= args.near_dup_rate < 1:
        raise UserError(f"--near-dup-rate must be in [0, 1), not {args.near_dup_rate}")
    if args.interval <= 0:
        raise UserError(f"--interval must be positive, not {args.interval}")
    if args.work and os.path.exists(args.work) and (not os.path.isdir(args.work) or os.listdir(args.work)):
        raise UserError(f"--work {args.work}: give an empty or new folder (the runs write into it)")
    for path in (args.json, args.plot):
        if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise UserError(f"{path}: its folder does not exist")
    return scales


def run(args: argparse.Namespace) -> int:
    scales = _check(args)
    work = args.work or tempfile.mkdtemp(prefix="bench-scale-")
    os.makedirs(work, exist_ok=True)
    keep = bool(args.work) or args.keep
    plot = args.plot or (os.path.splitext(args.json)[0] + ".png" if args.json else None)
    plot = plot or (os.path.join(work, "scale.png") if keep else None)
    result = {"workers": args.workers, "cpus": os.cpu_count(), "load_average": round(os.getloadavg()[0], 2)}
    result["options"] = {"vocab": VOCAB_ARGS, "instances": INSTANCE_ARGS, "articles": args.articles}
    try:
        runs = [run_scale(n, work, args) for n in scales]
    except StageError as err:  # the work folder stays: its logs say why
        print(f"albert bench scale: {err}\nwork folder kept: {work}", file=sys.stderr)
        return 1
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    exps = growth(runs)
    memory = corpus_memory(runs)
    result.update(scales=runs, growth=exps, growth_last_step=growth(runs[-2:]), corpus_memory=memory)
    result["targets"] = targets(runs, exps, memory)
    print(format_table(result))
    if plot:
        write_plot(result, plot)
        print(f"plot: {plot}")
    else:
        print("no plot: give --plot PATH or --json PATH")
    if keep:
        print(f"work folder: {work}")
    write_json(result, args.json)
    return 0


if __name__ == "__main__":
    module_main("benchmarks.scale", __doc__, add_arguments, run)
