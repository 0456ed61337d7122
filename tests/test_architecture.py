"""The architecture's rules, checked on the source: what each layer may import, how large a module may
grow, and where benchmarks live (docs/architecture.md)."""

from __future__ import annotations

import ast
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRODUCT = ("core", "pipelines", "model", "promotion", "flows")
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


OURS = {"core", "pipelines", "model", "promotion", "flows", "benchmarks"}
FRAMEWORKS = {"apache_beam", "torch", "prefect", "tensorflow"}


@pytest.mark.parametrize(
    "layer, may_import",
    [
        ("core", set()),  # the shared contracts import nothing of ours
        ("pipelines", {"core"}),  # the data product stands on the contracts only
        ("promotion", {"core"}),  # the gate and the registry: pure logic on the contracts
        ("model", {"core", "promotion"}),  # the trainer: never on the Beam layer; writes the gate's samples
        ("flows", {"core", "pipelines", "model", "promotion"}),  # orchestration on top of everything
    ],
)
def test_each_layer_imports_only_the_layers_below_it(layer, may_import):
    bad = {p: sorted((_imported_roots(p) & OURS) - may_import - {layer}) for p in _tracked(layer)}
    assert not {p: b for p, b in bad.items() if b}


@pytest.mark.parametrize(
    "layer, forbidden",
    [
        ("pipelines", {"torch", "prefect"}),
        ("model", {"apache_beam", "prefect"}),
    ],
)
def test_the_products_do_not_pull_in_each_others_frameworks(layer, forbidden):
    bad = {p: sorted(_imported_roots(p) & forbidden) for p in _tracked(layer)}
    assert not {p: b for p, b in bad.items() if b}


def _module_level_imports(path: str) -> set[str]:
    """Top-level names imported when the module is imported (not inside a function)."""
    tree = ast.parse(open(os.path.join(ROOT, path), encoding="utf-8").read(), path)
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_shared_core_imports_no_framework():
    # Beam, torch and Prefect never; TensorFlow only lazily, for the reference parser of the
    # instance schema (core/schema.py: tf_parse_spec), so that a Beam worker or the trainer that
    # imports core does not pay for TensorFlow.
    anywhere = {p: sorted(_imported_roots(p) & (FRAMEWORKS - {"tensorflow"})) for p in _tracked("core")}
    assert not {p: b for p, b in anywhere.items() if b}
    eager = {p: sorted(_module_level_imports(p) & FRAMEWORKS) for p in _tracked("core")}
    assert not {p: b for p, b in eager.items() if b}


def test_promotion_imports_no_framework():
    # The gate and the registry are pure logic: a test, the trainer or a flow imports them for free.
    bad = {p: sorted(_imported_roots(p) & FRAMEWORKS) for p in _tracked("promotion")}
    assert not {p: b for p, b in bad.items() if b}


def test_the_rules_see_real_imports():
    # The checks above would pass vacuously if the walk found nothing: each layer imports the core.
    for layer in ("pipelines", "model", "promotion", "flows"):
        assert any("core" in _imported_roots(p) for p in _tracked(layer)), layer
    assert any("promotion" in _imported_roots(p) for p in _tracked("model"))
    assert "numpy" in set().union(*(_imported_roots(p) for p in _tracked("promotion")))
    assert "apache_beam" in set().union(*(_imported_roots(p) for p in _tracked("pipelines")))
    assert "torch" in set().union(*(_imported_roots(p) for p in _tracked("model")))


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


# --- import circles -----------------------------------------------------------------------------------


def _module(path: str) -> str:
    """model/finetune.py -> model.finetune; pipelines/corpus/__init__.py -> pipelines.corpus."""
    name = path[: -len(".py")].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """{module: the modules of `sources` it imports}, from {path: source}: every import in the file, at
    module level or inside a function (a lazy import closes a circle as surely, only later), but not
    those under `if TYPE_CHECKING:`, which never run. `from pkg import name` is the module pkg.name
    when there is one, else pkg."""
    modules = {_module(path): path for path in sources}

    def ours(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in modules.items():
        package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
        edges: set[str] = set()
        stack = [ast.parse(sources[path], path)]
        while stack:
            for node in ast.iter_child_nodes(stack.pop()):
                if _type_checking(node):
                    stack.extend(node.orelse)
                    continue
                if isinstance(node, ast.Import):
                    edges |= {ours(a.name) for a in node.names}
                elif isinstance(node, ast.ImportFrom):
                    base = package
                    for _ in range(max(0, node.level - 1)):
                        base = base.rpartition(".")[0]
                    full = node.module if not node.level else ".".join(filter(None, (base, node.module)))
                    for alias in node.names:
                        sub = f"{full}.{alias.name}"
                        edges.add(sub if sub in modules else ours(full))
                stack.append(node)
        graph[module] = edges - {None, module}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            child = next(edges, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_no_import_circle_in_the_product_or_the_benchmarks():
    files = _tracked(*PRODUCT, "benchmarks")
    graph = import_graph({p: open(os.path.join(ROOT, p), encoding="utf-8").read() for p in files})
    assert sum(map(len, graph.values())) > 500  # the walk sees the imports
    assert import_circles(graph) == []


def test_a_circle_is_found_lazy_or_not_and_a_type_checking_import_is_none():
    sources = {
        "a/__init__.py": "",
        "a/x.py": "from a import y\n",
        "a/y.py": "def f():\n    from a.z import g\n",
        "a/z.py": "from a.x import h\nfrom typing import TYPE_CHECKING\n",
        "a/w.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from a.v import V\n",
        "a/v.py": "from . import w\n",
    }
    graph = import_graph(sources)
    assert graph["a.x"] == {"a.y"} and graph["a.v"] == {"a.w"} and graph["a.w"] == set()
    assert import_circles(graph) == [["a.x", "a.y", "a.z"]]


def test_the_product_does_not_import_the_rehearsal_harness():
    # flows/rehearsal/ stands in for production's services; the CLI names `albert rehearse` by its
    # module path (a string, imported when the command runs), nothing of the product imports it.
    files = _tracked(*PRODUCT)
    graph = import_graph({p: open(os.path.join(ROOT, p), encoding="utf-8").read() for p in files})
    harness = {m for m in graph if m == "flows.rehearsal" or m.startswith("flows.rehearsal.")}
    assert {"flows.rehearsal.rehearse", "flows.rehearsal.gcs_emulator"} <= harness
    assert any(graph[m] - harness for m in harness)  # the harness imports the product: edges are seen
    bad = {m: sorted(graph[m] & harness) for m in graph if m not in harness and graph[m] & harness}
    assert bad == {}
