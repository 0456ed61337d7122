"""Names of paths and URLs, and the fsspec filesystem behind a URL.

gs:// goes through core/storage/gcs.py, gcsfs's plain file system under the request policy
(core/storage/policy.py: a timeout per request, retries with backoff, one line when it gives up).
With STORAGE_EMULATOR_HOST set (tests, `make rehearse`), gs:// goes to that endpoint without
credentials. The plain class has no bucket-type probe: gcsfs's default class asks a gRPC service
first, which an emulator does not serve (a minute per bucket before giving up), for zonal and
hierarchical-namespace features this layer does not use.
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


def filesystem(path: str, version_aware: bool = False):
    """(fsspec filesystem, path inside it) of a URL. `version_aware` (gs://): paths may name an
    object's generation, `bucket/key#generation` (core/storage/inputs.py reads inputs so)."""
    import fsspec

    proto = protocol(path)
    options: dict[str, Any] = {}
    if proto in ("gs", "gcs", "s3", "s3a"):
        options["use_listings_cache"] = False
    try:
        if proto in ("gs", "gcs"):
            from core.storage.gcs import PolicyGCSFileSystem
            from core.storage.policy import current

            emulator = os.environ.get("STORAGE_EMULATOR_HOST")
            if emulator:
                options["token"] = "anon"
                options["endpoint_url"] = emulator if "://" in emulator else f"http://{emulator}"
            fs = PolicyGCSFileSystem(policy=current(), version_aware=version_aware, **options)
        else:
            fs = fsspec.filesystem(proto, **options)
    except ImportError as err:
        package = _PACKAGES.get(proto)
        hint = f" (pip install {package})" if package else ""
        raise UserError(f"{path}: {proto}:// needs a package that is not installed{hint}") from err
    except ValueError as err:
        raise UserError(f"{path}: unknown storage protocol {proto!r}") from err
    return fs, fs._strip_protocol(path)
