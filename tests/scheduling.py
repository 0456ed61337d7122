"""How `pytest -n N` (pytest-xdist) shares the tests among its workers: a file is a unit of work, sent
whole to one worker, so that a module's fixtures are built once; the three files that read the flows'
shared `chain` (one whole re-pretraining, session scope) are one unit, so that it is built once. The
longest units are handed out first, so that no worker is left with a long one at the end while the
other waits.

pytest-xdist's own `--dist loadgroup` cannot do this with pytest 9: it names a group by appending
"@group" to `item._nodeid`, which pytest 9 no longer reads (a node's id is `item._id`), so every test
went its own way and a file's module fixtures were built on both workers. A scheduler of our own, built
on xdist's LoadScopeScheduling through its `pytest_xdist_make_scheduler` hook, says what a unit is by
its `_split_scope`, which reads only the test's id."""

from __future__ import annotations

import pytest

CHAIN = "flows-chain"
CHAIN_FILES = ("tests/flows/test_flows.py", "tests/flows/test_artifacts.py", "tests/flows/test_run_view.py")
# Units measured longest on 2 cores (pytest --durations), longest first; any other unit follows, those
# with more tests first (xdist's own guess at a unit's length).
LONG_FIRST = (
    "tests/flows/test_rehearse.py",  # the production rehearsal, one slow test (minutes)
    "tests/flows/test_demo.py",  # the demo twice, local and on GCS (slow)
    CHAIN,
    "tests/flows/test_ui_browser.py",  # slow: a server, two tiny chains, a browser
    "tests/benchmarks/test_corpus.py",
    "tests/flows/test_prefect_cli.py",
    "tests/faults/test_trust_faults_cli.py",
    "tests/pipelines/test_trust_cli.py",
    "tests/flows/test_schedule.py",
    "tests/model/test_checkpoint.py",
)


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
    sizes: dict[str, int] = {}
    for name in units.values():
        sizes[name] = sizes.get(name, 0) + 1
    first = {name: rank for rank, name in enumerate(LONG_FIRST)}
    order = {name: i for i, name in enumerate(sizes)}  # first appearance: the files' own order

    def rank(item) -> tuple[int, int, int]:
        name = units[item.nodeid]
        return first.get(name, len(first)), -sizes[name], order[name]

    items.sort(key=rank)


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
