"""The checkpoint registry: versions, the production pointer, the promotions log. Pure logic, no Prefect
(flows/promote.py drives it).


Layout under a registry root (a local folder, gs://bucket/prefix or any fsspec URL):

    <root>/<model>/v<N>/           immutable: model.safetensors, config.json, spm.model, metrics.json,
                                   lineage.json (written LAST: a version without it is incomplete)
    <root>/<model>/production.json the pointer: {"version": "v3", "previous": ["v1", "v2"], ...}
    <root>/<model>/promotions.jsonl append-only log of every decision (promote, reject, conflict, rollback,
                                   set-production)

Trust. Nothing is made production without being checked first: a version is complete when its
lineage.json parses and every file it lists has the sha256 recorded there (`check_version`), so a pruned
folder, a torn copy or a flipped bit is refused by promote, rollback and --set-production alike. A
damaged production.json is never guessed at: every reader gets one line naming the file and the
repair (`albert promote --set-production VERSION`, which rewrites the pointer to a verified version).

Concurrency. A version number is claimed by creating `v<N>/.claim` exclusively, so two registrations
never share a folder. The pointer moves by compare-and-swap on the content the promoter read before it
evaluated anything: locally a `flock` around read-compare-write-temp-`os.replace`; on GCS an upload with
`if_generation_match=<generation read>` (the server refuses it when anyone wrote in between). Of two
concurrent promotions from the same production, exactly one wins; the other is recorded as a conflict
and changes nothing (its version folder stays, complete but never production).

The decision itself comes from flows/gate.py (paired statistical tests on the same eval sequences and
test examples); `gate_and_promote` acts on it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import hashlib
import json
import logging
import os
import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from importlib import metadata
from typing import Any

from flows.gate import Decision
from pipelines.core import storage
from pipelines.core.errors import UserError

_log = logging.getLogger(__name__)

POINTER = "production.json"
LOG = "promotions.jsonl"
CLAIM = ".claim"
LINEAGE = "lineage.json"
METRICS = "metrics.json"
CHECKPOINT_FILES = ("model.safetensors", "config.json", "spm.model")
DEFAULT_MODEL = "albert"
PACKAGES = ("albert-factory", "torch", "apache-beam", "prefect", "sentencepiece", "safetensors", "numpy")

_VERSION = re.compile(r"^v(\d+)$")
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
MODEL_NAME_RULE = "use letters, digits, '.', '_' or '-'"


class PromotionConflict(Exception):
    """The pointer changed between the read that a promotion was based on and its write."""


class BrokenVersion(UserError):
    """A registry version that is missing, incomplete, or whose files fail their sha256."""


# --------------------------------------------------------------------------------------------- stores
# A store reads and writes whole small objects under one root, with a compare-and-swap primitive:
#   read(path)                 -> (bytes or None, token)   token identifies the version read
#   write_if(path, data, token) -> bool                    False when the object is no longer that version
#   sha256(path) -> str | None                             None when the object does not exist
# token None means "the object does not exist" (write_if then creates it exclusively).


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _appended(data: bytes | None, line: str) -> bytes:
    """`data` with `line` appended; a torn last line (no newline: a writer died) stays a line of its
    own instead of swallowing the new entry."""
    data = data or b""
    if data and not data.endswith(b"\n"):
        data += b"\n"
    return data + (line.rstrip("\n") + "\n").encode("utf-8")


class LocalStore:
    """A local folder. CAS = an exclusive flock on `<root>/.lock`, then read-compare, write a temporary
    file in the same folder, fsync, os.replace (atomic on POSIX). flock is released by the kernel when a
    process dies, so a crashed promoter never leaves the registry locked."""

    def __init__(self, root: str):
        self.root = os.path.abspath(root)

    def url(self, path: str) -> str:
        return os.path.join(self.root, path)

    @contextlib.contextmanager
    def _locked(self, path: str) -> Iterator[None]:
        # One lock for the whole store: registry writes are few and tiny, and version folders stay clean.
        os.makedirs(os.path.dirname(self.url(path)), exist_ok=True)
        # Read-only is enough for flock: a teammate who cannot write .lock (another owner) still locks.
        fd = os.open(os.path.join(self.root, ".lock"), os.O_RDONLY | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _read(self, path: str) -> bytes | None:
        try:
            with open(self.url(path), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def read(self, path: str) -> tuple[bytes | None, str | None]:
        data = self._read(path)
        return data, (None if data is None else _sha(data))

    def write_if(self, path: str, data: bytes, token: str | None) -> bool:
        full = self.url(path)
        with self._locked(path):
            current = self._read(path)
            if (None if current is None else _sha(current)) != token:
                return False
            tmp = os.path.join(os.path.dirname(full), f".{os.path.basename(full)}.{uuid.uuid4().hex[:8]}")
            try:
                with open(tmp, "xb") as f:  # mode from the umask: a shared registry stays readable
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, full)
            finally:
                if os.path.exists(tmp):
                    os.remove(tmp)
        return True

    def append_line(self, path: str, line: str) -> None:
        with self._locked(path), open(self.url(path), "a+b") as f:
            tail = b""
            if end := f.seek(0, os.SEEK_END):
                f.seek(end - 1)
                tail = f.read(1)
            f.write(_appended(tail, line)[len(tail) :])  # mode "a": writes always go to the end
            f.flush()
            os.fsync(f.fileno())

    def put_file(self, src: str, path: str) -> None:
        storage.copy(src, self.url(path))  # src: a path or URL; appears whole (temporary name, rename)

    def exists(self, path: str) -> bool:
        return storage.exists(self.url(path))

    def sha256(self, path: str) -> str | None:
        return storage.sha256(self.url(path)) if storage.isfile(self.url(path)) else None

    def list_dirs(self, path: str) -> list[str]:
        return storage.subdirs(self.url(path))


class GCSStore:
    """gs://bucket/prefix through the google-cloud-storage client. CAS uses object generations: every
    write of an object creates a new generation, and an upload with `if_generation_match=G` (0: the
    object must not exist) fails with 412 PreconditionFailed when the live generation is not G."""

    def __init__(self, url: str, client: Any = None):
        bucket, _, prefix = url.removeprefix("gs://").partition("/")
        if client is None:
            try:
                from google.cloud import storage
            except ImportError as err:  # pragma: no cover - installed with apache-beam[gcp]
                raise UserError("a gs:// registry needs google-cloud-storage") from err
            client = storage.Client()
        self.client, self.bucket_name, self.prefix = client, bucket, prefix.strip("/")
        self.bucket = client.bucket(bucket)

    def _name(self, path: str) -> str:
        return f"{self.prefix}/{path}" if self.prefix else path

    def url(self, path: str) -> str:
        return f"gs://{self.bucket_name}/{self._name(path)}"

    def read(self, path: str) -> tuple[bytes | None, int | None]:
        blob = self.bucket.get_blob(self._name(path))
        if blob is None:
            return None, None
        # Pin the download to the generation we report, so data and token always match.
        return blob.download_as_bytes(if_generation_match=blob.generation), blob.generation

    def write_if(self, path: str, data: bytes, token: int | None) -> bool:
        from google.api_core.exceptions import PreconditionFailed

        blob = self.bucket.blob(self._name(path))
        try:
            blob.upload_from_string(data, content_type="application/json", if_generation_match=token or 0)
        except PreconditionFailed:
            return False
        return True

    def append_line(self, path: str, line: str, attempts: int = 50) -> None:
        # GCS objects are immutable: append = rewrite under a generation precondition, retried.
        for _ in range(attempts):
            data, token = self.read(path)
            if self.write_if(path, _appended(data, line), token):
                return
        raise PromotionConflict(f"could not append to {self.url(path)} after {attempts} attempts")

    def put_file(self, src: str, path: str) -> None:
        if src.startswith("gs://"):  # server-side copy, nothing through this machine
            storage.copy(src, self.url(path))
        else:
            with storage.local_file(src) as local:
                self.bucket.blob(self._name(path)).upload_from_filename(local)

    def exists(self, path: str) -> bool:
        return self.bucket.blob(self._name(path)).exists()

    def sha256(self, path: str) -> str | None:
        blob = self.bucket.get_blob(self._name(path))
        # Through this client (not gcsfs), in memory: a model file is a few hundred MB at most.
        return None if blob is None else _sha(blob.download_as_bytes(if_generation_match=blob.generation))

    def list_dirs(self, path: str) -> list[str]:
        prefix = self._name(path).rstrip("/") + "/"
        it = self.client.list_blobs(self.bucket_name, prefix=prefix, delimiter="/")
        for _ in it:  # the prefixes are filled in while the pages are consumed
            pass
        return sorted(p[len(prefix) :].rstrip("/") for p in it.prefixes)


class FsspecStore:
    """Any other fsspec URL (s3://, memory://, ...). The read-compare-write runs under a process-local
    lock only: safe for one promoter at a time (and for threads), NOT for concurrent promoters on
    different machines, because s3fs exposes no conditional write. Use a local or gs:// registry, or
    serialize promotions (one work-pool concurrency slot), where that matters."""

    _lock = threading.Lock()

    def __init__(self, url: str):
        self.fs, self.root = storage.filesystem(url)
        self.protocol = url.split("://", 1)[0]
        _log.warning("registry on %s:// has no compare-and-swap: run one promotion at a time", self.protocol)

    def _p(self, path: str) -> str:
        return f"{self.root.rstrip('/')}/{path}"

    def url(self, path: str) -> str:
        return f"{self.protocol}://{self._p(path).lstrip('/')}" if self.protocol != "file" else self._p(path)

    def read(self, path: str) -> tuple[bytes | None, str | None]:
        if not self.fs.exists(self._p(path)):
            return None, None
        data = self.fs.cat_file(self._p(path))
        return data, _sha(data)

    def write_if(self, path: str, data: bytes, token: str | None) -> bool:
        with self._lock:
            if self.read(path)[1] != token:
                return False
            self.fs.pipe_file(self._p(path), data)
            return True

    def append_line(self, path: str, line: str) -> None:
        with self._lock:
            data, _ = self.read(path)
            self.fs.pipe_file(self._p(path), _appended(data, line))

    def put_file(self, src: str, path: str) -> None:
        storage.copy(src, self.url(path))

    def exists(self, path: str) -> bool:
        return self.fs.exists(self._p(path))

    def sha256(self, path: str) -> str | None:
        return _sha(self.fs.cat_file(self._p(path))) if self.fs.isfile(self._p(path)) else None

    def list_dirs(self, path: str) -> list[str]:
        p = self._p(path)
        if not self.fs.exists(p):
            return []
        return sorted(
            e["name"].rstrip("/").rsplit("/", 1)[-1]
            for e in self.fs.ls(p, detail=True)
            if e["type"] == "directory"
        )


def open_store(root: str):
    if root.startswith("gs://"):
        return GCSStore(root)
    if "://" in root and not root.startswith("file://"):
        return FsspecStore(root)
    return LocalStore(root.removeprefix("file://"))


# ------------------------------------------------------------------------------------------- registry


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _dumps(obj) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")


def _pointer_problem(pointer: Any) -> str | None:
    """What is wrong with a parsed production.json, or None."""
    if not isinstance(pointer, dict):
        return "is not a JSON object"
    if not isinstance(pointer.get("version"), str) or not _VERSION.match(pointer["version"]):
        return 'has no valid "version" (v<N>)'
    previous = pointer.get("previous", [])
    if not isinstance(previous, list) or not all(isinstance(v, str) and _VERSION.match(v) for v in previous):
        return 'has an invalid "previous" list (of v<N>)'
    return None


class Registry:
    """Versions, the production pointer and the promotions log of one model under a registry root."""

    def __init__(self, root: str, model: str = DEFAULT_MODEL, store=None):
        if not MODEL_NAME.fullmatch(model):
            raise UserError(f"model name {model!r}: {MODEL_NAME_RULE}")
        self.root, self.model = root, model
        self.store = store if store is not None else open_store(root)

    def _p(self, *parts: str) -> str:
        return "/".join((self.model, *parts))

    def url(self, *parts: str) -> str:
        return self.store.url(self._p(*parts))

    def check_writable(self, what: str = "registry") -> None:
        """Refuse a root that cannot hold a registry (a file, unwritable, another stage's output folder)
        before anything is read or written. `what`: how the caller names the root (e.g. "--registry")."""
        from pipelines import outdir

        storage.check_writable_folder(self.root, what)
        stage = outdir.owner(self.root)
        if stage:
            raise UserError(
                f"{what} {self.root} holds the output of `albert {stage}`; give the registry a folder of its own"
            )
        if storage.isfile(storage.join(self.root, self.model)):
            raise UserError(
                f"{what} {self.root}: {self.model} there is a file, not the folder of model {self.model}"
            )

    def command(self, *args: str) -> str:
        """The `albert promote` command line that acts on this registry (for messages)."""
        model = [] if self.model == DEFAULT_MODEL else ["--model", self.model]
        return "`" + " ".join(["albert promote", "--registry", self.root, *model, *args]) + "`"

    def repair_hint(self) -> str:
        """How to point production at a good version again: only the pointer ever needs repair, since
        versions are immutable."""
        registered = self.versions()
        if not registered:
            return f"no registered version is left: remove {self.url(POINTER)} and promote a candidate again"
        return (
            f"point production at a good version with {self.command('--set-production', 'VERSION')} "
            f"(registered: {', '.join(registered)})"
        )

    # --- reading -----------------------------------------------------------------------------------

    def versions(self) -> list[str]:
        """Complete versions (lineage.json present), oldest first."""
        names = [n for n in self.store.list_dirs(self.model) if _VERSION.match(n)]
        names.sort(key=lambda n: int(n[1:]))
        return [n for n in names if self.store.exists(self._p(n, LINEAGE))]

    def _parse_pointer(self, data: bytes | None) -> dict | None:
        """production.json as a dict (None: there is none). A damaged one is never guessed at: a
        UserError names the file, the problem and the repair."""
        if data is None:
            return None
        try:
            pointer = json.loads(data)
            problem = _pointer_problem(pointer)
        except ValueError as err:  # UnicodeDecodeError included
            problem = f"is not valid JSON ({err})"
        if problem:
            raise UserError(f"{self.url(POINTER)} {problem}; {self.repair_hint()}")
        return pointer

    def read_pointer(self) -> tuple[dict | None, Any]:
        """(pointer or None, CAS token). Pass the token to `set_production` to move the pointer only if
        nobody moved it since this read."""
        data, token = self.store.read(self._p(POINTER))
        return self._parse_pointer(data), token

    def production(self) -> dict | None:
        return self.read_pointer()[0]

    def read_json(self, version: str, name: str) -> dict:
        data, _ = self.store.read(self._p(version, name))
        if data is None:
            raise UserError(f"{self.url(version)} has no {name}")
        return json.loads(data)

    def check_version(self, version: str) -> dict:
        """A version's lineage.json, after checking that every file it lists is there with the sha256
        recorded, and that metrics.json parses. BrokenVersion (one line) otherwise."""
        where = f"registry version {self.url(version)}"
        data, _ = self.store.read(self._p(version, LINEAGE))
        if data is None:
            if version in self.store.list_dirs(self.model):
                raise BrokenVersion(
                    f"{where} is incomplete: it has no {LINEAGE} (its registration did not finish)"
                )
            raise BrokenVersion(f"{where} does not exist")
        try:
            lineage = json.loads(data)
            files = {name: lineage["files"][name] for name in CHECKPOINT_FILES}
        except ValueError as err:
            raise BrokenVersion(f"{where}: {LINEAGE} is not valid JSON ({err})") from None
        except (KeyError, TypeError) as err:
            raise BrokenVersion(f"{where}: {LINEAGE} records no sha256 for {err}") from None
        try:
            json.loads(self.store.read(self._p(version, METRICS))[0] or b"")
        except ValueError:
            raise BrokenVersion(f"{where}: {METRICS} is missing or not valid JSON") from None
        for name, digest in files.items():
            found = self.store.sha256(self._p(version, name))
            if found is None:
                raise BrokenVersion(f"{where}: {name} is missing")
            if found != digest:
                raise BrokenVersion(f"{where}: {name} does not match its sha256 in {LINEAGE}")
        return lineage

    def check_production(self, pointer: dict) -> dict:
        """Production's lineage.json, after check_version; a missing or damaged production version is
        refused with the repair (a rollback, or --set-production)."""
        try:
            return self.check_version(pointer["version"])
        except BrokenVersion as err:
            how = self.repair_hint()
            if pointer.get("previous"):
                how = f"roll back to {pointer['previous'][-1]} with {self.command('--rollback')}, or {how}"
            raise BrokenVersion(
                f"production of {self.model} is {pointer['version']}, but {err}; {how}"
            ) from None

    def log(self) -> list[dict]:
        """Every logged decision, oldest first. A line that does not parse (a writer died mid-line) is
        skipped with a warning: one torn entry must not hide the others."""
        data, _ = self.store.read(self._p(LOG))
        entries = []
        for n, line in enumerate((data or b"").decode("utf-8", errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                entries.append(json.loads(line))
            except ValueError:
                _log.warning("%s line %d is not JSON (a torn write?): skipped", self.url(LOG), n)
        return entries

    # --- writing -----------------------------------------------------------------------------------

    def append_log(self, entry: dict) -> dict:
        entry = {"time": _now(), "model": self.model, **entry}
        self.store.append_line(self._p(LOG), json.dumps(entry, ensure_ascii=False, sort_keys=True))
        return entry

    def _claim(self, owner: dict) -> str:
        taken = [int(n[1:]) for n in self.store.list_dirs(self.model) if _VERSION.match(n)]
        n = max(taken, default=0) + 1
        while not self.store.write_if(self._p(f"v{n}", CLAIM), _dumps({**owner, "claimed_at": _now()}), None):
            n += 1  # someone else claimed v<n> since we listed
        return f"v{n}"

    def register(
        self,
        checkpoint_dir: str,
        metrics: dict,
        lineage: dict,
        spm_model: str | None = None,
        expected_sha256: dict[str, str] | None = None,
    ) -> str:
        """Copy a checkpoint folder into a new immutable version; returns its name (v<N>).
        expected_sha256: {file: sha256} of what was evaluated; a file that changed since is refused."""
        sources = {}
        for name in CHECKPOINT_FILES:
            path = storage.join(checkpoint_dir, name)
            if name == "spm.model" and not storage.exists(path) and spm_model:
                path = spm_model
            if not storage.isfile(path):
                raise UserError(f"{checkpoint_dir} is not a complete checkpoint: {name} is missing")
            sources[name] = path
        # Hashed BEFORE copying: set_production verifies the copies against these, so a file that
        # changes or tears during the copy never becomes production.
        files = {name: storage.sha256(path) for name, path in sources.items()}
        for name, digest in (expected_sha256 or {}).items():
            if files.get(name) != digest:
                raise UserError(
                    f"{sources[name]} changed after it was evaluated; promote the candidate again"
                )
        version = self._claim({"candidate": checkpoint_dir, "flow_run_id": lineage.get("flow_run_id")})
        for name, path in sources.items():
            self.store.put_file(path, self._p(version, name))
        self._put(self._p(version, METRICS), _dumps(metrics))
        self._put(self._p(version, LINEAGE), _dumps({**lineage, "version": version, "files": files}))
        return version

    def _put(self, path: str, data: bytes) -> None:
        _, token = self.store.read(path)
        if not self.store.write_if(path, data, token):  # pragma: no cover - a claimed folder is ours alone
            raise PromotionConflict(f"{self.store.url(path)} changed while being written")

    def _pointer(self, version: str, previous: list[str], **fields) -> dict:
        return {
            "model": self.model,
            "version": version,
            "path": self.url(version),
            "since": _now(),
            "previous": previous,
            **fields,
        }

    def set_production(self, version: str, expected_token: Any, **fields) -> dict:
        """Move the pointer to `version` (verified first) iff it is still what the caller read (token).
        Raises PromotionConflict otherwise. The previous production goes on the `previous` stack."""
        self.check_version(version)
        data, token = self.store.read(self._p(POINTER))
        if token != expected_token:
            raise PromotionConflict(self._moved(data))
        current = self._parse_pointer(data)
        previous = (current.get("previous", []) + [current["version"]]) if current else []
        pointer = self._pointer(version, previous, **fields)
        if not self.store.write_if(self._p(POINTER), _dumps(pointer), expected_token):
            raise PromotionConflict(self._moved(self.store.read(self._p(POINTER))[0]))
        return pointer

    def _moved(self, data: bytes | None) -> str:
        try:
            now = json.loads(data)["version"] if data else "none"
        except (ValueError, KeyError, TypeError):
            now = "a damaged production.json"
        return f"production of {self.model} changed while this promotion ran (now {now})"

    def rollback(self, reason: str = "", flow_run_id: str | None = None) -> dict:
        """Restore the previous production version (the top of the pointer's `previous` stack), after
        checking it is still complete: a pruned or damaged one is refused and production stays."""
        for _ in range(20):  # CAS loop: a rollback has no evaluation to protect, only the pointer
            current, token = self.read_pointer()
            if not current:
                raise UserError(
                    f"{self.model} has no production model to roll back ({self.url(POINTER)} does not exist)"
                )
            if not current.get("previous"):
                raise UserError(
                    f"{self.model} {current['version']} is the first production version: nothing to roll back to"
                )
            *rest, target = current["previous"]
            try:
                self.check_version(target)
            except BrokenVersion as err:
                raise BrokenVersion(
                    f"cannot roll back {self.model} to {target}: {err}; production stays {current['version']}; "
                    f"{self.repair_hint()}"
                ) from None
            pointer = self._pointer(target, rest, rolled_back_from=current["version"])
            if self.store.write_if(self._p(POINTER), _dumps(pointer), token):
                self.append_log(
                    {"event": "rollback", "version": target, "previous": current["version"], "reason": reason,
                     "flow_run_id": flow_run_id}
                )  # fmt: skip
                return pointer
        raise PromotionConflict("the production pointer kept changing during the rollback")

    def restore(self, version: str, reason: str = "", flow_run_id: str | None = None) -> dict:
        """Point production at `version` (verified first), whatever production.json holds now, even a
        damaged one: the repair of a broken pointer, or a jump back past several versions. A readable
        current production goes on the `previous` stack; a damaged pointer's stack is lost with it."""
        if not _VERSION.match(version):
            raise UserError(
                f"{version!r} is not a version name (v<N>); registered: {', '.join(self.versions()) or 'none'}"
            )
        self.check_version(version)
        for _ in range(20):  # CAS loop, as rollback
            data, token = self.store.read(self._p(POINTER))
            try:
                current = self._parse_pointer(data)
            except UserError:
                current = None  # the damage this repairs
            if current and current["version"] == version:
                return current
            previous = (current.get("previous", []) + [current["version"]]) if current else []
            replaced = (
                current["version"] if current else ("a damaged production.json" if data is not None else None)
            )
            pointer = self._pointer(version, previous, set_from=replaced)
            if self.store.write_if(self._p(POINTER), _dumps(pointer), token):
                self.append_log(
                    {"event": "set-production", "version": version, "previous": replaced, "reason": reason,
                     "flow_run_id": flow_run_id}
                )  # fmt: skip
                return pointer
        raise PromotionConflict("the production pointer kept changing while it was being set")


@dataclass
class PromotionResult:
    event: str  # promote | reject | conflict
    decision: Decision
    version: str | None  # the registered version (promote, conflict)
    production: str | None  # the production version after this call
    previous: str | None  # the production version the decision was made against

    def to_dict(self) -> dict:
        return {**asdict(self), "decision": self.decision.to_dict()}


def gate_and_promote(
    registry: Registry,
    candidate_dir: str,
    candidate_metrics: dict,
    reference_metrics: dict | None,
    snapshot: tuple[dict | None, Any],
    decision: Decision,
    lineage: dict | None = None,
    spm_model: str | None = None,
    expected_sha256: dict[str, str] | None = None,
) -> PromotionResult:
    """Act on the gate's decision (flows.gate.decide): if it promotes, register the candidate and move
    the pointer by CAS against `snapshot` (the `read_pointer()` taken BEFORE the evaluation). Every
    outcome goes to the log. reference_metrics: production's metrics, or the baselines' (display).
    expected_sha256: {file: sha256} of the candidate files that were evaluated (see Registry.register)."""
    pointer, token = snapshot
    previous = pointer["version"] if pointer else None
    lineage = {**(lineage or {}), "parent_version": (lineage or {}).get("parent_version", previous)}
    base = {
        "candidate": candidate_dir,
        "previous": previous,
        "metrics": candidate_metrics,
        "reference_metrics": reference_metrics,
        "reasons": decision.reasons,
        "flow_run_id": lineage.get("flow_run_id"),
    }
    if not decision.promote:
        registry.append_log({"event": "reject", "version": None, **base})
        return PromotionResult("reject", decision, None, previous, previous)
    version = registry.register(
        candidate_dir, {**candidate_metrics, "gate": decision.to_dict()}, lineage, spm_model, expected_sha256
    )
    try:
        registry.set_production(
            version, token, metrics=candidate_metrics, flow_run_id=lineage.get("flow_run_id")
        )
    except PromotionConflict as err:
        decision = replace(
            decision, promote=False, reasons=decision.reasons + [f"not promoted: {err}; re-run the promotion"]
        )
        registry.append_log({"event": "conflict", "version": version, **base, "reasons": decision.reasons})
        return PromotionResult("conflict", decision, version, registry.production()["version"], previous)
    registry.append_log({"event": "promote", "version": version, **base})
    return PromotionResult("promote", decision, version, version, previous)


# -------------------------------------------------------------------------------------------- lineage


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def build_lineage(
    *,
    checkpoint_dir: str,
    corpus_dir: str | None = None,
    vocab_dir: str | None = None,
    instances_dir: str | None = None,
    run_dir: str | None = None,
    flow_run_id: str | None = None,
    parent_version: str | None = None,
    init_checkpoint: str | None = None,
) -> dict:
    """Where a checkpoint came from: stage folders with the sha256 of their manifests, the vocabulary
    and config hashes, the code version and the package versions."""
    from pipelines.core.manifest import MANIFEST, code_version

    def manifest_of(d: str | None) -> dict | None:
        if not d:
            return None
        path = storage.join(d, MANIFEST)
        return {"path": d, "manifest_sha256": storage.sha256(path) if storage.exists(path) else None}

    spm = storage.join(checkpoint_dir, "spm.model")
    if not storage.exists(spm) and vocab_dir:
        spm = storage.join(vocab_dir, "spm.model")
    return {
        "checkpoint": checkpoint_dir,
        "corpus": manifest_of(corpus_dir),
        "vocab": {
            **(manifest_of(vocab_dir) or {}),
            "spm_sha256": storage.sha256(spm) if storage.exists(spm) else None,
        },
        "instances": manifest_of(instances_dir),
        "run": manifest_of(run_dir),
        "config_sha256": storage.sha256(storage.join(checkpoint_dir, "config.json")),
        "git_commit": code_version(),
        "packages": package_versions(),
        "flow_run_id": flow_run_id,
        "parent_version": parent_version,
        "init_checkpoint": init_checkpoint,
        "created_at": _now(),
    }
