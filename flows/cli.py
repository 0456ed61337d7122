"""`albert`: one entry point whose subcommands mirror the stages (docs/architecture.md).

Each subcommand lives in the module that owns its stage and exposes two functions:

    add_arguments(parser: argparse.ArgumentParser) -> None
    run(args: argparse.Namespace) -> int | None

A module that sets `PASSES_BEAM_ARGS = True` receives the options it does not define in
`args.beam_args`, for Beam's PipelineOptions (--runner, --direct_num_workers, --project, ...).

Modules are imported only when their subcommand runs, so `albert vocab` never pays for torch or
Prefect, and a missing optional dependency only affects the command that needs it.
Bad arguments and expected failures (`UserError`) print one line, never a traceback; so does an OS
error met during the work (a full disk, a read-only file system: core.oserrors), also when
a library hands it on wrapped in another exception, and a request to an object store that failed
for good (`StorageFailed`: after the retries of --storage-retries, core/storage/policy.py). SIGTERM (how Prefect cancels a run and how
Kubernetes or a spot VM stops one) raises `Interrupted` in the main thread, so that the command's
clean-up runs; it prints one line and exits 143 (130 for Ctrl-C). A command that can keep its work
(`albert pretrain`) installs its own handlers while it trains.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import importlib
import signal
import sys
import threading

from core import address_space, lock, oserrors
from core.errors import Interrupted, StageFailed, StorageFailed, UserError
from core.storage import policy

# name -> (module, one-line help). Keep in the order of the pipeline.
COMMANDS: dict[str, tuple[str, str]] = {
    "corpus": (
        "pipelines.corpus.cli",
        "Beam pipeline: raw sources -> cleaned, deduplicated, segmented documents",
    ),
    "vocab": ("pipelines.vocab", "train a SentencePiece vocabulary with ALBERT's conventions"),
    "tokenize": ("pipelines.tokenize_text", "stdin lines -> the ids (or pieces) training gives them"),
    "instances": ("pipelines.instances.cli", "Beam pipeline: documents -> 512-token SOP + MLM TFRecords"),
    "pretrain": ("model.pretrain_command", "train ALBERT (MLM + SOP) on instances; rerun to resume"),
    "launch": ("model.launch", "this node's part of a pretraining job of N nodes (torchrun, elastic)"),
    "evaluate": ("model.evaluate", "held-out MLM/SOP accuracy of a checkpoint next to baselines"),
    "ner-data": ("model.ner_data", "People's Daily named entities (PER/LOC/ORG, BIO) -> train/dev/test"),
    "finetune": ("model.finetune", "sentence (pair) classification: pretrained vs from scratch"),
    "export": ("model.export_command", "checkpoint folder -> transformers (hf) or original TF checkpoint"),
    "import": ("model.import_command", "original TF checkpoint + albert_config.json -> checkpoint folder"),
    "bench": ("benchmarks.cli", "throughput benchmarks, side by side with references"),
    "promote": ("flows.promote", "gate a candidate against production in the registry; --rollback"),
    "demo": ("flows.demo", "the whole chain on the bundled sample, through Prefect, on CPU"),
    "ui": ("flows.ui", "the Prefect UI on a demo's runs (its database in <out>/prefect-home)"),
    "deploy": ("flows.deploy", "register the Prefect deployments and work pools of infra/prefect.yaml"),
    "serve": ("flows.deploy", "run the local deployments with prefect serve (trigger them from the UI)"),
    "rehearse": (
        "flows.rehearsal.rehearse",
        "the weekly production run, here: GCS emulator, Prefect server, Beam and torchrun stand-ins",
    ),
}


def _usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: albert COMMAND [options]    (albert COMMAND --help for a command's options)", ""]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def command_module(name: str):
    """The module that implements `albert NAME` (imported on first use: see above)."""
    return importlib.import_module(COMMANDS[name][0])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"albert: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    _stacks_on_sigusr1()
    try:
        address_space.check(name)  # before its modules load: under `ulimit -v` they may die loading
    except UserError as err:
        print(f"albert {name}: error: {err}", file=sys.stderr)
        return 2
    module = command_module(name)
    parser = argparse.ArgumentParser(prog=f"albert {name}", description=COMMANDS[name][1])
    module.add_arguments(parser)
    policy.add_arguments(parser)  # every command may read or write a bucket
    if getattr(module, "PASSES_BEAM_ARGS", False):
        # Options this command does not know are Beam's (--runner, --direct_num_workers, --project, ...).
        args, args.beam_args = parser.parse_known_args(rest)
    else:
        args = parser.parse_args(rest)  # argparse prints a one-line error and exits 2 on bad arguments
    try:
        policy.configure_from_args(args)
        with _sigterm_raises(), lock.scope():  # the folders a command locks stay locked until it ends
            code = module.run(args)
    except Interrupted as err:
        print(f"albert {name}: interrupted: {err}", file=sys.stderr)
        return err.exit_code
    except (StageFailed, StorageFailed) as err:
        print(f"albert {name}: failed: {err}", file=sys.stderr)
        return 1
    except UserError as err:
        print(f"albert {name}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"albert {name}: interrupted: stopped by Ctrl-C (SIGINT)", file=sys.stderr)
        return 130
    except Exception as err:
        # A full disk, a read-only file system, ... met during the work: an OSError, or one that a
        # library wrapped (Beam, safetensors: oserrors.find). Anything else is a bug: its traceback.
        found = oserrors.find(err)
        if found is None:
            line = address_space.out_of_memory(name, err)  # a MemoryError, or Beam's text of one
            if line is None:
                raise
            print(f"albert {name}: failed: {line}", file=sys.stderr)
            return 1
        where = found.filename or getattr(args, "out", None)  # a failed write names no file
        print(f"albert {name}: failed: {oserrors.describe(found, where)}", file=sys.stderr)
        return 1
    return int(code or 0)


def _stacks_on_sigusr1() -> None:
    """`kill -USR1 PID` makes a running command print every thread's stack to stderr and go on: where
    a command that seems stuck is (a read never answered, a loader worker waiting), with no debugger.
    The handler is faulthandler's, in C: it answers even when the interpreter is blocked, and processes
    forked from this one (loader workers) keep it."""
    if threading.current_thread() is threading.main_thread():
        faulthandler.register(signal.SIGUSR1, file=2, all_threads=True)  # fd 2: sys.stderr may be a capture


def _raise_interrupted(signum, frame):
    raise Interrupted(signum, f"stopped by {signal.Signals(signum).name}")


@contextlib.contextmanager
def _sigterm_raises():
    """SIGTERM raises Interrupted in the main thread while a command runs (Python's default is to die
    at once: no clean-up, no message). Outside the main thread, where Python cannot set handlers, it is
    left as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
