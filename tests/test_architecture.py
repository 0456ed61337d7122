"""The architecture's rules, checked on the source: what each layer may import, how large a module may
grow, and where benchmarks live (docs/architecture.md)."""

from __future__ import annotations

import ast
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRODUCT = ("pipelines", "model", "flows")
MAX_LINES = 450


def _tracked(*folders: str) -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", *folders],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return sorted(p for p in out if p.endswith(".py") and os.path.exists(os.path.join(ROOT, p)))


def _imports(path: str) -> set[str]:
    """Top-level names of every module the file imports (anywhere in it, lazily or not)."""
    tree = ast.parse(open(os.path.join(ROOT, path), encoding="utf-8").read(), path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def _imported_roots(path: str) -> set[str]:
    return {name.split(".")[0] for name in _imports(path)}


@pytest.mark.parametrize(
    "layer, forbidden",
    [
        ("pipelines", {"torch", "prefect", "model", "flows", "benchmarks"}),
        ("model", {"apache_beam", "prefect", "flows", "benchmarks"}),
        ("flows", {"benchmarks"}),
    ],
)
def test_layers_import_only_what_they_may(layer, forbidden):
    bad = {p: sorted(_imported_roots(p) & forbidden) for p in _tracked(layer)}
    assert not {p: b for p, b in bad.items() if b}


def test_the_shared_core_imports_no_framework():
    forbidden = {"apache_beam", "torch", "prefect", "tensorflow", "model", "flows"}
    heavy = {p: sorted(_imported_roots(p) & forbidden) for p in _tracked("pipelines/core")}
    assert not {p: b for p, b in heavy.items() if b}
    assert not [
        p
        for p in _tracked("pipelines/core")
        if any(n.startswith("pipelines.") and not n.startswith("pipelines.core") for n in _imports(p))
    ]


def test_every_product_module_is_small():
    sizes = {p: sum(1 for _ in open(os.path.join(ROOT, p), encoding="utf-8")) for p in _tracked(*PRODUCT)}
    assert {p: n for p, n in sizes.items() if n >= MAX_LINES} == {}


def test_no_benchmark_code_in_the_product():
    names = [p for p in _tracked(*PRODUCT) if "bench" in os.path.basename(p)]
    assert names == []
    assert _tracked("benchmarks"), "benchmarks/ holds the benchmarks"


def test_flows_import_modules_by_name_only_in_the_cli_and_the_deployment_loader():
    users = [p for p in _tracked("flows") if any(n.split(".")[0] == "importlib" for n in _imports(p))]
    assert users == ["flows/cli.py", "flows/deploy.py"]
