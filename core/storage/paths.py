"""Names of paths and URLs, and the fsspec filesystem behind a URL.

With STORAGE_EMULATOR_HOST set (tests, `make rehearse`), gs:// goes to that endpoint without
credentials, and gcsfs's bucket-type probe is turned off: it asks a gRPC service that an emulator
does not serve and would wait a minute per bucket before giving up.
"""

from __future__ import annotations

import os
import posixpath
from typing import Any

from core.errors import UserError

# The package each common protocol needs (fsspec names it too, in a longer message).
_PACKAGES = {"gs": "gcsfs", "gcs": "gcsfs", "s3": "s3fs", "s3a": "s3fs", "az": "adlfs", "abfs": "adlfs"}


# ------------------------------------------------------------------------------------------ names


def is_url(path: str) -> bool:
    """A URL other than file:// (object stores, memory://): no OS calls apply to it."""
    return "://" in path and not path.startswith("file://")


def protocol(path: str) -> str:
    return path.split("://", 1)[0] if "://" in path else "file"


def local_path(path: str) -> str:
    """A local path or file:// URL as an OS path."""
    return path.removeprefix("file://")


def absolute(path: str) -> str:
    """Local paths become absolute (subprocesses run elsewhere; registries record them); URLs stay."""
    return path if is_url(path) else os.path.abspath(local_path(path))


def join(base: str, *parts: str) -> str:
    if is_url(base):
        return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts if p)])
    return os.path.join(local_path(base), *parts)


def basename(path: str) -> str:
    return posixpath.basename(path.rstrip("/"))


def dirname(path: str) -> str:
    if is_url(path):
        head, _, rest = path.partition("://")
        return f"{head}://{posixpath.dirname(rest.rstrip('/'))}"
    return os.path.dirname(local_path(path).rstrip("/"))


def has_glob(path: str) -> bool:
    return any(c in path for c in "*?[")


# ------------------------------------------------------------------------------------ filesystems


def filesystem(path: str):
    """(fsspec filesystem, path inside it) of a URL."""
    import fsspec

    proto = protocol(path)
    options: dict[str, Any] = {}
    if proto in ("gs", "gcs", "s3", "s3a"):
        options["use_listings_cache"] = False
    emulator = os.environ.get("STORAGE_EMULATOR_HOST") if proto in ("gs", "gcs") else None
    try:
        if emulator:
            # The plain GCSFileSystem: gcsfs's default class (GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT, on by
            # default) first probes the bucket type over gRPC, which an emulator never answers.
            from gcsfs.core import GCSFileSystem

            url = emulator if "://" in emulator else f"http://{emulator}"
            fs = GCSFileSystem(token="anon", endpoint_url=url, **options)
        else:
            fs = fsspec.filesystem(proto, **options)
    except ImportError as err:
        package = _PACKAGES.get(proto)
        hint = f" (pip install {package})" if package else ""
        raise UserError(f"{path}: {proto}:// needs a package that is not installed{hint}") from err
    except ValueError as err:
        raise UserError(f"{path}: unknown storage protocol {proto!r}") from err
    return fs, fs._strip_protocol(path)
