"""The checkpoint registry: versions, the production pointer, the promotions log. Pure logic, no Prefect
(flows/promote.py drives it; promotion/promote.py acts on the gate's decision with it).

Layout under a registry root (a local folder, gs://bucket/prefix or any fsspec URL: promotion/stores.py):

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

Concurrency. One promotion of a model at a time: `hold` locks <root>/<model> (flows/promote.py holds
it for the whole promotion, evaluations included). A version number is claimed by creating `v<N>/.claim` exclusively, so two registrations
never share a folder. The pointer moves by compare-and-swap (the store's `write_if`) on the content the
promoter read before it evaluated anything. Of two concurrent promotions from the same production,
exactly one wins; the other is recorded as a conflict and changes nothing (its version folder stays,
complete but never production).
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import re
from typing import Any

from core import lock, oserrors, storage
from core.errors import UserError
from promotion.stores import PromotionConflict, open_store

_log = logging.getLogger(__name__)

POINTER = "production.json"
LOG = "promotions.jsonl"
CLAIM = ".claim"
LINEAGE = "lineage.json"
METRICS = "metrics.json"
CHECKPOINT_FILES = ("model.safetensors", "config.json", "spm.model")
DEFAULT_MODEL = "albert"

_VERSION = re.compile(r"^v(\d+)$")
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
MODEL_NAME_RULE = "use letters, digits, '.', '_' or '-'"


class BrokenVersion(UserError):
    """A registry version that is missing, incomplete, or whose files fail their sha256."""


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
        from core import outdir

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

    def hold(self, what: str = "registry") -> lock.Lock:
        """check_writable, then take this model's lock (core.lock: <root>/<model>/.albert-lock),
        held until the caller's scope ends: one promotion, rollback or repair of a model at a time. A
        second one is refused in one line naming the holder; the pointer's compare-and-swap stays, for
        writers that do not lock (gate_and_promote called directly)."""
        self.check_writable(what)
        try:
            return lock.take(self.url(), "promote", what=what, client=getattr(self.store, "client", None))
        except lock.Busy as busy:
            raise UserError(f"{what} {self.root} (model {self.model}) is {busy}") from None
        except OSError as err:
            raise UserError(
                f"cannot write to {what} {self.root}: {oserrors.describe(err, self.url())}"
            ) from None

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
