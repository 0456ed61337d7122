"""Benchmarks are not product code: product packages never import them, the Dataflow worker wheel does
not carry them, and every `albert bench` target takes the same `--json PATH` option."""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import io
import os

import pytest

from benchmarks.cli import TARGETS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRODUCT = ("core", "pipelines", "model", "promotion", "flows")


def _product_files() -> list[str]:
    out = []
    for package in PRODUCT:
        for folder, dirs, files in os.walk(os.path.join(ROOT, package)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            out += [os.path.join(folder, f) for f in files if f.endswith(".py")]
    return out


def test_product_code_never_imports_benchmarks():
    offenders = []
    for path in _product_files():
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            offenders += [f"{path}: {n}" for n in names if n.split(".")[0] == "benchmarks"]
    assert not offenders
    assert not [p for p in _product_files() if "bench" in os.path.basename(p)]


def test_worker_wheel_ships_product_code_only(tmp_path):
    import zipfile

    from pipelines.corpus.staging import build_worker_wheel

    with zipfile.ZipFile(build_worker_wheel(str(tmp_path))) as zf:
        names = [n for n in zf.namelist() if ".dist-info/" not in n]
    assert names and all(n.startswith(("core/", "pipelines/")) for n in names)
    assert "core/storage/files.py" in names and "pipelines/corpus/pipeline.py" in names
    assert not [n for n in names if n.startswith(("model/", "promotion/", "flows/"))]
    assert not [n for n in names if "bench" in n or "reference_generator" in n]


def _help(module_name: str) -> str:
    module = importlib.import_module(module_name)
    if hasattr(module, "add_arguments"):
        parser = argparse.ArgumentParser()
        module.add_arguments(parser)
        return parser.format_help()
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        module.main(["--help"])
    return out.getvalue()


@pytest.mark.parametrize("target", list(TARGETS))
def test_every_target_takes_json_path(target):
    text = _help(TARGETS[target])
    assert "--json PATH" in text and "--json-out" not in text
