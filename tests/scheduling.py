"""How `pytest -n N` (pytest-xdist) shares the tests among its workers: a file is a unit of work, sent
whole to one worker, so that a module's fixtures are built once; the three files that read the flows'
shared `chain` (one whole re-pretraining, session scope) are one unit, so that it is built once. The
units expected longest (measured seconds, SECONDS) are handed out first, so that no worker is left with
a long one at the end while the other waits.

pytest-xdist's own `--dist loadgroup` cannot do this with pytest 9: it names a group by appending
"@group" to `item._nodeid`, which pytest 9 no longer reads (a node's id is `item._id`), so every test
went its own way and a file's module fixtures were built on both workers. A scheduler of our own, built
on xdist's LoadScopeScheduling through its `pytest_xdist_make_scheduler` hook, says what a unit is by
its `_split_scope`, which reads only the test's id."""

from __future__ import annotations

import pytest

CHAIN = "flows-chain"
CHAIN_FILES = ("tests/flows/test_flows.py", "tests/flows/test_artifacts.py", "tests/flows/test_run_view.py")
# Seconds a unit took on 2 cores with 2 workers (pytest --durations, junit times: setup, call and
# teardown), as (default tier, slow tier). A unit is handed out by its expected length: the measured
# seconds of the tiers it has tests in this run, or, unmeasured, SECONDS_PER_TEST a test. Longest
# first, so that no worker is left with a long unit at the end while the other waits. Remeasure when
# a unit changes much: `make durations` runs both tiers and prints this table.
SECONDS: dict[str, tuple[float, float]] = {
    "tests/flows/test_rehearse.py": (21, 640),  # the production rehearsal (10.6 min alone)
    "tests/flows/test_demo.py": (20, 300),  # the demo twice, locally
    "tests/flows/test_demo_gcs.py": (0, 260),  # the demo twice on the GCS emulator
    "tests/flows/test_ui_browser.py": (0, 318),  # a server, two tiny chains, a browser
    "tests/faults/test_trust_faults_cli.py": (21, 231),
    "tests/benchmarks/test_corpus.py": (1, 85),
    CHAIN: (156, 0),
    "tests/flows/test_prefect_cli.py": (0, 105),  # one check since two (9 passed in 105 s)
    "tests/flows/test_api_outage.py": (35, 205),  # two server starts and a 75 s outage
    "tests/model/test_pretrain_stops.py": (60, 54),
    "tests/model/test_ddp_stops.py": (0, 92),
    "tests/flows/test_gcs.py": (0, 82),
    "tests/flows/test_pretrain_cancel.py": (2, 79),
    "tests/model/test_multinode.py": (21, 59),
    "tests/flows/test_schedule.py": (55, 22),
    "tests/benchmarks/test_pretraining_value.py": (0, 76),
    "tests/model/test_ddp.py": (14, 55),
    "tests/model/test_checkpoint.py": (30, 35),
    "tests/benchmarks/test_scale.py": (3, 62),
    "tests/model/test_ner_finetune.py": (16, 38),
    "tests/benchmarks/test_scale_corpus.py": (7, 44),
    "tests/benchmarks/test_instances.py": (1, 48),
    "tests/pipelines/test_trust_cli.py": (32, 6),
    "tests/pipelines/corpus/test_pipeline.py": (34, 0),
    "tests/pipelines/test_no_eval_in_instances.py": (32, 0),
    "tests/pipelines/test_portable.py": (2, 29),
    "tests/model/test_trust_train_cli.py": (26, 0),
    "tests/pipelines/corpus/test_damaged_dump.py": (35, 8),
    "tests/faults/test_gcs_faults_cli.py": (80, 0),  # 10 corpus runs through the fault proxy
    "tests/flows/test_ui.py": (0, 22),
    "tests/flows/test_trust_registry_cli.py": (16, 6),
    "tests/pipelines/corpus/test_ids.py": (21, 0),
    "tests/model/test_deterministic.py": (21, 0),
    "tests/pipelines/instances/test_stage.py": (21, 0),
    "tests/pipelines/corpus/test_cli.py": (20, 0),
    "tests/pipelines/corpus/test_dedup.py": (20, 0),
    "tests/pipelines/corpus/test_grouping.py": (18, 0),
    "tests/test_trust_locks_cli.py": (10, 8),
    "tests/pipelines/corpus/test_held_out.py": (7, 9),
    "tests/pipelines/corpus/readers/test_wiki.py": (0, 15),
}
MEASURED_FROM = 15  # seconds: a shorter unit is left to SECONDS_PER_TEST
SECONDS_PER_TEST = 0.75  # the default tier's mean


