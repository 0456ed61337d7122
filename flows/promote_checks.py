"""What a promotion checks before it evaluates anything (`check_inputs`), once per promotion: in
`albert promote` before Prefect starts, or in the promote flow when a deployment runs it. One UserError
line at the first problem, naming the option as the caller's user spells it (promotion.options: `flag`
or `parameter`).

The order: the numbers (the gate's, by GateConfig), the registry and the model name (then locked until
the caller's scope ends), the candidate checkpoint and its checksums, the eval set and its manifest,
the vocabulary that the candidate, the eval set and production share, and production itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core import storage
from core.errors import UserError
from promotion.gate import GateConfig
from promotion.options import Name, PromoteOptions, parameter
from promotion.registry import MODEL_NAME, MODEL_NAME_RULE, Registry


def candidate_instances(candidate: str) -> str | None:
    """The instances folder a candidate was trained on, from its run folder above the checkpoints
    (`<run>/checkpoints/step-N/` -> `<run>/`): the run manifest (the pretrain flow) or
    train_config.json (`albert pretrain`), when there is one."""
    folder = storage.absolute(candidate).rstrip("/")
    for _ in range(3):
        for name in ("manifest.json", "train_config.json"):
            path = storage.join(folder, name)
            try:
                record = storage.read_json(path) if storage.isfile(path) else {}
            except ValueError:
                continue  # a damaged file names nothing; --instances remains
            instances = (
                (record.get("instances") or (record.get("inputs") or {}).get("instances"))
                if isinstance(record, dict)
                else None
            )
            if isinstance(instances, dict):
                instances = instances.get("path") or instances.get("dir")
            if isinstance(instances, str) and instances:
                return instances
        folder = storage.dirname(folder)
    return None


def open_registry(registry: str, model_name: str, name: Name = parameter) -> Registry:
    """The registry, after checking the model name and that the root can hold a registry, locked."""
    if not isinstance(model_name, str) or not MODEL_NAME.fullmatch(model_name):
        raise UserError(f"{name('model_name')} {model_name!r}: {MODEL_NAME_RULE}")
    reg = Registry(storage.absolute(registry), model_name)
    reg.hold(name("registry"))  # locked until the caller's scope ends (the flow, the command)
    return reg


def _check_candidate(name: Name, candidate: str, spm_model: str | None) -> tuple[str, str]:
    """(checkpoint folder, its spm.model): a complete checkpoint whose checksums verify."""
    from model.checkpoint import CHECKSUMS, resolve, verify

    path = storage.absolute(candidate)
    if storage.isfile(path):
        raise UserError(f"{name('candidate')} {candidate} is a file; give a checkpoint folder")
    if not storage.isdir(path):
        raise UserError(f"{name('candidate')} {candidate}: no such checkpoint folder")
    try:
        path = resolve(path)  # a run folder -> its newest checkpoint that verifies
        if storage.exists(storage.join(path, CHECKSUMS)):
            verify(path)  # names the file that fails its checksum
    except UserError as err:
        raise UserError(f"{name('candidate')} {err}") from None
    for file in ("config.json", "model.safetensors"):
        if not storage.isfile(storage.join(path, file)):
            raise UserError(f"{name('candidate')} {path} is not a complete checkpoint: {file} is missing")
    try:
        storage.read_json(storage.join(path, "config.json"))
    except ValueError as err:
        raise UserError(f"{name('candidate')} {path}: config.json is not valid JSON ({err})") from None
    spm = storage.join(path, "spm.model")
    if storage.isfile(spm):
        return path, spm
    if not spm_model:
        raise UserError(
            f"{name('candidate')} {path} has no spm.model: pass {name('spm_model')} (the vocabulary it was trained with)"
        )
    if not storage.isfile(spm_model):
        raise UserError(f"{name('spm_model')} {spm_model}: no such file")
    return path, storage.absolute(spm_model)


@dataclass
class Checked:
    """What `check_inputs` resolved: absolute paths, the gate, the registry and its pointer (the CAS
    base: read before anything is evaluated)."""

    candidate: str
    instances_dir: str
    spm_model: str
    gate: GateConfig
    registry: Registry
    snapshot: tuple[dict | None, Any]

    @property
    def production(self) -> str | None:
        """The production version the candidate faces (None: the first promotion)."""
        pointer = self.snapshot[0]
        return pointer["version"] if pointer else None


def check_inputs(options: PromoteOptions, name: Name = parameter) -> Checked:
    """Everything a promotion can check without evaluating, one UserError line at the first problem."""
    from model.data import check_vocab, find_instances

    gate = options.gate(name)
    options.check_max_batches(name)
    reg = open_registry(options.registry, options.model_name, name)
    candidate, spm = _check_candidate(name, options.candidate, options.spm_model)

    given = options.instances_dir
    instances_dir = given or candidate_instances(candidate)
    if not instances_dir:
        raise UserError(f"no eval set: pass {name('instances_dir')} (the candidate {candidate} names none)")
    instances_dir = storage.absolute(instances_dir)
    if given:
        what, hint = f"{name('instances_dir')} {instances_dir}", ""
    else:
        what, hint = f"the eval set {instances_dir} of the candidate's run", f"; pass {name('instances_dir')}"
    if not storage.isdir(instances_dir):
        raise UserError(f"{what}: no such instances folder{hint}")
    if not storage.isfile(storage.join(instances_dir, "manifest.json")):
        raise UserError(f"{what} has no manifest.json: not a finished `albert instances` output{hint}")
    data = find_instances(instances_dir, "eval")
    check_vocab(data, spm, f"{name('candidate')}'s spm.model")

    snapshot = reg.read_pointer()  # a damaged production.json: one line saying how to repair it
    pointer = snapshot[0]
    if pointer:
        lineage = reg.check_production(pointer)  # missing, pruned or damaged: refused, with the repair
        digest = lineage["files"]["spm.model"]  # just verified against the file
        if data.vocab_sha256 and digest != data.vocab_sha256:
            prod_spm = reg.url(pointer["version"], "spm.model")
            raise UserError(
                f"production {pointer['version']} of {options.model_name} has another vocabulary ({prod_spm}, "
                f"sha256 {digest[:12]}) than the eval set {instances_dir} (sha256 {data.vocab_sha256[:12]}): "
                "the gate compares both models on the same instances; train the candidate on production's "
                f"vocabulary, or register a model of a new vocabulary under another {name('model_name')}"
            )
    return Checked(candidate, instances_dir, spm, gate, reg, snapshot)
