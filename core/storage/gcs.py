"""gs:// under this factory's request policy (core/storage/policy.py): every request of gcsfs goes
through one place that times it out, retries it with backoff, and gives up in one line.

gcsfs retries a failed request 6 times at fixed intervals, with no timeout unless one is given (a
read the server never answers waits forever: the stage hung, and its lock's lease kept renewing),
and when it gives up it raises whatever the HTTP library raised (aiohttp's ClientOSError, its own
HttpError), after logging the traceback. Here a request that fails for good raises
core.errors.StorageFailed naming the operation, the object and how many attempts it took; the
callers in core/storage name the object better where the request's URL does not (an upload).

Answers that another attempt cannot change go through as gcsfs raises them, because callers rely on
them: 404 (FileNotFoundError: `exists` is False), 403, 412 (a precondition), 400.
"""

from __future__ import annotations

import asyncio
import logging
import time
import urllib.parse
from typing import Any

import aiohttp
from gcsfs.core import GCSFileSystem
from gcsfs.retry import HttpError, is_retriable

from core.errors import StorageFailed
from core.storage.policy import RequestPolicy

# gcsfs's request without its retry decorator: the policy below replaces it.
_ONCE = GCSFileSystem._request.__wrapped__
# gcsfs, and fsspec's read-ahead that gcsfs files use, log the traceback of every error they hand on
# (ERROR, so it reaches stderr); the error itself reaches the caller, who says it in one line.
for _name in ("gcsfs", "fsspec.prefetcher"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)


def retriable(err: BaseException) -> bool:
    """Whether another attempt may succeed: a timeout, a broken connection, 408, 429, 5xx."""
    return isinstance(err, asyncio.TimeoutError) or is_retriable(err)


def reason(err: BaseException) -> str:
    """What went wrong, in a few words."""
    if isinstance(err, asyncio.TimeoutError):
        return "no answer (timed out)"
    if isinstance(err, HttpError):
        return f"HTTP {err.code} {str(err.message).rsplit(',', 1)[0]}".strip()
    if isinstance(err, aiohttp.ClientResponseError):
        return f"HTTP {err.status} {err.message}"
    if isinstance(err, OSError) and err.strerror:
        return err.strerror[0].lower() + err.strerror[1:]
    text = str(err) or type(err).__name__
    return text[0].lower() + text[1:] if text else text


def operation(method: str, url: str) -> tuple[str, str]:
    """(what a request does, the object or folder it names) from its method and URL: the best a
    request can say; callers that know the path say it better (StorageFailed.at)."""
    parts = urllib.parse.urlsplit(url)
    path = urllib.parse.unquote(parts.path)
    query = urllib.parse.parse_qs(parts.query)
    bucket, _, name = path.partition("/b/")[2].partition("/o")
    name = name.lstrip("/") or (query.get("name") or [""])[0]
    target = f"gs://{bucket}/{name}" if name else f"gs://{bucket}"
    if "/upload/" in path or method in ("PUT", "PATCH") or (method == "POST" and "/copyTo/" not in path):
        return "writing", target
    if method == "DELETE":
        return "deleting", target
    if method == "POST":
        return "copying", target
    if "alt=media" in parts.query or "/download/" in path:
        return "reading", target
    if not name or "prefix" in query:
        return "listing", f"gs://{bucket}/{(query.get('prefix') or [''])[0]}"
    return "reading the metadata of", target


class PolicyGCSFileSystem(GCSFileSystem):
    """gcsfs's file system whose requests follow `policy`."""

    def __init__(self, *args: Any, policy: RequestPolicy, **kwargs: Any):
        timeout = aiohttp.ClientTimeout(sock_connect=policy.timeout_s, sock_read=policy.timeout_s)
        super().__init__(*args, requests_timeout=timeout, **kwargs)
        self.policy = policy

    async def _request(self, method, path, *args, **kwargs):
        started, attempt = time.monotonic(), 0
        while True:
            try:
                return await _ONCE(self, method, path, *args, **kwargs)
            except Exception as err:  # noqa: BLE001 - sorted right below: retried, given up, or as is
                if not retriable(err):
                    raise
                if attempt >= self.policy.retries:
                    doing, target = operation(method, self._format_path(path, args))
                    seconds = time.monotonic() - started
                    raise StorageFailed(
                        doing,
                        target,
                        reason(err),
                        f"gave up after {attempt + 1} attempt{'s' if attempt else ''} in {seconds:.0f} s "
                        f"({self.policy.settings()}); rerun the same command once the store answers",
                    ) from None
                await asyncio.sleep(self.policy.wait(attempt))
                attempt += 1