def unit(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, or the chain's unit."""
    path = nodeid.split("::", 1)[0]
    return CHAIN if path in CHAIN_FILES else path


@pytest.hookimpl(trylast=True)  # after -m and --deselect have taken their tests out
def pytest_collection_modifyitems(config, items):
    """The collection in the order the units are to be handed out: xdist keeps the order of the first
    test of each unit (--no-loadscope-reorder, set below); within a unit, the file's own order. Every
    worker collects, and sorts, the same way."""
    if not config.getoption("numprocesses", None) and not hasattr(config, "workerinput"):
        return  # one process: the files' own order
    units = {item.nodeid: unit(item.nodeid) for item in items}
    expected = expected_seconds(items, units)
    order = {}  # first appearance: the files' own order, among units expected to be as long
    for name in units.values():
        order.setdefault(name, len(order))

    def rank(item) -> tuple[float, int]:
        name = units[item.nodeid]
        return -expected[name], order[name]

    items.sort(key=rank)


def expected_seconds(items, units: dict[str, str]) -> dict[str, float]:
    """Each unit's expected length in this run: the measured seconds (SECONDS) of the tiers that have
    tests in it, or SECONDS_PER_TEST a test for a unit never measured."""
    tiers: dict[str, set[int]] = {}
    counts: dict[str, int] = {}
    for item in items:
        name = units[item.nodeid]
        tiers.setdefault(name, set()).add(1 if item.get_closest_marker("slow") else 0)
        counts[name] = counts.get(name, 0) + 1
    return {
        name: sum(SECONDS[name][t] for t in tiers[name])
        if name in SECONDS
        else SECONDS_PER_TEST * counts[name]
        for name in tiers
    }


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which would build the scheduler of --dist
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") not in ("load", "loadfile", "loadgroup", "loadscope"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit(nodeid)

    config.option.loadscopereorder = False  # the order of the collection (sorted above)
    return FileUnits(config, log)


def measured(junit_xml: list[str]) -> dict[str, tuple[float, float]]:
    """Per unit, the seconds its default-tier and slow-tier tests took, from pytest's junit XML. The XML
    keeps no marks: the slow tests are found by collecting `-m slow`."""
    import xml.etree.ElementTree as ET

    slow = set(_collect_ids("slow"))
    seconds: dict[str, list[float]] = {}
    for path in junit_xml:
        for case in ET.parse(path).getroot().iter("testcase"):
            module = case.get("classname", "").split(".")
            while module and module[-1][:1].isupper():  # a test class: not part of the file's path
                module.pop()
            nodeid = "/".join(module) + ".py::" + case.get("name", "")
            tier = 1 if nodeid in slow else 0
            seconds.setdefault(unit(nodeid), [0.0, 0.0])[tier] += float(case.get("time", 0))
    return {name: (round(f), round(s)) for name, (f, s) in seconds.items()}


def _collect_ids(marker: str) -> list[str]:
    """The node ids of the tests marked `marker` (pytest --collect-only, in a process of its own),
    without their parameters' brackets (junit XML names a parametrized test with them, as here)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider", "-m", marker],
        capture_output=True,
        text=True,
        check=True,
    )
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    return [i.split("::", 1)[0] + "::" + i.rsplit("::", 1)[-1] for i in ids]


def main(argv: list[str]) -> int:
    """`python -m tests.scheduling JUNIT.xml...`: SECONDS, as measured by those runs, longest first."""
    table = measured(argv)
    print("SECONDS: dict[str, tuple[float, float]] = {")
    for name, (fast, slow) in sorted(table.items(), key=lambda kv: -sum(kv[1])):
        if fast + slow >= MEASURED_FROM:
            key = "CHAIN" if name == CHAIN else repr(name).replace("'", '"')
            print(f"    {key}: ({fast}, {slow}),")
    print("}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
