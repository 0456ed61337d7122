"""Run the corpus stage end to end: plan, run the Beam pipeline, write stats.json and report.html, then
manifest.json.

`run_corpus` is what `albert corpus` calls; tests and the benchmark call it directly.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, _BeamArgumentParser

from core import outdir, storage
from core.errors import StageFailed, UserError
from core.manifest import MANIFEST, write_manifest
from pipelines import beam_run, malloc, runners
from pipelines.corpus.accounting import (
    accounting_problems,
    add_lost_ids,
    check_outcome,
    counts_from_summaries,
    lost_summary,
    stats_from_counts,
)
from pipelines.corpus.decontam import REASON, EvalIndex, build_index
from pipelines.corpus.eval_index import save_index
from pipelines.corpus.eval_sets import EvalSet, load_eval_sets
from pipelines.corpus.options import MAX_DEAD_LETTER_FRACTION, CorpusOptions
from pipelines.corpus.pipeline import SUMMARY, TMP_DIR, build_pipeline
from pipelines.corpus.readers.ranges import index_problem
from pipelines.corpus.report import REPORT, write_report
from pipelines.corpus.sources import input_files, plan_sources
from pipelines.corpus.text_cleaning import ChineseConverter

STATS = "stats.json"
EVAL_INDEX = "eval-index.npz"  # under TMP_DIR: the evaluation sets' index the workers read
# What a run writes, removed when it fails: temporaries, shards (whole, or a write's hidden temp name).
RUN_FILES = (TMP_DIR, "docs-*.jsonl.gz", "rejected-*.jsonl.gz", ".docs-*.tmp-*", ".rejected-*.tmp-*")

_log = logging.getLogger(__name__)
# Any of these says how workers get the code (an image, or packages): no worker wheel is built then.
# (--environment_config is an image only with --environment_type DOCKER: _image_given.)
_STAGING_FLAGS = ("--sdk_container_image", "--setup_file", "--extra_package", "--extra_packages")


# --- Beam options ---------------------------------------------------------------------------------------


def _flag_names(flags: list[str]) -> set[str]:
    return {f.split("=", 1)[0] for f in flags if f.startswith("--")}


def check_beam_flags(flags: list[str]) -> None:
    """Fail on flags that neither this command nor any Beam options class knows (Beam itself only
    logs and drops them, which turns a typo into a silently different run). The known runners'
    option classes are imported first (pipelines.runners)."""
    runners.import_option_classes()
    parser = _BeamArgumentParser(allow_abbrev=False)
    for cls in {str(c): c for c in PipelineOptions.__subclasses__()}.values():
        cls._add_argparse_args(parser)  # noqa: SLF001 -- the same parser Beam builds
    _, unknown = parser.parse_known_args(flags)
    if unknown:
        raise UserError(
            f"unknown option(s) {' '.join(unknown)} (not an `albert corpus` option nor a Beam option)"
        )


def beam_flags(runner: str, extra: list[str], staging_dir: str | None = None) -> list[str]:
    """The flags handed to Beam: the user's pass-through flags plus the runner and local defaults.

    `runner`: a short name or a class path (pipelines.runners.resolve); Beam gets its class name, or
    its path where Beam does not know it by name. Checked before anything is built (check_runner_flags).
    DirectRunner: multi_processing over all cores unless the user says otherwise. A runner that runs
    elsewhere gets the worker wheel (pipelines.corpus.staging) unless an image, setup file or package
    is given."""
    chosen = runners.resolve(runner)
    flags = list(extra)
    names = _flag_names(flags)
    flags += ["--runner", chosen.flag]
    if "--no_pipeline_type_check" not in names:
        # Beam's construction-time type inference disassembles every DoFn's bytecode: 5 of the
        # launcher's 12 CPU-s on the 16x scale corpus, for element types nothing here uses (the
        # coders of grouped keys are made deterministic at submission either way). Same output bytes.
        flags.append("--no_pipeline_type_check")
    if chosen.name == "DirectRunner":
        if "--direct_running_mode" not in names:
            flags += ["--direct_running_mode", "multi_processing"]
        if "--direct_num_workers" not in names:
            flags += ["--direct_num_workers", str(os.cpu_count() or 1)]
    check_runner_flags(runner, flags)  # before the wheel: a run that cannot start builds nothing
    if chosen.name == "DirectRunner":
        malloc.limit_arenas()  # this process and the workers it starts (pipelines/malloc.py)
    elif not chosen.local and not names & set(_STAGING_FLAGS) and not _image_given(flags):
        from pipelines.corpus.staging import build_worker_wheel

        wheel = build_worker_wheel(staging_dir or tempfile.mkdtemp(prefix="albert-worker-"))
        flags += ["--extra_package", wheel]
    return flags


def _image_given(flags: list[str]) -> bool:
    """--environment_config (or --environment_option docker_container_image=...) names the workers'
    image, which holds the code, only for DOCKER; for EXTERNAL it is a worker pool's address, for
    PROCESS a command: those workers need the wheel."""
    from apache_beam.options.pipeline_options import PortableOptions

    portable = PipelineOptions(flags).view_as(PortableOptions)
    image = portable.environment_config or portable.lookup_environment_option("docker_container_image")
    return bool(image) and (portable.environment_type or "DOCKER").upper() == "DOCKER"


def check_runner_flags(runner: str, flags: list[str]) -> None:
    """The runner exists and imports, Beam knows every flag, and the runner has what it needs before it
    can start (pipelines.runners.check_can_run: Beam checks these only at submission, after the inputs
    were hashed or the corpus built, or it downloads what is missing: fail at once instead)."""
    chosen = runners.resolve(runner)
    runners.load(chosen)  # its package first: its option classes may live in its module
    check_beam_flags([*flags, "--runner", chosen.flag])
    runners.check_can_run(chosen, flags)


def check_out_dir(runner: str, out_dir: str) -> None:
    """Workers write the spill files and shards, and read each other's: on Dataflow --out must be a
    bucket every worker sees, not a path on the launching machine."""
    if runners.resolve(runner).name == "DataflowRunner" and not storage.is_url(out_dir):
        raise UserError(
            f"--out {out_dir}: DataflowRunner workers cannot write to a path on this machine; "
            "give a bucket (--out gs://BUCKET/...)"
        )


# --- inputs, outputs -----------------------------------------------------------------------------------


def describe_inputs(items: list[dict]) -> list[dict]:
    """Inputs for the manifest: path, size and content hash (sha256 streamed for local files; the
    filesystem's own checksum, e.g. GCS md5/crc, for remote ones, to avoid downloading them), and
    the `identity` of the version hashed (core/storage/inputs.py), which the readers read and no
    other (pin_inputs)."""
    seen, out = set(), []
    for item in items:
        for path in input_files(item):
            if path in seen:
                continue
            seen.add(path)
            out.append({"kind": item["kind"], "path": path, **storage.fingerprint(path)})
    return out


def content_of(inputs: list[dict]) -> list[dict]:
    """The inputs as their content names them, without the identity of the version read: what the
    stage key and the up-to-date check compare (a copy or a touch of the same bytes is the same
    corpus; what was read is the manifest's record)."""
    return [{k: v for k, v in entry.items() if k != "identity"} for entry in inputs]


def pin_inputs(items: list[dict], inputs: list[dict]) -> list[dict]:
    """The work items, each with the identity of the version of its file (and index) that `inputs`
    hashed: the readers read that version or fail (core.storage.open_input)."""
    known = {entry["path"]: entry for entry in inputs if entry.get("identity")}
    pinned = []
    for item in items:
        item = dict(item)
        if item["path"] in known:
            item["identity"] = known[item["path"]]["identity"]
            item["size"] = known[item["path"]]["size"]
        if item.get("index") in known:
            item["index_identity"] = known[item["index"]]["identity"]
        pinned.append(item)
    return pinned


def usable_index(item: dict) -> dict:
    """The work item with its multistream index, or, when the index cannot be used (readers/ranges.py
    index_problem), without it and with a warning line: the dump is then read in one piece, by one
    worker, and what damage costs it is estimated from its bytes instead of named from the index."""
    if item["kind"] != "zhwiki" or not item.get("index"):
        return item
    problem = index_problem(item)
    if problem is None:
        return item
    print(
        f"warning: the multistream index {item['index']} is not used for {item['path']}: {problem}; "
        f"the dump is read in one piece, by one worker",
        file=sys.stderr,
    )
    return {**item, "index": None, "index_error": problem}


def _previous_outputs(out_dir: str) -> list[str]:
    patterns = ["docs-*.jsonl.gz", "rejected-*.jsonl.gz", STATS, REPORT, MANIFEST]
    return [p for pat in patterns for p, _ in storage.match(storage.join(out_dir, pat))]


# --- evaluation sets kept out -------------------------------------------------------------------------


def eval_sets(opts: CorpusOptions) -> list[EvalSet]:
    """The --decontaminate sets, normalized as the corpus is (its OpenCC setting)."""
    convert = ChineseConverter(opts.cleaning.opencc) if opts.cleaning.opencc != "off" else None
    return load_eval_sets(list(opts.curation.decontaminate), convert)


def eval_index(opts: CorpusOptions) -> EvalIndex | None:
    """decontam.build_index of the --decontaminate sets; None for none."""
    if not opts.curation.decontaminate:
        return None
    return build_index(eval_sets(opts), opts.curation.decontaminate_ngram)


def decontamination_stats(stats: dict, index: EvalIndex | None, opts: CorpusOptions) -> dict:
    """stats.json `decontamination`: the sets (manifest records), the mode, what was removed."""
    return {
        "sets": list(index.records) if index is not None else [],
        "mode": opts.curation.decontaminate_mode,
        "documents": stats["dropped"].get(REASON, 0),
        "sentences": stats["lines_removed"].get(REASON, 0),
    }


# --- the stage ---------------------------------------------------------------------------------------------


@outdir.scope()  # the lock of out_dir (outdir.claim) is held until the run ends
def run_corpus(
    sources: list[str],
    out_dir: str,
    opts: CorpusOptions | None = None,
    runner: str = "DirectRunner",
    extra_beam_flags: list[str] | None = None,
    force: bool = False,
    max_dead_letter_fraction: float = MAX_DEAD_LETTER_FRACTION,
    inputs: list[dict] | None = None,
    accept_cut_inputs: bool = False,
) -> dict:
    """Build the corpus in out_dir; returns the manifest. Skips the work when out_dir already holds a
    finished corpus of the same inputs and options (unless force).

    inputs: describe_inputs of these sources when the caller has them already (the corpus flow hashes
    the inputs for its key): a multi-GB dump is then read once per run, not twice.

    accept_cut_inputs: publish what a compressed input that ends early held (pipelines/corpus/
    input_checks.py); by default such a run fails, as one whose input could not be read does.

    `out_dir` must be ours (core.outdir.claim; force takes over a folder of other files). After
    the run, StageFailed and no manifest when the accounting does not balance or the outcome is not
    usable (check_outcome)."""
    opts = opts or CorpusOptions()
    if not sources:
        raise UserError("give at least one --source KIND:PATH")
    if not 0 <= max_dead_letter_fraction <= 1:
        raise UserError(f"--max-dead-letter-fraction must be in [0, 1], got {max_dead_letter_fraction}")
    check_out_dir(runner, out_dir)
    items = plan_sources(sources)
    flags = beam_flags(runner, extra_beam_flags or [])
    index = eval_index(opts)  # the evaluation sets, loaded and checked before any work
    outdir.claim(
        out_dir, "corpus", force=force, inputs=[("the input --source", item["path"]) for item in items]
    )
    inputs = describe_inputs(items) if inputs is None else inputs
    items = pin_inputs(items, inputs)
    config = {"sources": list(sources), "options": opts.to_dict()}
    if index is not None:  # their content hashes: another test file is another corpus
        config["decontamination"] = list(index.records)
    config = json.loads(json.dumps(config))  # as stored
    manifest_path = storage.join(out_dir, MANIFEST)
    if storage.exists(manifest_path) and not force:
        previous = storage.read_json(manifest_path)
        same_inputs = content_of(previous.get("inputs") or []) == content_of(inputs)
        if same_inputs and previous.get("config") == config:
            _log.info("%s is up to date (same inputs and options): nothing to do", out_dir)
            return previous
        raise UserError(
            f"--out {out_dir} holds a corpus of other inputs or options; pass --force to replace it, "
            f"or give another --out"
        )
    items = [usable_index(item) for item in items]  # before any work: a warning, then the reading
    for path in _previous_outputs(out_dir) + [storage.join(out_dir, TMP_DIR)]:
        storage.remove(path, recursive=True)

    started = time.time()
    # A run that fails (a full disk, SIGTERM, Ctrl-C, a bug) removes its temporaries and partial
    # shards first; an OS error is raised as such (pipelines.beam_run).
    with beam_run.cleaned_on_failure(out_dir, RUN_FILES):
        index_file = None
        if index is not None:  # the workers read it from the run's temporary folder
            index_file = save_index(index, storage.join(out_dir, TMP_DIR, EVAL_INDEX))
        with beam.Pipeline(options=PipelineOptions(flags)) as p:
            build_pipeline(p, items, out_dir, opts, index_file)
        # The shards' summaries and the stage's counts, as the pipeline wrote them (pipeline.py): never
        # the runner's metrics (Beam counters), which some runners lack and some count twice.
        summary = storage.read_json(storage.join(out_dir, TMP_DIR, SUMMARY))
    storage.remove(storage.join(out_dir, TMP_DIR), recursive=True)  # nothing below reads it
    seconds = time.time() - started

    summaries = summary["shards"]
    stats = stats_from_counts(summary["counts"])
    add_lost_ids(stats, summaries)
    stats["pii_mode"] = opts.curation.pii
    stats["decontamination"] = decontamination_stats(stats, index, opts)
    written = counts_from_summaries(summaries)
    # stats.json holds only what the inputs determine (its hash keys the downstream stages); the
    # run time goes to the manifest.
    storage.write_json(storage.join(out_dir, STATS), stats)
    # report.html for people, also when the checks below fail (it shows why). Its title names the
    # sources, not out_dir: the same inputs give the same bytes in any folder.
    write_report(out_dir, stats, "Corpus report: " + ", ".join(sources))
    # The counts and the files written must tell the same story, and nothing may go missing.
    problems = accounting_problems(stats, written)
    try:
        if problems:
            raise StageFailed("corpus accounting failed, no manifest written: " + "; ".join(problems))
        check_outcome(stats, out_dir, max_dead_letter_fraction, accept_cut_inputs)
    except StageFailed:
        # No half corpus a reader could take for one (a glob of docs-*); stats.json and the rejected
        # shards stay, to see why.
        for path in storage.glob(storage.join(out_dir, "docs-*.jsonl.gz")):
            storage.remove(path)
        raise
    return write_manifest(
        out_dir,
        "corpus",
        inputs=inputs,
        config=config,
        seed=opts.dedup.minhash_seed,
        runner={"runner": runner, "flags": [f for f in flags if not f.startswith("--extra_package")]},
        seconds=round(seconds, 3),
        counts={
            "read": stats["read"],
            "kept": stats["kept"],
            "dropped": stats["dropped_total"],
            "dead_letter": stats["dead_letter_total"],
            "lost": lost_summary(stats),
        },
        outputs=[{k: s[k] for k in ("file", "records", "bytes", "sha256")} for s in summaries]
        + [{"file": name, "sha256": storage.sha256(storage.join(out_dir, name))} for name in (STATS, REPORT)],
    )
