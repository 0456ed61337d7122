"""Flow `build-instances`: corpus + vocab -> `<storage_root>/instances/<key>/` (pipelines.instances:
ALBERT pretraining TFRecords, train and eval splits, stats).

Defaults suit the bundled sample on a laptop (128-token sequences); the scheduled deployment in
infra/prefect.yaml sets ALBERT's values (512 tokens, 77 predictions, dupe factor 10). Beam options
(`--runner DataflowRunner --project ...`) go in beam_args, as for build-corpus.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect.artifacts import create_table_artifact

from core import storage
from core.figures import sig
from flows.keys import output_hashes, stage_key
from flows.params import Runner, WholeWord
from flows.prefect_run import stage_flow, stage_task
from flows.stage import DEFAULT_ROOT, run_stage, stage_dir
from flows.stage_options import stage_options_and_rest

if TYPE_CHECKING:
    from pipelines.instances import InstancesOptions


@stage_task("instances-stage", backoff_factor=30)
def run_instances_stage(opts: InstancesOptions, beam_args: list[str]) -> None:
    from pipelines.instances import run_instances  # Beam: imported when the stage runs

    run_instances(opts, beam_args)


def instance_stats_rows(summary: dict) -> list[dict]:
    """The instance-stats table of a manifest's summary: one row per split, numbers only (core.figures.sig),
    six short columns. SOP swapped: the share of pairs whose segments were swapped (0.5 = balanced)."""
    rows = []
    for split in ("train", "eval"):
        figures = summary.get(split)
        if figures:
            rows.append(
                {
                    "split": split,
                    "documents": sig(figures["documents"]),
                    "instances": sig(figures["instances"]),
                    "fill rate": sig(figures["fill_rate"]),
                    "masked share": sig(figures["masked_fraction"]),
                    "SOP swapped": sig(figures["sop_swapped_fraction"]),
                }
            )
    return rows


def instance_stats_artifact(manifest: dict, instances_dir: str) -> list[dict]:
    summary = manifest["summary"]
    rows = instance_stats_rows(summary)
    masked = ", ".join(
        f"{split} {sig(summary[split]['masked_per_instance'])}"
        for split in ("train", "eval")
        if summary.get(split)
    )
    accounting = summary.get("accounting", {})
    create_table_artifact(
        table=rows,
        key="instance-stats",
        description=(
            "Fill rate (real tokens per position), masked share of the real tokens and SOP balance "
            f"(swapped share, 0.5 = balanced) per split. Masked tokens per instance: {masked}. Corpus "
            f"documents read {sig(accounting.get('documents_read'))} = kept (train + eval) "
            f"{sig(accounting.get('documents_kept'))} + skipped {sig(accounting.get('documents_skipped'))}."
            f"\n\nInstances folder: `{instances_dir}`"
        ),
    )
    return rows


@stage_flow("build-instances")
def build_instances(
    corpus_dir: str,
    vocab_dir: str,
    storage_root: str = DEFAULT_ROOT,
    max_seq_length: int = 128,
    max_predictions: int = 20,
    masked_lm_prob: float = 0.15,
    dupe_factor: int = 1,
    ngram: int = 3,
    whole_word: WholeWord = "zh",
    eval_fraction: float = 0.05,
    seed: int = 12345,
    runner: Runner = "DirectRunner",
    beam_args: list[str] = [],  # noqa: B006 - Prefect parameters are copied per run
    timeout_minutes: float = 24 * 60,
    max_dead_letter_fraction: float = 0.01,
) -> dict:
    """Build (or reuse) the pretraining instances (SOP pairs with MLM masks, TFRecords).

    Args:
        corpus_dir: a corpus folder of the corpus stage (build_corpus's "dir").
        vocab_dir: a folder holding spm.model (train_vocab's "dir", or a registry version).
        storage_root: folder or gs:// URL under which the stage writes instances/<key>/.
        max_seq_length: tokens per sequence.
        max_predictions: masked positions per sequence, at most.
        masked_lm_prob: share of the tokens masked.
        dupe_factor: copies of every document, each with other masks.
        ngram: longest n-gram of whole words masked together.
        whole_word: word boundaries for masking: zh = Chinese segmenter, sp = SentencePiece pieces,
            gold = the documents' own words, none = per token.
        eval_fraction: share of the documents held out for evaluation (by id hash).
        seed: of masking and pairing.
        runner: the Beam runner.
        beam_args: more Beam options for the runner; instance options given here go over these
            parameters.
        timeout_minutes: the stage fails after this long.
        max_dead_letter_fraction: the stage fails past this share of malformed documents; it decides
            whether the instances are published, not what they hold (not part of the key).

    Returns:
        {"dir", "key", "reused", "summary"}.
    """
    options = {
        "max_seq_length": max_seq_length,
        "max_predictions": max_predictions,
        "masked_lm_prob": masked_lm_prob,
        "dupe_factor": dupe_factor,
        "ngram": ngram,
        "whole_word": whole_word,
        "eval_fraction": eval_fraction,
        "seed": seed,
    }
    vocab_hash = storage.sha256(storage.join(vocab_dir, "spm.model"))  # a vocab folder or a registry version
    key = stage_key("instances", corpus=output_hashes(corpus_dir), vocab=vocab_hash, options=options)
    out = stage_dir(storage_root, "instances", key)
    task = run_instances_stage.with_options(timeout_seconds=timeout_minutes * 60)

    def build(out: str) -> None:
        from pipelines.instances import InstancesOptions

        # beam_args as `albert instances` reads them: Beam's options, and instance options over the flow's.
        opts, rest = stage_options_and_rest(
            "instances",
            InstancesOptions,
            beam_args,
            corpus=corpus_dir,
            vocab=vocab_dir,
            out=out,
            runner=runner,
            max_dead_letter_fraction=max_dead_letter_fraction,
            **options,
        )
        task(opts, rest)

    done = run_stage("instances", out, build)
    instance_stats_artifact(done.manifest, done.dir)
    return done.result(summary=done.manifest["summary"])


if __name__ == "__main__":
    import sys

    print(build_instances(corpus_dir=sys.argv[1], vocab_dir=sys.argv[2]))
