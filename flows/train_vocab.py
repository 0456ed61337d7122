"""Flow `train-vocab`: a corpus folder -> `<storage_root>/vocab/<key>/` (pipelines.vocab: spm.model,
spm.vocab, manifest.json). `albert vocab` is the same stage without Prefect.

    python -m flows.train_vocab CORPUS_DIR
"""

from __future__ import annotations

from prefect.artifacts import create_table_artifact

from core import storage
from core.figures import sig
from flows.keys import output_hashes, stage_key
from flows.prefect_run import stage_flow, stage_task
from flows.stage import DEFAULT_ROOT, run_stage, stage_dir
from pipelines.vocab import VocabConfig, VocabOptions, run_vocab, size_reasons


@stage_task("vocab-stage", backoff_factor=10)
def run_vocab_stage(corpus_dir: str, out_dir: str, config: VocabConfig) -> None:
    run_vocab(VocabOptions(corpus=corpus_dir, out=out_dir, config=config))


def vocab_stats_rows(manifest: dict, corpus_documents: int | None) -> list[dict]:
    """The vocab-stats table of a vocabulary's manifest: the size asked and built, what the pieces
    are, what they were trained on. Two columns, numbers only in `value` (core.figures.sig)."""
    config, counts = manifest["config"], manifest["counts"]
    rows = [
        ("vocabulary size asked", config["vocab_size"]),
        ("pieces built", counts["vocab_size"]),
        ("single CJK characters and punctuation (split_cjk)", counts.get("atomic_single_char_pieces")),
        ("repeated pieces dropped ('11' beside '1')", counts.get("repeated_pieces_dropped")),
        ("character coverage", config.get("character_coverage")),
        ("corpus documents", corpus_documents),
        ("corpus sentences", counts.get("sentences_seen")),
        ("sentences trained on (sampled)", counts.get("sentences_sampled")),
    ]
    return [{"figure": name, "value": sig(value)} for name, value in rows]


def vocab_stats_artifact(manifest: dict, vocab_dir: str, corpus_dir: str) -> list[dict]:
    """The vocab-stats table artifact; its description says why fewer pieces were built than asked."""
    corpus = storage.join(corpus_dir, "manifest.json")
    documents = (
        (storage.read_json(corpus).get("counts") or {}).get("kept") if storage.exists(corpus) else None
    )
    rows = vocab_stats_rows(manifest, documents)
    asked, built = manifest["config"]["vocab_size"], manifest["counts"]["vocab_size"]
    why = size_reasons(manifest["counts"], asked)
    size = f"Asked {sig(asked)} pieces, built {sig(built)}" + (": " + "; ".join(why) if why else "")
    create_table_artifact(
        table=rows,
        key="vocab-stats",
        description=(
            f"SentencePiece unigram vocabulary. {size}. The size asked is a ceiling (SentencePiece's "
            f"`hard_vocab_limit` is off); the model takes its size from `spm.model`.\n\n"
            f"Vocabulary folder: `{vocab_dir}`  \nCorpus folder: `{corpus_dir}`"
        ),
    )
    return rows


@stage_flow("train-vocab")
def train_vocab(
    corpus_dir: str,
    storage_root: str = DEFAULT_ROOT,
    vocab_size: int = 8000,
    split_cjk: bool = True,
    sample_sentences: int = 2_000_000,
    seed: int = 12345,
    timeout_minutes: float = 6 * 60,
) -> dict:
    """Train (or reuse) the SentencePiece vocabulary of a finished corpus folder.

    Args:
        corpus_dir: a corpus folder of the corpus stage (build_corpus's "dir").
        storage_root: folder or gs:// URL under which the stage writes vocab/<key>/.
        vocab_size: target number of pieces, a ceiling: a small corpus may yield fewer.
        split_cjk: every frequent Chinese character is its own piece, and SentencePiece learns
            multi-character pieces on top.
        sample_sentences: training sentences sampled from the corpus.
        seed: of the sentence sample.
        timeout_minutes: the stage fails after this long.

    Returns:
        {"dir", "key", "reused", "counts"}.
    """
    options = {
        "vocab_size": vocab_size,
        "split_cjk": split_cjk,
        "sample_sentences": sample_sentences,
        "seed": seed,
    }
    key = stage_key("vocab", corpus=output_hashes(corpus_dir), options=options)
    config = VocabConfig(**options)
    task = run_vocab_stage.with_options(timeout_seconds=timeout_minutes * 60)
    done = run_stage(
        "vocab", stage_dir(storage_root, "vocab", key), lambda out: task(corpus_dir, out, config)
    )
    vocab_stats_artifact(done.manifest, done.dir, corpus_dir)
    return done.result(counts=done.manifest["counts"])


if __name__ == "__main__":
    import sys

    print(train_vocab(corpus_dir=sys.argv[1]))
