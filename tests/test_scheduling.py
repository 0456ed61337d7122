"""tests/scheduling.py: how pytest -n shares the tests (a file a unit, the chain's files one unit, the long
units first). Without it, a file's tests went to both workers and each built its module fixtures."""

from __future__ import annotations

from types import SimpleNamespace

from tests import scheduling


class Item:
    def __init__(self, nodeid: str):
        self.nodeid = nodeid


def test_a_file_is_a_unit_and_the_chain_files_are_one():
    assert scheduling.unit("tests/core/test_lock.py::test_a") == "tests/core/test_lock.py"
    assert scheduling.unit("tests/core/test_lock.py::Cls::test_b[1]") == "tests/core/test_lock.py"
    units = {scheduling.unit(f"{path}::test_x") for path in scheduling.CHAIN_FILES}
    assert units == {scheduling.CHAIN}


def test_the_long_units_come_first_then_the_larger_and_a_files_tests_stay_together_in_order():
    ids = [
        "tests/a/test_one.py::t1",
        "tests/b/test_two.py::t1",
        "tests/b/test_two.py::t2",
        "tests/flows/test_artifacts.py::t1",
        "tests/flows/test_rehearse.py::t1",
        "tests/flows/test_flows.py::t1",
        "tests/a/test_one.py::t2",
    ]
    items = [Item(i) for i in ids]
    config = SimpleNamespace(getoption=lambda name, default=None: 2)  # pytest -n 2
    scheduling.pytest_collection_modifyitems(config, items)
    assert [i.nodeid for i in items] == [
        "tests/flows/test_rehearse.py::t1",  # LONG_FIRST, first of them
        "tests/flows/test_artifacts.py::t1",  # the chain's unit, next in LONG_FIRST
        "tests/flows/test_flows.py::t1",
        "tests/a/test_one.py::t1",  # two tests each: the files' own order
        "tests/a/test_one.py::t2",
        "tests/b/test_two.py::t1",
        "tests/b/test_two.py::t2",
    ]
    one_process = [Item(i) for i in ids]
    scheduling.pytest_collection_modifyitems(
        SimpleNamespace(getoption=lambda name, default=None: None), one_process
    )
    assert [i.nodeid for i in one_process] == ids  # without -n: untouched
