"""The repository documents itself: every doc the code cites exists here, and nothing cites a file
outside the repository (docs/architecture.md, docs/albert.md)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CITING_PACKAGES = ("pipelines", "model", "promotion", "flows", "benchmarks", "tests")
DOC_PATH = re.compile(r"docs/[A-Za-z0-9_.-]+\.md")
ALBERT_CITE = re.compile(r"docs/albert\.md §(\d+)")
# Spelled in pieces so that this file does not mention them itself.
OUTSIDE = ("DESIGN" + ".md", "REFERENCE" + ".md", ".." + "/shared")


def tracked_files(*suffixes: str) -> list[Path]:
    """The repository's files with these suffixes: git's list in a checkout, else a walk of the tree
    (an unpacked sdist) that leaves out hidden folders, the virtual environment and build output."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True, timeout=30
        ).stdout.decode()
        names = [n for n in out.split("\0") if n]
    except (OSError, subprocess.SubprocessError):
        skip = {"out", "build", "dist", "node_modules", "__pycache__"}
        names = []
        for folder, dirs, files in os.walk(ROOT):
            dirs[:] = [d for d in dirs if not d.startswith(".") and d not in skip]
            names += [os.path.relpath(os.path.join(folder, f), ROOT) for f in files]
    return sorted(ROOT / n for n in names if n.endswith(suffixes) and (ROOT / n).is_file())


def citing_files() -> list[Path]:
    """Python files of the packages and tests, and the README."""
    files = [p for p in tracked_files(".py") if p.relative_to(ROOT).parts[0] in CITING_PACKAGES]
    return [*files, ROOT / "README.md"]


def test_every_cited_doc_exists():
    cited: dict[str, list[str]] = {}
    for path in citing_files():
        for doc in DOC_PATH.findall(path.read_text(encoding="utf-8")):
            cited.setdefault(doc, []).append(str(path.relative_to(ROOT)))
    assert "docs/albert.md" in cited and "docs/architecture.md" in cited
    missing = {doc: where for doc, where in cited.items() if not (ROOT / doc).is_file()}
    assert not missing, f"cited but not in the repository: {missing}"


def test_albert_sections_cited_exist():
    headings = [
        line
        for line in (ROOT / "docs" / "albert.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    ]
    sections = {int(m) for line in headings for m in re.findall(r"§(\d+)\b", line)}
    assert sections == {1, 2, 3, 4, 5}
    cited = {
        int(n): str(path.relative_to(ROOT))
        for path in citing_files()
        for n in ALBERT_CITE.findall(path.read_text(encoding="utf-8"))
    }
    assert cited, "nothing cites docs/albert.md §N"
    missing = {f"§{n}": where for n, where in cited.items() if n not in sections}
    assert not missing, f"cited sections without a heading in docs/albert.md: {missing}"


def test_nothing_cites_files_outside_the_repository():
    offenders = [
        f"{path.relative_to(ROOT)}: {needle}"
        for path in tracked_files(".py", ".md")
        for needle in OUTSIDE
        if needle in path.read_text(encoding="utf-8")
    ]
    assert not offenders, offenders


def test_readme_links_every_docs_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    unlinked = [name for name in pages if f"(docs/{name})" not in readme]
    assert not unlinked, f"docs pages the README's Documentation section does not link: {unlinked}"


CODE_PATH = re.compile(r"(?<![\w/.])((?:pipelines|model|flows|benchmarks)/[A-Za-z0-9_/]+\.py)\b")


def test_every_module_the_docs_name_exists():
    """A page that names a module (`pipelines/vocab.py`) names one that is there: code that moves
    takes its documentation along."""
    pages = [p for p in tracked_files(".md") if p.parts[len(ROOT.parts)] not in (".venv",)]
    missing = {
        f"{page.relative_to(ROOT)}: {path}"
        for page in pages
        for path in CODE_PATH.findall(page.read_text(encoding="utf-8"))
        if not (ROOT / path).is_file()
    }
    assert not missing, sorted(missing)
