"""`albert instances`: an Apache Beam pipeline from documents to ALBERT pretraining TFRecords.

    inputs: [(index, kind, path)]                      one element per input file, sorted by path
      | Reshuffle                                      spread input files over workers
      | ReadGroups        -> Group(file, split, n, [PreparedDoc])   ~group_chars characters each
                          -> "read": {documents_read, skipped: {reason: n}} per input file
                             (+ skipped-<file>.jsonl.gz: the dead letter, every record with its reason)
      | WriteGroupFiles   -> stats dict per written file            one TFRecord file per (group, dupe)
      | CombineGlobally(merge_stats) | WriteStats      -> stats.json
    driver, after the run: manifest.json (inputs + hashes, options, vocab hash, counts, output hashes)

Unusable documents are skipped and written to the dead letter with their reason. `empty` (nothing left
after normalisation) is a legitimate skip; every other reason (malformed JSON or document, invalid
UTF-8, no gold words for --whole-word gold) means broken input or input that does not suit the options,
so it counts against --max-dead-letter-fraction: past it the stage fails instead of writing a manifest.
A file that cannot be read to its end (truncated or corrupt .gz/.bz2) fails the stage: the documents
it would have held cannot be counted, and instances must be built from all of their input or not at all.

Groups are consecutive documents of ONE input file and never need a shuffle of documents, so memory
per worker is bounded by the group size whatever the corpus size, and the files written depend only on
the input, the options and the seed: not on the runner, the number of workers, or processing order.
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from collections import Counter
from dataclasses import asdict, dataclass

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines import documents, outdir, peoples_daily
from pipelines.core import storage
from pipelines.core.errors import StageFailed, UserError
from pipelines.deadletter import check_dead_letters
from pipelines.documents import UnreadableFile
from pipelines.instance_builder import (
    InstanceConfig,
    PreparedDoc,
    build_group,
    encode_group,
    merge_stats,
    prepare_document,
    split_of,
)
from pipelines.masking import MaskingConfig
from pipelines.packing import PackingConfig
from pipelines.tokenizer import WHOLE_WORD_MODES, TextNormalizer, Tokenizer

NAMESPACE = "albert.instances"
PASSES_BEAM_ARGS = True  # unknown CLI options go to Beam's PipelineOptions
LEGITIMATE_SKIPS = ("empty",)  # skip reasons that are no dead letter (see the module docstring)
MAX_DEAD_LETTER_FRACTION = 0.01


@dataclass
class Group:
    file_index: int
    split: str
    index: int
    docs: list[PreparedDoc]
    notes: dict  # repairs counted while preparing these documents


def iter_documents(kind: str, path: str):
    if kind == "text":
        return documents.read_text_documents(path)
    if kind == "jsonl":
        return documents.read_jsonl_documents(path)
    if kind == "peoples-daily":
        return peoples_daily.read_articles(path)
    raise ValueError(f"unknown input kind {kind!r}")


def _documents(kind: str, path: str, unreadable: list[str]):
    """iter_documents; a file that cannot be read to its end ends the stream, its error noted in
    `unreadable`."""
    try:
        yield from iter_documents(kind, path)
    except UnreadableFile as err:
        unreadable.append(str(err))


class ReadGroups(beam.DoFn):
    """(index, kind, path) -> Group elements, plus one "read" stats dict per input file.

    Unusable documents go to `skipped-<index>.jsonl.gz` in `out_dir` (dead letter: id, reason, where,
    and the raw line when there is one), written by the worker that reads that input file. A file
    that cannot be read to its end is reported in the stats ("unreadable"), never raised: an exception
    would reach the driver as a runner-specific traceback, the stats reach it as data."""

    def __init__(self, config: InstanceConfig, out_dir: str, vocab_model: str):
        self.config = config
        self.out_dir = out_dir
        self.vocab_model = vocab_model
        self.read = Metrics.counter(NAMESPACE, "documents_read")
        self.kept = Metrics.counter(NAMESPACE, "documents_kept")
        self.skipped = Metrics.counter(NAMESPACE, "documents_skipped")

    def setup(self):
        # The vocabulary decides how text is normalized (rules compiled into spm.model, or Python).
        self.normalizer = TextNormalizer(storage.read_bytes(self.vocab_model))

    def process(self, item):
        file_index, kind, path = item
        cfg = self.config
        pending = {"train": [], "eval": []}
        chars = {"train": 0, "eval": 0}
        count = {"train": 0, "eval": 0}
        notes = {"train": Counter(), "eval": Counter()}
        skipped: list[dict] = []
        n_read = 0
        unreadable: list[str] = []
        for n, doc in enumerate(_documents(kind, path, unreadable)):
            n_read += 1
            self.read.inc()
            doc_notes: Counter = Counter()
            prepared = prepare_document(doc, cfg.whole_word, doc_notes, self.normalizer)
            if isinstance(prepared, str):
                self.skipped.inc()
                Metrics.counter(NAMESPACE, f"skipped_{prepared}").inc()
                doc_id = doc.get("id")
                skipped.append(
                    {"id": doc_id if isinstance(doc_id, str) else None, "reason": prepared,
                     "where": doc.get("_where", f"{path}#{n}"), "raw": doc.get("_raw")}
                )  # fmt: skip
                continue
            self.kept.inc()
            split = split_of(prepared.id, cfg.eval_fraction)
            pending[split].append(prepared)
            chars[split] += prepared.chars
            notes[split].update(doc_notes)
            if chars[split] >= cfg.group_chars:
                yield Group(file_index, split, count[split], pending[split], dict(notes[split]))
                count[split] += 1
                pending[split], chars[split], notes[split] = [], 0, Counter()
        for split in ("train", "eval"):
            if pending[split]:
                yield Group(file_index, split, count[split], pending[split], dict(notes[split]))
        if skipped:
            dead_letter = storage.join(self.out_dir, f"skipped-{file_index:05d}.jsonl.gz")
            lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in skipped)
            storage.write_bytes(dead_letter, gzip.compress(lines.encode(), mtime=0))
        read = {"documents_read": n_read, "skipped": dict(Counter(r["reason"] for r in skipped))}
        if unreadable:
            read["unreadable"] = [f"{unreadable[0]}, after {n_read} documents"]
        yield beam.pvalue.TaggedOutput("read", read)


class WriteGroupFiles(beam.DoFn):
    """Group -> one TFRecord file per dupe index; yields a stats dict per file."""

    def __init__(self, vocab_model: str, out_dir: str, config: InstanceConfig):
        self.vocab_model = vocab_model
        self.out_dir = out_dir
        self.config = config
        self.instances = Metrics.counter(NAMESPACE, "instances_written")
        self.tokens = Metrics.counter(NAMESPACE, "real_tokens_written")

    def setup(self):
        self.tokenizer = Tokenizer(storage.read_bytes(self.vocab_model))

    def process(self, group: Group):
        stream = encode_group(group.docs, self.tokenizer, self.config.whole_word)  # once for all copies
        for dupe in range(self.config.dupe_factor):
            blob, stats = build_group(group.docs, self.tokenizer, self.config, dupe, stream)
            name = f"{group.split}-{group.file_index:05d}-{group.index:05d}-{dupe:03d}.tfrecord"
            if blob:
                storage.write_bytes(storage.join(self.out_dir, name), blob)
                stats["files"] = [{"name": name, "records": stats["instances"], "bytes": len(blob)}]
            self.instances.inc(stats["instances"])
            self.tokens.inc(stats["real_tokens"])
            if dupe == 0:  # document-level counts once per group, not once per copy
                stats["documents"] = len(group.docs)
                stats["sentences"] = sum(len(d.sentences) for d in group.docs)
                stats["characters"] = sum(d.chars for d in group.docs)
                stats["notes"] = dict(group.notes)
            yield {group.split: stats}


class _MergeStats(beam.CombineFn):
    def create_accumulator(self):
        return {}

    def add_input(self, acc, item):
        return merge_stats(acc, item)

    def merge_accumulators(self, accs):
        out = {}
        for a in accs:
            out = merge_stats(out, a)
        return out

    def extract_output(self, acc):
        return acc


def _write_json(obj, path: str) -> None:
    storage.write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True))


class CreateInstances(beam.PTransform):
    """PCollection[(index, kind, path)] -> PCollection[stats dict] (one per TFRecord file written);
    writes the TFRecords, `skipped-*.jsonl.gz` (dead letter) and `stats.json` under `out_dir`."""

    def __init__(self, vocab_model: str, out_dir: str, config: InstanceConfig):
        super().__init__()
        self.vocab_model, self.out_dir, self.config = vocab_model, out_dir, config

    def expand(self, inputs):
        read = (
            inputs
            | "SpreadInputs" >> beam.Reshuffle()
            | "ReadGroups"
            >> beam.ParDo(ReadGroups(self.config, self.out_dir, self.vocab_model)).with_outputs(
                "read", main="groups"
            )
        )
        file_stats = read.groups | "WriteGroupFiles" >> beam.ParDo(
            WriteGroupFiles(self.vocab_model, self.out_dir, self.config)
        )
        _ = (
            (file_stats, read.read)
            | "AllStats" >> beam.Flatten()
            | "MergeStats" >> beam.CombineGlobally(_MergeStats())
            | "WriteStats" >> beam.Map(_write_json, storage.join(self.out_dir, "stats.json"))
        )
        return file_stats


# ---------------------------------------------------------------------------------------- driver


def resolve_inputs(text: list[str] | None, corpus: str | None) -> list[tuple[int, str, str]]:
    """The input files as (index, kind, path), sorted by path so indices do not depend on glob order.
    UserError, before any work, for a pattern that matches nothing, a folder, or input files that are
    all empty."""
    if text and corpus:
        raise UserError("give either --text or --corpus, not both")
    if corpus:
        items = [("jsonl", p) for p in documents.corpus_files(corpus)]
    elif text:
        paths = []
        for pattern in text:
            matched = storage.glob(pattern)
            if not matched and storage.isdir(pattern):
                folder = pattern.rstrip("/")
                raise UserError(
                    f"--text {pattern} is a folder: give its files (e.g. --text '{folder}/*.txt')"
                )
            if not matched:
                raise UserError(f"no input file matches {pattern}")
            paths += matched
        paths = sorted(set(paths))
        if all(storage.size(p) == 0 for p in paths):
            raise UserError(
                f"--text {' '.join(text)}: the input is empty (0 bytes); nothing to build instances from"
            )
        items = [("text", p) for p in paths]
    else:
        items = [("peoples-daily", peoples_daily.sample_path())]
    return [(i, kind, path) for i, (kind, path) in enumerate(sorted(items, key=lambda x: x[1]))]


def summarize(stats: dict, config: InstanceConfig | None = None) -> dict:
    """Headline figures of a run, computed from the merged stats (per split and overall)."""
    kept = sum(stats.get(split, {}).get("documents", 0) for split in ("train", "eval"))
    skipped = sum(stats.get("skipped", {}).values())
    out = {
        "accounting": {
            "documents_read": stats.get("documents_read", 0),
            "documents_kept": kept,
            "documents_skipped": skipped,
            "balanced": stats.get("documents_read", 0) == kept + skipped,
        }
    }
    for split in ("train", "eval"):
        s = stats.get(split)
        if not s:
            continue
        inst, real, pos = s.get("instances", 0), s.get("real_tokens", 0), s.get("positions", 0)
        out[split] = {
            "documents": s.get("documents", 0),
            "instances": inst,
            "real_tokens": real,
            "fill_rate": round(real / pos, 4) if pos else 0.0,
            "masked_fraction": round(s.get("masked", 0) / real, 4) if real else 0.0,
            "masked_per_instance": round(s.get("masked", 0) / inst, 2) if inst else 0.0,
            "sop_swapped_fraction": round(s.get("sop_swapped", 0) / inst, 4) if inst else 0.0,
            "mask_kinds": {
                k: round(s.get(f"masked_as_{k}", 0) / max(1, s.get("masked", 0)), 4)
                for k in ("mask", "random", "kept")
            },
            "ngram_used": s.get("ngram_used"),
            "tokens_dropped_no_boundary": s.get("tokens_dropped_no_boundary", 0),
            "sentences_split_across_sequences": s.get("sentences_split_across_sequences", 0),
        }
    return out


def check_accounting(stats: dict, written: list[str]) -> None:
    """StageFailed unless every document read was kept or skipped, and the TFRecord files on disk are
    the ones the stats list (the counters and the files must tell the same story)."""
    acc = summarize(stats)["accounting"]
    problems = []
    if not acc["balanced"]:
        problems.append(
            f"documents read {acc['documents_read']} != kept {acc['documents_kept']} "
            f"+ skipped {acc['documents_skipped']}"
        )
    listed = {f["name"] for split in ("train", "eval") for f in stats.get(split, {}).get("files", [])}
    on_disk = {storage.basename(p) for p in written}
    if listed != on_disk:
        problems.append(f"{len(on_disk)} TFRecord files on disk, the stats list {len(listed)}")
    if problems:
        raise StageFailed("instance accounting failed, no manifest written: " + "; ".join(problems))


def dead_letters(stats: dict) -> dict[str, int]:
    """Skipped documents that are dead letters, by reason (every skip but LEGITIMATE_SKIPS)."""
    return {r: n for r, n in stats.get("skipped", {}).items() if r not in LEGITIMATE_SKIPS}


def check_outcome(
    stats: dict, out_dir: str, max_dead_letter_fraction: float, source: str = "the input"
) -> None:
    """StageFailed when the run must not be published: an input file could not be read to its end,
    the input held no document, too much of it went to the dead letter, nothing was kept, or no
    training instance came out."""
    unreadable = stats.get("unreadable", [])
    if unreadable:
        more = f" (and {len(unreadable) - 1} more unreadable files)" if len(unreadable) > 1 else ""
        raise StageFailed(f"{unreadable[0]}{more}: fix or remove it; no manifest written")
    read = stats.get("documents_read", 0)
    if read == 0:
        raise StageFailed(f"{source} holds no document (nothing but blank lines); no manifest written")
    dead = dead_letters(stats)
    check_dead_letters(
        dead,
        read,
        max_dead_letter_fraction,
        "documents",
        storage.join(out_dir, "skipped-*.jsonl.gz"),
    )
    skipped = sum(stats.get("skipped", {}).values())
    if skipped == read:
        raise StageFailed(
            f"all {read} documents of {source} were skipped as empty; nothing to build instances from"
        )
    if not stats.get("train", {}).get("instances"):
        raise StageFailed(
            f"no training instance came out of {read - skipped} documents of {source} "
            f"({stats.get('train', {}).get('documents', 0)} in the train split): "
            f"give more text, or lower --eval-fraction; no manifest written"
        )


def describe_inputs(inputs: list[tuple[int, str, str]]) -> list[dict]:
    """The inputs as the manifest records them (kind, path, content hash)."""

    return [{"kind": kind, "path": path, "sha256": storage.sha256(path)} for _, kind, path in inputs]


def check_previous(out_dir: str, inputs: list[dict], vocab_sha: str, config: InstanceConfig, force: bool):
    """UserError when out_dir holds finished instances of other inputs, vocabulary or options (as
    `albert corpus` does): replacing them takes --force."""
    path = storage.join(out_dir, "manifest.json")
    if force or not storage.exists(path):
        return
    try:
        previous = storage.read_json(path)
        same = (
            previous["inputs"] == inputs
            and previous["vocab"]["sha256"] == vocab_sha
            and previous["config"] == json.loads(json.dumps(asdict(config)))
        )
    except (ValueError, KeyError, TypeError):
        same = False
    if not same:
        raise UserError(
            f"--out {out_dir} holds instances of other inputs, vocabulary or options; pass --force "
            f"to replace them, or give another --out"
        )


def run_pipeline(
    inputs: list[tuple[int, str, str]],
    vocab_dir: str,
    out_dir: str,
    config: InstanceConfig,
    beam_args: list[str],
    *,
    force: bool = False,
    max_dead_letter_fraction: float = MAX_DEAD_LETTER_FRACTION,
) -> dict:
    """Run the pipeline and write manifest.json last. Returns the manifest.

    Before any work: the vocabulary loads, `out_dir` is ours (pipelines.outdir.claim) and holds no
    finished instances of other inputs or options (unless force). After the run: StageFailed, and no
    manifest, when the accounting does not balance or the outcome is not usable (check_outcome)."""
    from pipelines.core.manifest import read_manifest, write_manifest

    vocab_model = vocab_dir.rstrip("/") + "/spm.model" if not vocab_dir.endswith(".model") else vocab_dir
    if not storage.isfile(vocab_model):
        raise UserError(f"no spm.model in {vocab_dir}: train one with `albert vocab --out DIR`")
    Tokenizer.load(vocab_model)  # fail now, in the driver, on a damaged vocabulary or one without [CLS]...
    # A folder of a run from before the markers, that failed before its manifest, is still ours (the
    # flows cannot pass --force): the first file of every run has this name.
    outdir.claim(out_dir, "instances", force=force, legacy=("train-00000-00000-000.tfrecord",))
    described = describe_inputs(inputs)
    vocab_sha = storage.sha256(vocab_model)
    check_previous(out_dir, described, vocab_sha, config, force)
    storage.remove(storage.join(out_dir, "manifest.json"))  # this folder is incomplete until we finish
    for pattern in ("*.tfrecord", "skipped-*.jsonl.gz", "stats.json"):
        for stale in storage.glob(storage.join(out_dir, pattern)):
            storage.remove(stale)
    if not any(a.startswith("--runner") for a in beam_args):
        beam_args = ["--runner=DirectRunner", *beam_args]  # never Beam's default Prism (a download)
    options = PipelineOptions(beam_args)
    started = time.time()
    with beam.Pipeline(options=options) as p:
        _ = (
            p
            | "Inputs" >> beam.Create(inputs)
            | "CreateInstances" >> CreateInstances(vocab_model, out_dir, config)
        )
    elapsed = time.time() - started
    stats = storage.read_json(storage.join(out_dir, "stats.json"))
    files = storage.glob(storage.join(out_dir, "*.tfrecord"))
    paths = [path for _, _, path in inputs]
    source = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more files" if len(paths) > 3 else "")
    try:
        check_accounting(stats, files)
        check_outcome(stats, out_dir, max_dead_letter_fraction, source)
    except StageFailed:
        # No half output a reader could take for instances (a glob of *.tfrecord); stats.json and the
        # dead letter stay, to see why.
        for path in files:
            storage.remove(path)
        raise
    vocab_manifest = None
    try:
        vocab_manifest = read_manifest(storage.dirname(vocab_model))
    except UserError:
        pass
    return write_manifest(
        out_dir,
        "instances",
        inputs=described,
        vocab={
            "path": vocab_model,
            "sha256": vocab_sha,
            "manifest_code_version": (vocab_manifest or {}).get("code_version"),
        },
        config=asdict(config),
        seed=config.seed,
        beam_args=beam_args,
        seconds=round(elapsed, 2),
        summary=summarize(stats, config),
        counts=stats,
        outputs={storage.basename(p): storage.sha256(p) for p in files},
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--text",
        action="append",
        help="one sentence per line, blank line between documents (repeatable, globs)",
    )
    src.add_argument("--corpus", help="a corpus-stage folder (docs-*.jsonl.gz + manifest.json)")
    p.add_argument("--vocab", required=True, help="folder holding spm.model (from `albert vocab`)")
    p.add_argument("--out", required=True, help="output folder for *.tfrecord, stats.json, manifest.json")
    p.add_argument(
        "--force",
        action="store_true",
        help="write into --out even when it holds files `albert instances` did not write, or finished "
        "instances of other inputs or options (only the stage's own kinds of files are replaced)",
    )
    p.add_argument(
        "--max-dead-letter-fraction",
        type=float,
        default=MAX_DEAD_LETTER_FRACTION,
        help="fail when more of the documents read are dead letters (malformed, invalid UTF-8, no gold "
        "words; `empty` documents are skips, not dead letters) [%(default)s]",
    )
    d, m, k = InstanceConfig(), MaskingConfig(), PackingConfig()
    p.add_argument("--max-seq-length", type=int, default=k.max_seq_length)
    p.add_argument(
        "--max-predictions", type=int, default=m.max_predictions, help="P, masked positions per sequence"
    )
    p.add_argument("--masked-lm-prob", type=float, default=m.masked_lm_prob)
    p.add_argument("--short-seq-prob", type=float, default=k.short_seq_prob)
    p.add_argument(
        "--dupe-factor", type=int, default=d.dupe_factor, help="copies of every document with different masks"
    )
    p.add_argument(
        "--ngram", type=int, default=m.max_ngram, help="longest n-gram of whole words masked together"
    )
    p.add_argument(
        "--whole-word",
        choices=WHOLE_WORD_MODES,
        default=d.whole_word,
        help="word boundaries: zh = Chinese segmenter (rjieba), sp = SentencePiece, gold = the documents' own `words`, none = per token",
    )
    p.add_argument(
        "--eval-fraction", type=float, default=d.eval_fraction, help="documents held out (by id hash)"
    )
    p.add_argument(
        "--group-chars",
        type=int,
        default=d.group_chars,
        help="characters per packing group (memory per worker)",
    )
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--runner", default="DirectRunner", help="Beam runner; other Beam options pass through")


def beam_flags(runner: str, extra: list[str]) -> list[str]:
    """Flags for Beam: the DirectRunner in one process by default (`--direct_running_mode
    multi_processing --direct_num_workers N` spreads input files over N processes); a remote runner
    (Dataflow, Flink, Spark) gets the small worker wheel of `pipelines/` unless an image, setup file or
    package is given. Unknown flags are an error, not a silently different run."""
    from pipelines.corpus import stage

    if runner not in ("DirectRunner", "direct"):
        return stage.beam_flags(runner, extra)
    flags = [*extra, "--runner", runner]
    if not any(f.startswith("--direct_running_mode") for f in extra):
        flags += ["--direct_running_mode", "in_memory"]
    stage.check_beam_flags(flags)
    return flags


# The option of each configuration field, to name it in an error.
_OPTION_OF = {
    "max_seq_length": "--max-seq-length",
    "short_seq_prob": "--short-seq-prob",
    "masked_lm_prob": "--masked-lm-prob",
    "max_predictions": "--max-predictions",
    "max_ngram": "--ngram",
    "dupe_factor": "--dupe-factor",
    "eval_fraction": "--eval-fraction",
    "group_chars": "--group-chars",
    "whole_word": "--whole-word",
}


def config_from_args(args: argparse.Namespace) -> InstanceConfig:
    if args.max_predictions > args.max_seq_length:
        raise UserError("--max-predictions cannot exceed --max-seq-length")
    if not 0 <= args.max_dead_letter_fraction <= 1:
        raise UserError(f"--max-dead-letter-fraction must be in [0, 1], got {args.max_dead_letter_fraction}")
    try:
        return InstanceConfig(
            packing=PackingConfig(args.max_seq_length, args.short_seq_prob),
            masking=MaskingConfig(args.masked_lm_prob, args.max_predictions, args.ngram),
            whole_word=args.whole_word,
            dupe_factor=args.dupe_factor,
            seed=args.seed,
            eval_fraction=args.eval_fraction,
            group_chars=args.group_chars,
        )
    except ValueError as err:
        field = str(err).split(" ", 1)[0]  # "dupe_factor must be >= 1, got 0"
        option = _OPTION_OF.get(field)
        raise UserError(f"{option}: {err}" if option else str(err)) from None


def run(args: argparse.Namespace, beam_args: list[str] | None = None) -> int:
    beam_args = beam_flags(args.runner, list(getattr(args, "beam_args", None) or beam_args or []))
    config = config_from_args(args)
    inputs = resolve_inputs(args.text, args.corpus)
    manifest = run_pipeline(
        inputs,
        args.vocab,
        args.out,
        config,
        beam_args,
        force=args.force,
        max_dead_letter_fraction=args.max_dead_letter_fraction,
    )
    for split in ("train", "eval"):
        s = manifest["summary"].get(split)
        if not s:
            continue
        print(
            f"{split}: {s['documents']:,} documents -> {s['instances']:,} instances, {s['real_tokens']:,} real tokens, "
            f"fill {s['fill_rate']:.1%}, masked {s['masked_fraction']:.1%} ({s['masked_per_instance']} per instance), "
            f"SOP swapped {s['sop_swapped_fraction']:.1%}"
        )
    skipped = manifest["counts"].get("skipped", {})
    if skipped:
        print("skipped documents: " + ", ".join(f"{k}={v}" for k, v in sorted(skipped.items())))
    print(f"wrote {len(manifest['outputs'])} TFRecord files to {args.out} in {manifest['seconds']} s")
    return 0
