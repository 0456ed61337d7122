"""`albert corpus`: raw sources -> the document corpus that `albert vocab` and `albert instances` read.

    albert corpus --source zhwiki:dumps/zhwiki-*-pages-articles-multistream.xml.bz2 \\
                  --source news2016zh:data/news2016zh_train.json --source peoples-daily: \\
                  --out out/corpus/v1 [--min-chars 50 ...] [Beam options]

Options this command does not know are handed to Beam's PipelineOptions, so the same command runs on
Dataflow: `--runner DataflowRunner --project P --region R --temp_location gs://B/tmp
[--sdk_container_image IMAGE | --setup_file ./pyproject.toml]` (see infra/dataflow/README.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import types

from pipelines.corpus.options import MAX_DEAD_LETTER_FRACTION, OPENCC_CONFIGS, CorpusOptions
from pipelines.corpus.sources import SOURCE_KINDS

_HELP = {
    "opencc": "traditional -> simplified conversion: t2s, tw2sp, hk2s or off",
    "min_chars": "drop documents with fewer characters (too_short)",
    "max_chars": "drop documents with more characters (too_long)",
    "min_cjk_ratio": "drop documents whose share of CJK ideographs is lower (low_cjk_ratio)",
    "min_terminal_ratio": "drop documents with less text in lines ending in 。！？… (no_terminal_punct)",
    "max_dup_line_ratio": "Gopher: max share of duplicated lines in a document",
    "max_dup_line_char_ratio": "Gopher: max share of characters in duplicated lines",
    "line_min_chars": "shorter lines are never counted as repeated across documents",
    "boilerplate_min_docs": "a line in this many documents is boilerplate (removed everywhere)",
    "shingle_chars": "MinHash character shingle size (Chinese)",
    "shingle_words": "MinHash word shingle size (space-separated text)",
    "minhash_bands": "LSH bands (bands x rows permutations)",
    "minhash_rows": "LSH rows per band",
    "near_dup_threshold": "estimated Jaccard at which candidates are merged",
    "max_sentence_chars": "longer sentences are split at commas, then hard-cut",
    "shards": "number of docs shards (0: one per --shard-chars characters)",
    "shard_chars": "target characters per docs shard",
    "max_record_bytes": "larger raw records are dead-lettered without being read into memory",
    "wiki_streams_per_range": "zhwiki multistream: bz2 streams per parallel work item",
    "jsonl_range_bytes": "JSON-lines files are split into byte ranges of this size",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="KIND:PATH",
        help=f"input, repeatable; KIND one of {', '.join(SOURCE_KINDS)}; PATH a file, glob or URL "
        "(gs://...), .gz/.bz2 read transparently; `peoples-daily:` is the bundled sample",
    )
    parser.add_argument("--out", required=True, help="output folder (local or gs://...)")
    parser.add_argument("--runner", default="DirectRunner", help="Beam runner (default DirectRunner)")
    parser.add_argument(
        "--force",
        action="store_true",
        help="write into --out even when it holds files `albert corpus` did not write, or a finished "
        "corpus of other inputs or options (only the stage's own kinds of files are replaced)",
    )
    parser.add_argument(
        "--max-dead-letter-fraction",
        type=float,
        default=MAX_DEAD_LETTER_FRACTION,
        help="fail when more of the records read go to the dead letter (unreadable, malformed, "
        f"processing errors) [{MAX_DEAD_LETTER_FRACTION}]",
    )
    group = parser.add_argument_group("cleaning, dedup and output options (defaults in brackets)")
    for f in dataclasses.fields(CorpusOptions):
        if f.name not in _HELP:
            continue
        flag = "--" + f.name.replace("_", "-")
        kwargs = {"type": type(f.default), "default": f.default, "help": f"{_HELP[f.name]} [{f.default}]"}
        if f.name == "opencc":
            kwargs["choices"] = OPENCC_CONFIGS
        group.add_argument(flag, dest=f.name, **kwargs)
    parser.allow_abbrev = False  # `--pro` must not silently match one of ours: it may be Beam's
    parser.epilog = "Any other --option is passed to Beam's PipelineOptions (e.g. --direct_num_workers 4)."

    # flows/cli.py calls parser.parse_args(); unknown options must reach Beam instead of failing.
    def parse_args(self, args=None, namespace=None):
        ns, rest = self.parse_known_args(args, namespace)
        if rest and not rest[0].startswith("-"):
            self.error(f"unexpected argument {rest[0]!r}")
        ns.beam_args = rest
        return ns

    parser.parse_args = types.MethodType(parse_args, parser)


def options_from_args(args: argparse.Namespace) -> CorpusOptions:
    return CorpusOptions(**{name: getattr(args, name) for name in _HELP if hasattr(args, name)})


def run(args: argparse.Namespace) -> int:
    from pipelines.corpus.stage import run_corpus

    manifest = run_corpus(
        args.source,
        args.out,
        options_from_args(args),
        runner=args.runner,
        extra_beam_flags=getattr(args, "beam_args", []),
        force=args.force,
        max_dead_letter_fraction=args.max_dead_letter_fraction,
    )
    print(json.dumps({"out": args.out, **manifest["counts"]}, ensure_ascii=False))
    return 0
