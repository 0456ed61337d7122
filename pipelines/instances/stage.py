"""Run the instance stage end to end: resolve the inputs, run the Beam pipeline, check the accounting,
then write manifest.json (inputs + hashes, options, vocab hash, counts, output hashes), last.

`run_instances` is what `albert instances` calls; `run_pipeline` is the same run for callers that
already hold the inputs and the InstanceConfig (tests, the benchmark).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from core import outdir, storage
from core.errors import StageFailed, UserError
from core.manifest import read_manifest, write_manifest
from core.peoples_daily import sample_path
from core.tokenizer import Tokenizer
from pipelines import beam_run, documents
from pipelines.instance_builder import InstanceConfig
from pipelines.instances.accounting import check_accounting, check_outcome, summarize
from pipelines.instances.options import MAX_DEAD_LETTER_FRACTION, InstancesOptions
from pipelines.instances.pipeline import CreateInstances

# What a run writes, removed when it fails: the instances, the dead letter, the stats, and the hidden
# temporary names of their writes (core.storage.write_bytes).
RUN_FILES = ("*.tfrecord", "skipped-*.jsonl.gz", "stats.json", ".*.tfrecord.tmp-*", ".stats.json.tmp-*")


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
        items = [("peoples-daily", sample_path())]
    return [(i, kind, path) for i, (kind, path) in enumerate(sorted(items, key=lambda x: x[1]))]


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


@outdir.scope()  # the lock of out_dir (outdir.claim) is held until the run ends
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

    Before any work: the vocabulary loads, `out_dir` is ours (core.outdir.claim) and holds no
    finished instances of other inputs or options (unless force). After the run: StageFailed, and no
    manifest, when the accounting does not balance or the outcome is not usable (check_outcome)."""
    vocab_model = vocab_dir.rstrip("/") + "/spm.model" if not vocab_dir.endswith(".model") else vocab_dir
    if not storage.isfile(vocab_model):
        raise UserError(f"no spm.model in {vocab_dir}: train one with `albert vocab --out DIR`")
    Tokenizer.load(vocab_model)  # fail now, in the driver, on a damaged vocabulary or one without [CLS]...
    # A folder of a run from before the markers, that failed before its manifest, is still ours (the
    # flows cannot pass --force): the first file of every run has this name.
    read = [("the input --vocab", vocab_dir), *(("the input file", path) for _, _, path in inputs)]
    outdir.claim(out_dir, "instances", force=force, legacy=("train-00000-00000-000.tfrecord",), inputs=read)
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
    # A run that fails (a full disk, SIGTERM, Ctrl-C, a bug) removes what it wrote first; an OS error
    # is raised as such (pipelines.beam_run).
    with beam_run.cleaned_on_failure(out_dir, RUN_FILES), beam.Pipeline(options=options) as p:
        _ = (
            p
            | "Inputs" >> beam.Create(inputs, reshuffle=False)  # CreateInstances spreads them
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


def beam_flags(runner: str, extra: list[str]) -> list[str]:
    """Flags for Beam: the DirectRunner in one process by default (`--direct_running_mode
    multi_processing --direct_num_workers N` spreads input files over N processes); any other runner,
    by short name or class path (pipelines.runners), as the corpus stage hands it over: checked for
    what it needs before any work, and a runner that runs elsewhere (Dataflow, Flink, Spark, a portable
    job server) gets the small worker wheel of `pipelines/` unless an image, setup file or package is
    given. Unknown flags are an error, not a silently different run."""
    from pipelines import runners
    from pipelines.corpus import stage

    if runners.resolve(runner).name != "DirectRunner":
        return stage.beam_flags(runner, extra)
    flags = [*extra, "--runner", "DirectRunner"]
    if not any(f.startswith("--direct_running_mode") for f in extra):
        flags += ["--direct_running_mode", "in_memory"]
    stage.check_beam_flags(flags)
    return flags


def run_instances(opts: InstancesOptions, beam_args: list[str] | None = None) -> dict:
    """`albert instances`: check the options and Beam flags (`beam_args`: options for Beam's
    PipelineOptions), run the stage into `opts.out`, print its summary. Returns the manifest."""
    flags = beam_flags(opts.runner, list(beam_args or []))
    config = opts.instance_config()
    inputs = resolve_inputs(opts.text, opts.corpus)
    manifest = run_pipeline(
        inputs,
        opts.vocab,
        opts.out,
        config,
        flags,
        force=opts.force,
        max_dead_letter_fraction=opts.max_dead_letter_fraction,
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
    cut = sum(
        manifest["counts"].get(s, {}).get("notes", {}).get("documents_split_at_cap", 0)
        for s in ("train", "eval")
    )
    if cut:
        print(f"documents longer than --group-chars {opts.group_chars:,}, cut into pieces: {cut:,}")
    skipped = manifest["counts"].get("skipped", {})
    if skipped:
        print("skipped documents: " + ", ".join(f"{k}={v}" for k, v in sorted(skipped.items())))
    print(f"wrote {len(manifest['outputs'])} TFRecord files to {opts.out} in {manifest['seconds']} s")
    note = eval_split_note(manifest["summary"], config.eval_fraction)
    if note:
        print(note, file=sys.stderr)
    return manifest


def eval_split_note(summary: dict, eval_fraction: float) -> str | None:
    """One line when --eval-fraction asked for an eval split and it came out empty (None otherwise).
    Not a failure: the training instances are complete, and `albert pretrain` then runs without eval.
    An empty train split is one (accounting.check_outcome)."""
    if eval_fraction <= 0:
        return None
    split = summary.get("eval", {})
    if split.get("instances", 0):
        return None
    documents = split.get("documents", 0)
    kept = summary["accounting"]["documents_kept"]
    why = (
        f"none of the {kept:,} document{'s' if kept != 1 else ''} fell to it (documents go to it by "
        f"a hash of their id)"
        if not documents
        else f"its {documents:,} documents made no instance"
    )
    return (
        f"warning: the eval split is empty at --eval-fraction {eval_fraction}: {why}; give more "
        f"documents or a larger --eval-fraction for one, or --eval-fraction 0 to build none"
    )
