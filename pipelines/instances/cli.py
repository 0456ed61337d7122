"""`albert instances`: documents (a corpus folder, text files, or the bundled sample) -> ALBERT
pretraining TFRecords.

    albert instances --corpus out/corpus/v1 --vocab out/vocab --out out/instances \\
                     [--max-seq-length 512 --max-predictions 77 ...] [Beam options]

Options this command does not know are handed to Beam's PipelineOptions (`--runner DataflowRunner
--project P ...`, `--direct_running_mode multi_processing --direct_num_workers N`).
"""

from __future__ import annotations

import argparse

from core.config_cli import add_arguments as add_options
from core.config_cli import from_args
from pipelines.instances.options import InstancesOptions
from pipelines.instances.stage import run_instances

PASSES_BEAM_ARGS = True  # unknown CLI options go to Beam's PipelineOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, InstancesOptions)


def run(args: argparse.Namespace) -> int:
    run_instances(from_args(InstancesOptions, args), getattr(args, "beam_args", None))
    return 0
