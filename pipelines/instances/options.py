"""Options of the instance stage: `InstancesOptions`, from which `albert instances` generates its
argparse (core.config_cli), and the InstanceConfig (what the instances hold) they describe.

The defaults of the instance options are those of InstanceConfig, MaskingConfig and PackingConfig,
where each value is explained; the flags keep the names they have always had (`--ngram` sets
`max_ngram`).
"""

from __future__ import annotations

from dataclasses import dataclass

from core.config_cli import opt
from core.errors import UserError
from core.tokenizer import WHOLE_WORD_MODES
from pipelines.instance_builder import InstanceConfig
from pipelines.masking import MaskingConfig
from pipelines.packing import PackingConfig

MAX_DEAD_LETTER_FRACTION = 0.01
_INSTANCE, _MASKING, _PACKING = InstanceConfig(), MaskingConfig(), PackingConfig()


@dataclass(kw_only=True)
class InstancesOptions:
    """`albert instances`: inputs, vocabulary, output folder, how to run, and the instance options.
    Options marked run=True decide how the stage runs or whether its output is published, never
    what the instances hold."""

    text: list[str] = opt(
        help="one sentence per line, blank line between documents (repeatable, globs)",
        repeat=True,
        exclusive="input",
    )
    corpus: str | None = opt(
        None, "a corpus-stage folder (docs-*.jsonl.gz + manifest.json)", exclusive="input"
    )
    vocab: str = opt(help="folder holding spm.model (from `albert vocab`)")
    out: str = opt(help="output folder for *.tfrecord, stats.json, manifest.json")
    force: bool = opt(
        False,
        "write into --out even when it holds files `albert instances` did not write, or finished "
        "instances of other inputs or options (only the stage's own kinds of files are replaced)",
        run=True,
    )
    max_dead_letter_fraction: float = opt(
        MAX_DEAD_LETTER_FRACTION,
        "fail when more of the documents read are dead letters (malformed, invalid UTF-8, no gold "
        "words; `empty` documents are skips, not dead letters) [%(default)s]",
        run=True,
    )
    max_seq_length: int = opt(_PACKING.max_seq_length, "")
    max_predictions: int = opt(_MASKING.max_predictions, "P, masked positions per sequence")
    masked_lm_prob: float = opt(_MASKING.masked_lm_prob, "")
    short_seq_prob: float = opt(_PACKING.short_seq_prob, "")
    dupe_factor: int = opt(_INSTANCE.dupe_factor, "copies of every document with different masks")
    ngram: int = opt(_MASKING.max_ngram, "longest n-gram of whole words masked together")
    whole_word: str = opt(
        _INSTANCE.whole_word,
        "word boundaries: zh = Chinese segmenter (rjieba), sp = SentencePiece, gold = the documents' "
        "own `words`, none = per token",
        choices=WHOLE_WORD_MODES,
    )
    eval_fraction: float = opt(_INSTANCE.eval_fraction, "documents held out (by id hash)")
    group_chars: int = opt(
        _INSTANCE.group_chars,
        "characters per packing group (memory per worker); longer documents are cut into pieces",
    )
    seed: int = opt(_INSTANCE.seed, "")
    runner: str = opt(
        "DirectRunner",
        "Beam runner: a short name (DirectRunner, DataflowRunner, flink, DaskRunner, ...) or a class path; "
        "other Beam options pass through",
        run=True,
    )

    def instance_config(self) -> InstanceConfig:
        """The InstanceConfig these options describe; UserError naming the option of a bad value."""
        if self.max_predictions > self.max_seq_length:
            raise UserError("--max-predictions cannot exceed --max-seq-length")
        if not 0 <= self.max_dead_letter_fraction <= 1:
            raise UserError(
                f"--max-dead-letter-fraction must be in [0, 1], got {self.max_dead_letter_fraction}"
            )
        try:
            return InstanceConfig(
                packing=PackingConfig(self.max_seq_length, self.short_seq_prob),
                masking=MaskingConfig(self.masked_lm_prob, self.max_predictions, self.ngram),
                whole_word=self.whole_word,
                dupe_factor=self.dupe_factor,
                seed=self.seed,
                eval_fraction=self.eval_fraction,
                group_chars=self.group_chars,
            )
        except ValueError as err:
            field = str(err).split(" ", 1)[0]  # "dupe_factor must be >= 1, got 0"
            option = _OPTION_OF.get(field)
            raise UserError(f"{option}: {err}" if option else str(err)) from None


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
