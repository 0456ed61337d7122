"""tests/scheduling.py: how pytest -n shares the tests (a file a unit, the chain's files one unit, the long
units first). Without it, a file's tests went to both workers and each built its module fixtures."""

from __future__ import annotations

from types import SimpleNamespace

from tests import scheduling


class Item:
    def __init__(self, nodeid: str, slow: bool = False):
        self.nodeid, self.slow = nodeid, slow

    def get_closest_marker(self, name: str):
        return object() if name == "slow" and self.slow else None


def test_a_file_is_a_unit_and_the_chain_files_are_one():
    assert scheduling.unit("tests/core/test_lock.py::test_a") == "tests/core/test_lock.py"
    assert scheduling.unit("tests/core/test_lock.py::Cls::test_b[1]") == "tests/core/test_lock.py"
    units = {scheduling.unit(f"{path}::test_x") for path in scheduling.CHAIN_FILES}
    assert units == {scheduling.CHAIN}


def test_units_go_longest_first_by_their_measured_seconds_and_a_files_tests_stay_together():
    ids = [
        "tests/a/test_one.py::t1",  # unmeasured: SECONDS_PER_TEST a test
        "tests/b/test_two.py::t1",
        "tests/b/test_two.py::t2",
        "tests/flows/test_artifacts.py::t1",  # the chain's unit: (156, 0)
        "tests/flows/test_rehearse.py::t1",  # (21, 730), this test in the default tier
        "tests/flows/test_flows.py::t1",
        "tests/a/test_one.py::t2",
        "tests/b/test_two.py::t3",
    ]
    items = [Item(i) for i in ids]
    config = SimpleNamespace(getoption=lambda name, default=None: 2)  # pytest -n 2
    scheduling.pytest_collection_modifyitems(config, items)
    assert [i.nodeid for i in items] == [
        "tests/flows/test_artifacts.py::t1",  # 156 s
        "tests/flows/test_flows.py::t1",
        "tests/flows/test_rehearse.py::t1",  # 21 s: its slow test is not in this run
        "tests/b/test_two.py::t1",  # three tests
        "tests/b/test_two.py::t2",
        "tests/b/test_two.py::t3",
        "tests/a/test_one.py::t1",  # two
        "tests/a/test_one.py::t2",
    ]
    both_tiers = [Item(i, slow=i.startswith("tests/flows/test_rehearse.py")) for i in ids]
    scheduling.pytest_collection_modifyitems(config, both_tiers)
    assert both_tiers[0].nodeid == "tests/flows/test_rehearse.py::t1"  # 730 s with its slow test

    one_process = [Item(i) for i in ids]
    scheduling.pytest_collection_modifyitems(
        SimpleNamespace(getoption=lambda name, default=None: None), one_process
    )
    assert [i.nodeid for i in one_process] == ids  # without -n: untouched


def test_the_table_is_read_back_from_a_runs_junit_xml(tmp_path, monkeypatch):
    xml = tmp_path / "run.xml"
    xml.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.flows.test_flows" name="test_a" time="100.5"/>'
        '<testcase classname="tests.flows.test_run_view" name="test_b" time="20"/>'
        '<testcase classname="tests.model.test_ddp.TestRanks" name="test_c[2]" time="30"/>'
        '<testcase classname="tests.model.test_ddp" name="test_d" time="5"/>'
        "</testsuite></testsuites>"
    )
    monkeypatch.setattr(scheduling, "_collect_ids", lambda marker: ["tests/model/test_ddp.py::test_c[2]"])
    assert scheduling.measured([str(xml)]) == {scheduling.CHAIN: (120, 0), "tests/model/test_ddp.py": (5, 30)}
