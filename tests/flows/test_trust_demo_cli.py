"""`albert demo --out` on a folder of someone else's files: refused before Prefect starts, files intact."""

from __future__ import annotations

import os

from tests.cli import albert, tree


def test_demo_refuses_a_folder_that_is_not_ours(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "summary.txt").write_text("my notes\n")
    (out / "thesis.tex").write_text("\\documentclass{article}\n")
    before = tree(str(out))

    r = albert("demo", "--out", str(out), "--steps", "1")

    r.fails(2, str(out), "not empty", "--force")
    assert tree(str(out)) == before  # nothing written: no marker, no prefect-home, no summary
    assert not os.path.exists(out / "prefect-home")


def test_demo_refuses_another_stages_folder(tmp_path):
    out = tmp_path / "instances"
    out.mkdir()
    (out / ".albert-stage.json").write_text('{"stage": "instances"}\n')
    before = tree(str(out))

    r = albert("demo", "--out", str(out), "--force")

    r.fails(2, "albert instances")
    assert tree(str(out)) == before
