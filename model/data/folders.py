"""Instance folders: the TFRecord files of a split with their fixed lengths, checked against the
folder's manifest.json, and the vocabulary check that pairs instances with the spm.model they were
built with."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from core import storage
from core.errors import UserError
from core.schema import feature_lengths
from model.data.examples import RecordError, infer_lengths
from model.data.records import iter_records


@dataclass(frozen=True)
class InstanceFiles:
    """The TFRecord files of one split, with the fixed lengths of their features."""

    files: tuple[str, ...]
    max_seq_length: int
    max_predictions: int
    vocab_model: str | None = None
    """spm.model of the vocabulary the instances were built with (from manifest.json), if known."""
    num_records: int | None = None
    """Instances in the split, from the manifest (None for foreign files)."""
    vocab_sha256: str | None = None
    """sha256 of that spm.model when the instances were built (manifest.json; None for foreign files)."""
    content_id: str = ""
    """Identity of the data: for our folders a hash of the output hashes in manifest.json (instances
    rebuilt in place with another seed get another id); for foreign files a hash of their names and
    sizes. A resumed run must see the same id."""
    source: str = ""
    """The path the user gave (a folder, a glob, a file)."""
    foreign: bool = False
    """Named by a glob or a file path, not an instance folder: no manifest says which vocabulary built
    them, so the trainer needs --vocab."""

    @property
    def lengths(self) -> dict[str, int]:
        return feature_lengths(self.max_seq_length, self.max_predictions)


class NoSplit(UserError):
    """An instance folder without files of the split asked for (e.g. built with no eval split)."""


def find_instances(path: str, split: str = "train") -> InstanceFiles:
    """The files of `split` in an instance folder (ours: `{split}-*.tfrecord` + manifest.json), or the
    files a glob / single file names (e.g. the original generator's output, which has no manifest).

    A folder without manifest.json is an unfinished stage (docs/architecture.md) and is refused; so are the files
    of such a folder named through a glob (a glob must not be a way around the manifest)."""
    manifest = None
    foreign = storage.has_glob(path) or storage.isfile(path)
    if foreign:
        files = storage.glob(path)
        if not files:
            raise UserError(f"no TFRecord file matches {path}")
        for folder in sorted({storage.dirname(p) for p in files}):
            _refuse_unfinished(folder)
    else:
        if not storage.isdir(path):
            raise UserError(f"instance folder not found: {path}")
        _refuse_unfinished(path)
        manifest = _instances_manifest(path)
        if manifest is None:
            raise UserError(
                f"{path} has no manifest.json, so it is not a finished `albert instances` folder (for "
                f"TFRecords of another generator, pass a glob such as '{path}/*.tfrecord' and --vocab)"
            )
        files = storage.glob(storage.join(path, f"{split}-*.tfrecord"))
        _check_listed(path, split, files, manifest)
        if not files:
            raise NoSplit(f"{path} has no {split}-*.tfrecord files")
    first = None
    for p in files:
        first = next((r for r, _ in iter_records(p)), None)
        if first is not None:
            break
    if first is None:
        raise UserError(f"the {split} files under {path} hold no records")
    try:
        L, P = infer_lengths(first)
    except RecordError as err:
        raise RecordError(f"{p}: {err}") from None
    vocab = num_instances = vocab_sha = None
    if manifest is not None:
        cfg = manifest.get("config", {})
        mL = cfg.get("packing", {}).get("max_seq_length")
        mP = cfg.get("masking", {}).get("max_predictions")
        if (mL, mP) != (L, P) and mL is not None:
            raise UserError(f"{path}: records have L={L}, P={P} but manifest.json says L={mL}, P={mP}")
        vocab = (manifest.get("vocab") or {}).get("path")
        vocab_sha = (manifest.get("vocab") or {}).get("sha256")
        num_instances = ((manifest.get("summary") or {}).get(split) or {}).get("instances")
        identity = json.dumps(manifest.get("outputs"), sort_keys=True)
    else:
        identity = json.dumps([[storage.basename(p), storage.size(p)] for p in files])
        vocab_sha = _vocab_sha_of_folder(files)
    content_id = hashlib.sha256(identity.encode()).hexdigest()
    return InstanceFiles(tuple(files), L, P, vocab, num_instances, vocab_sha, content_id, path, foreign)


def _instances_manifest(folder: str) -> dict | None:
    """manifest.json of a finished `albert instances` folder; None when there is none; a UserError when
    it is damaged or another stage's."""
    mpath = storage.join(folder, "manifest.json")
    if not storage.isfile(mpath):
        return None
    try:
        manifest = storage.read_json(mpath)
    except ValueError as err:
        raise UserError(
            f"{mpath} is not valid JSON ({err}): the folder is damaged; rerun `albert instances --out {folder}`"
        ) from None
    stage = manifest.get("stage") if isinstance(manifest, dict) else None
    if stage != "instances":
        raise UserError(
            f"{folder} holds the output of `albert {stage}`, not of `albert instances`; pass an instance folder"
        )
    return manifest


def _refuse_unfinished(folder: str) -> None:
    """Refuse a folder that one of our stages started to write and did not finish: its marker
    (core.outdir) names a stage, or the instance stage's stats.json / skipped-* files are there, but
    manifest.json (written last) is not. Its TFRecords are a part of the data, whatever their names."""
    from core import outdir

    entries = storage.listdir(folder)
    if "manifest.json" in entries:
        return
    stage = outdir.owner(folder) if outdir.MARKER in entries else None
    if stage is None and ("stats.json" in entries or any(n.startswith("skipped-") for n in entries)):
        stage = "instances"
    if stage:
        raise UserError(
            f"{folder} is an unfinished `albert {stage}` output (no manifest.json: that run stopped before "
            f"the end, its files are only part of the data); rerun `albert {stage}` with --out {folder}"
        )


def _check_listed(folder: str, split: str, files: list[str], manifest: dict) -> None:
    """The split's files must be those manifest.json lists (a file removed or added since, e.g. a partial
    copy, would silently train on other data)."""
    outputs = manifest.get("outputs")
    if not isinstance(outputs, dict):
        return  # a manifest written before outputs were recorded
    listed = {n for n in outputs if n.startswith(f"{split}-") and n.endswith(".tfrecord")}
    found = {storage.basename(p) for p in files}
    if listed != found:
        missing, extra = sorted(listed - found), sorted(found - listed)
        detail = "; ".join(
            part
            for part in (
                f"missing: {', '.join(missing[:3])}" if missing else "",
                f"not in the manifest: {', '.join(extra[:3])}" if extra else "",
            )
            if part
        )
        raise UserError(
            f"{folder}: the {split} files are not those its manifest.json lists ({detail}); copy the folder "
            f"again, or rerun `albert instances --out {folder}`"
        )


def _vocab_sha_of_folder(files: list[str]) -> str | None:
    """Files named by a glob inside one finished instance folder: that folder's vocabulary hash, so the
    vocabulary a run pairs them with is still checked."""
    folders = {storage.dirname(p) for p in files}
    if len(folders) != 1:
        return None
    try:
        manifest = _instances_manifest(folders.pop())
    except UserError:
        return None
    return ((manifest or {}).get("vocab") or {}).get("sha256")


def check_vocab(data: InstanceFiles, spm_path: str | None, what: str) -> None:
    """Refuse a vocabulary other than the one the instances were built with (manifest.json records its
    sha256). `what` names where `spm_path` comes from ("--vocab", "the checkpoint's spm.model", ...).
    Foreign TFRecords record no vocabulary: nothing to compare."""
    if data.vocab_sha256 is None:
        return
    if spm_path is None:
        raise UserError(
            f"{what} has no spm.model, so it cannot be checked against the vocabulary of {data.source}"
        )
    if not storage.isfile(spm_path):
        raise UserError(f"vocabulary not found: {spm_path}")
    digest = storage.sha256(spm_path)
    if digest != data.vocab_sha256:
        raise UserError(
            f"{what} ({spm_path}, sha256 {digest[:12]}) is not the vocabulary {data.source} was built "
            f"with (sha256 {data.vocab_sha256[:12]} in its manifest.json); use that vocabulary, or "
            f"rebuild the instances with this one"
        )
