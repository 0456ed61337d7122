"""Trust in the registry, through the real `albert promote` command: it never points production at
nothing, never gates against a damaged or foreign-vocabulary model, names CLI options in what it
says, checks every argument before Prefect starts, and leaves files a team can share (the umask).

One tiny run (2 steps) is trained once for the module; registries are seeded with copies of its
checkpoint through promotion.registry, then the command runs in a subprocess (tests/cli.py); variants of
a case already seen in a subprocess run through flows.cli.main in this process (seconds faster).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import stat

import pytest

from core.errors import UserError
from promotion.registry import BrokenVersion, Registry
from tests.cli import Result, albert, flip_bit, tree, truncate
from tests.model import train_fixtures
from tests.model.train_fixtures import cli_args, perturbed_copy

# The training tests' session fixtures (a small instance set with its manifest, a tiny model config).
instances_dir = train_fixtures.instances_dir
model_config_file = train_fixtures.model_config_file


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, instances_dir, model_config_file) -> str:
    from flows.cli import main

    out = str(tmp_path_factory.mktemp("run") / "r")
    assert main(cli_args(instances_dir, out, model_config_file, "--steps", "2", "--save-every", "2")) == 0
    return out


@pytest.fixture(scope="module")
def ckpt(run_dir) -> str:
    return os.path.join(run_dir, "checkpoints", "step-2")


def api_env() -> dict:
    """The session's Prefect test server (tests/flows/conftest.py), for the promote flow's subprocess."""
    from prefect.settings import PREFECT_API_URL

    return {"PREFECT_API_URL": PREFECT_API_URL.value()}


def seed(root: str, ckpt: str, n: int = 2) -> Registry:
    """A registry with v1..vn (copies of `ckpt`), each promoted in turn: production vn, previous v1..."""
    reg = Registry(root)
    for i in range(n):
        v = reg.register(ckpt, {"mlm_loss": 9.0 - i}, {"note": "seeded by the test"})
        reg.set_production(v, reg.read_pointer()[1])
    return reg


def only_line(r) -> str:
    """The one `albert promote: ...` line, and nothing else on stderr: no Prefect log, no traceback."""
    lines = [line for line in r.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("albert promote: "), r.err[-3000:]
    assert "Flow run" not in r.err and "prefect" not in r.err.lower(), r.err[-3000:]
    return lines[0]


def _main(capfd, *args: str) -> Result:
    """`albert ARGS` through flows.cli.main in this process (stdout and stderr captured at the fd)."""
    from flows.cli import main

    capfd.readouterr()
    code = main(list(args))
    out, err = capfd.readouterr()
    return Result(args, code, out, err)


def pointer_file(root: str) -> str:
    return os.path.join(root, "albert", "production.json")


# ------------------------------------------------------------- case 9: the registry never points at nothing


def test_rollback_to_a_deleted_version_is_refused_and_production_stays(tmp_path, ckpt):
    root = str(tmp_path / "reg")
    seed(root, ckpt)
    shutil.rmtree(os.path.join(root, "albert", "v1"))  # pruned by hand
    before = tree(root)

    r = albert("promote", "--registry", root, "--rollback")
    r.fails(
        2, "cannot roll back albert to v1", "v1 does not exist", "production stays v2", "--set-production"
    )
    assert tree(root) == before
    assert Registry(root).production()["version"] == "v2"


def test_rollback_to_a_version_with_a_flipped_bit_is_refused(tmp_path, ckpt):
    root = str(tmp_path / "reg")
    seed(root, ckpt)
    flip_bit(os.path.join(root, "albert", "v1", "model.safetensors"))
    before = tree(root)

    r = albert("promote", "--registry", root, "--rollback")
    r.fails(2, "v1", "model.safetensors does not match its sha256 in lineage.json", "production stays v2")
    assert tree(root) == before


def test_promote_against_a_deleted_production_is_refused_and_rollback_repairs_it(
    tmp_path, ckpt, instances_dir
):
    root = str(tmp_path / "reg")
    seed(root, ckpt)
    shutil.rmtree(os.path.join(root, "albert", "v2"))
    before = tree(root)

    r = albert(
        "promote", "--candidate", ckpt, "--registry", root, "--instances", instances_dir, env=api_env()
    )
    line = only_line(r)
    r.fails(2, "production of albert is v2", "v2 does not exist", "--rollback", "--set-production")
    assert f"albert promote --registry {root} --rollback" in line
    assert tree(root) == before and not os.path.exists(tmp_path / "evals")  # nothing was evaluated

    albert("promote", "--registry", root, "--rollback").ok()  # the repair the message names
    assert Registry(root).production()["version"] == "v1"


def test_promote_against_a_damaged_production_is_refused(tmp_path, ckpt, instances_dir):
    root = str(tmp_path / "reg")
    seed(root, ckpt, n=1)
    truncate(os.path.join(root, "albert", "v1", "config.json"))
    before = tree(root)

    r = albert(
        "promote", "--candidate", ckpt, "--registry", root, "--instances", instances_dir, env=api_env()
    )
    only_line(r)
    r.fails(2, "production of albert is v1", "config.json does not match its sha256", "--set-production")
    assert tree(root) == before


BROKEN_POINTERS = {
    "not JSON": (b'{"version": "v2", "previ', "is not valid JSON"),
    "empty": (b"", "is not valid JSON"),
    "not UTF-8": (b"\xff\xfe{}", "is not valid JSON"),
    "a list": (b'["v2"]', "is not a JSON object"),
    "no version": (b'{"previous": ["v1"]}', 'has no valid "version"'),
    "bad version": (b'{"version": "latest"}', 'has no valid "version"'),
    "bad previous": (b'{"version": "v2", "previous": "v1"}', 'has an invalid "previous"'),
}


def test_every_kind_of_broken_production_json_is_one_line_with_the_repair(tmp_path, ckpt):
    root = str(tmp_path / "reg")
    reg = seed(root, ckpt)
    for name, (content, problem) in BROKEN_POINTERS.items():
        with open(pointer_file(root), "wb") as f:
            f.write(content)
        for read in (reg.production, reg.rollback):
            with pytest.raises(UserError) as err:
                read()
            line = str(err.value)
            assert "\n" not in line and "production.json " + problem in line, (name, line)
            assert f"albert promote --registry {root} --set-production VERSION` (registered: v1, v2)" in line
        reg.restore("v1")  # the repair the message names works on every kind of damage
        assert reg.production()["version"] == "v1", name


def test_a_broken_production_json_through_the_cli(tmp_path, ckpt, instances_dir):
    root = str(tmp_path / "reg")
    seed(root, ckpt)
    with open(pointer_file(root), "wb") as f:
        f.write(BROKEN_POINTERS["not JSON"][0])  # a torn write
    before = tree(root)

    for args in (("--rollback",), ("--candidate", ckpt, "--instances", instances_dir)):
        r = albert("promote", "--registry", root, *args, env=api_env())
        only_line(r)
        r.fails(2, "production.json is not valid JSON", "--set-production VERSION", "registered: v1, v2")
        assert tree(root) == before

    # the repair the message names: a verified version becomes production again
    r = albert("promote", "--registry", root, "--set-production", "v2", "--reason", "repair").ok()
    assert "production is v2 (was a damaged production.json)" in r.out
    reg = Registry(root)
    assert reg.production()["version"] == "v2" and reg.production()["previous"] == []
    assert reg.log()[-1]["event"] == "set-production" and reg.log()[-1]["reason"] == "repair"


def test_a_broken_production_json_with_no_version_left_says_to_promote_again(tmp_path):
    root = str(tmp_path / "reg")
    os.makedirs(os.path.join(root, "albert"))
    with open(pointer_file(root), "w") as f:
        f.write("{")
    r = albert("promote", "--registry", root, "--rollback")
    r.fails(
        2, "production.json is not valid JSON", "no registered version is left", "promote a candidate again"
    )


def test_set_production_refuses_a_missing_or_damaged_version(tmp_path, ckpt):
    root = str(tmp_path / "reg")
    seed(root, ckpt, n=3)
    shutil.rmtree(os.path.join(root, "albert", "v1"))
    flip_bit(os.path.join(root, "albert", "v2", "spm.model"))
    os.remove(os.path.join(root, "albert", "v3", "metrics.json"))
    before = tree(root)
    albert("promote", "--registry", root, "--set-production", "v1").fails(2, "v1 does not exist")
    albert("promote", "--registry", root, "--set-production", "latest").fails(
        2, "'latest' is not a version name (v<N>); registered: v2, v3"
    )
    reg = Registry(root)
    for version, problem in (
        ("v2", "spm.model does not match its sha256"),
        ("v3", "metrics.json is missing or not valid JSON"),
        ("v9", "v9 does not exist"),
    ):
        with pytest.raises(BrokenVersion, match=problem):
            reg.restore(version)
    assert tree(root) == before


def test_set_production_jumps_back_and_rollback_returns(tmp_path, ckpt, capfd):
    root = str(tmp_path / "reg")
    seed(root, ckpt, n=3)
    r = _main(capfd, "promote", "--registry", root, "--set-production", "v1").ok()
    assert "production is v1 (was v3)" in r.out
    reg = Registry(root)
    assert reg.production()["version"] == "v1" and reg.production()["previous"] == ["v1", "v2", "v3"]
    r = _main(capfd, "promote", "--registry", root, "--rollback").ok()
    assert "production is v3 again (was v1)" in r.out
    assert [e["event"] for e in reg.log()] == ["set-production", "rollback"]


def test_rollback_with_no_previous_or_no_production(tmp_path, ckpt, capfd):
    root = str(tmp_path / "reg")
    albert("promote", "--registry", root, "--rollback").fails(2, "no production model to roll back")
    assert not os.path.exists(root)  # a rollback of nothing creates nothing
    seed(root, ckpt, n=1)
    _main(capfd, "promote", "--registry", root, "--rollback").fails(2, "v1 is the first production version")


# ------------------------------------------------------------------- the log: a torn last line


def test_a_torn_last_line_of_the_log_stays_apart_from_the_next_entry(tmp_path, ckpt):
    root = str(tmp_path / "reg")
    reg = seed(root, ckpt)
    log = os.path.join(root, "albert", "promotions.jsonl")
    with open(log, "ab") as f:
        f.write(b'{"event": "promote", "vers')  # a writer died mid-line
    albert("promote", "--registry", root, "--rollback", "--reason", "after a crash").ok()

    lines = open(log, encoding="utf-8").read().splitlines()
    assert lines[-2] == '{"event": "promote", "vers'
    assert json.loads(lines[-1])["event"] == "rollback"  # whole, on a line of its own
    assert [e["event"] for e in reg.log()] == ["rollback"]  # the torn line is skipped, not fatal


# ---------------------------------------------- case 11/12/1: arguments checked before Prefect starts


def _bad_arguments(tmp_path, ckpt, instances_dir) -> dict:
    """{id: (extra args replacing the defaults, fragments of the one-line message)}."""
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    incomplete = tmp_path / "incomplete"
    shutil.copytree(ckpt, incomplete)
    os.remove(incomplete / "model.safetensors")
    os.remove(incomplete / "checksums.json")
    flipped = tmp_path / "flipped"
    shutil.copytree(ckpt, flipped)
    flip_bit(str(flipped / "model.safetensors"))
    no_spm = tmp_path / "no-spm"
    shutil.copytree(ckpt, no_spm)
    os.remove(no_spm / "spm.model")
    os.remove(no_spm / "checksums.json")
    lonely = tmp_path / "lonely"  # a checkpoint outside its run folder: names no eval set
    shutil.copytree(ckpt, lonely)
    no_manifest = tmp_path / "no-manifest"
    shutil.copytree(instances_dir, no_manifest)
    os.remove(no_manifest / "manifest.json")
    other_vocab = tmp_path / "other-vocab"
    shutil.copytree(instances_dir, other_vocab)
    manifest = json.loads((other_vocab / "manifest.json").read_text())
    manifest["vocab"]["sha256"] = "0" * 64  # built with another vocabulary
    (other_vocab / "manifest.json").write_text(json.dumps(manifest))
    return {
        "candidate missing": (
            {"--candidate": str(tmp_path / "nope")},
            ["--candidate", "no such checkpoint folder"],
        ),
        "candidate a file": ({"--candidate": str(a_file)}, ["--candidate", "is a file"]),
        "candidate incomplete": (
            {"--candidate": str(incomplete)},
            ["--candidate", "model.safetensors is missing"],
        ),
        "candidate flipped bit": (
            {"--candidate": str(flipped)},
            ["--candidate", "model.safetensors does not match its sha256"],
        ),
        "candidate without spm": ({"--candidate": str(no_spm)}, ["has no spm.model", "pass --spm-model"]),
        "spm-model missing": (
            {"--candidate": str(no_spm), "--spm-model": str(tmp_path / "nope.model")},
            ["--spm-model", "no such file"],
        ),
        "no eval set": (
            {"--candidate": str(lonely), "--instances": None},
            ["no eval set", "pass --instances"],
        ),
        "instances missing": (
            {"--instances": str(tmp_path / "nope")},
            ["--instances", "no such instances folder"],
        ),
        "instances without manifest": (
            {"--instances": str(no_manifest)},
            ["--instances", "has no manifest.json"],
        ),
        "vocabulary mismatch": (
            {"--instances": str(other_vocab)},
            ["--candidate's spm.model", "not the vocabulary"],
        ),
        "registry a file": ({"--registry": str(a_file)}, ["--registry", "is a file"]),
        "registry under a file": (
            {"--registry": str(a_file / "reg")},
            ["--registry", "cannot be created", "a-file"],
        ),
        "registry another stage's": (
            {"--registry": instances_dir},
            ["--registry", "output of `albert instances`"],
        ),
        "model name": ({"--model": "my model"}, ["--model", "'my model'"]),
        "min-improvement": ({"--min-improvement": "-0.1"}, ["--min-improvement must be >= 0"]),
        "max-regression": ({"--max-regression": "1.5"}, ["--max-regression must be in [0, 1)"]),
        "alpha": ({"--alpha": "0.7"}, ["--alpha must be in (0, 0.5)"]),
        "alpha nan": ({"--alpha": "nan"}, ["--alpha must be in (0, 0.5)", "nan"]),
        "max-batches": ({"--max-batches": "0"}, ["--max-batches must be at least 1"]),
    }


BAD = [
    "candidate missing", "candidate a file", "candidate incomplete", "candidate flipped bit",
    "candidate without spm", "spm-model missing", "no eval set", "instances missing",
    "instances without manifest", "vocabulary mismatch", "registry a file", "registry under a file",
    "registry another stage's", "model name", "min-improvement", "max-regression", "alpha", "alpha nan",
    "max-batches",
]  # fmt: skip


# Every case runs through flows.cli.main in this process (the same code, seconds faster: a subprocess
# imports Prefect and torch before it checks anything); these also run as real subprocesses.
THROUGH_A_SUBPROCESS = {"candidate flipped bit", "no eval set", "vocabulary mismatch"}


def test_every_bad_argument_is_one_line_before_prefect_starts(tmp_path, ckpt, instances_dir, capfd):
    cases = _bad_arguments(tmp_path, ckpt, instances_dir)
    assert sorted(cases) == sorted(BAD)
    root = str(tmp_path / "reg")
    base = {"--candidate": ckpt, "--registry": root, "--instances": instances_dir}
    before = tree(str(tmp_path))
    failures = []
    for name in BAD:
        changes, fragments = cases[name]
        options = {**base, **changes}
        args = ["promote", *(x for k, v in options.items() if v is not None for x in (k, v))]
        runs = [_main(capfd, *args)]
        if name in THROUGH_A_SUBPROCESS:
            runs.append(albert(*args, env=api_env()))
        for r in runs:
            try:
                only_line(r)
                line = r.fails(2, *fragments)
                assert "instances_dir" not in line and "model_name" not in line, line  # CLI names only
            except AssertionError as err:
                failures.append(f"{name}: {err}")
    assert not failures, "\n\n".join(failures)
    assert tree(str(tmp_path)) == before and not os.path.exists(root)  # nothing written anywhere


def test_production_of_another_vocabulary_is_refused(tmp_path, ckpt, instances_dir):
    """Evaluating production on instances of another vocabulary compares garbage: refused."""
    other = tmp_path / "other"
    shutil.copytree(ckpt, other)
    (other / "spm.model").write_bytes(b"another vocabulary")
    root = str(tmp_path / "reg")
    seed(root, str(other), n=1)
    before = tree(root)
    r = albert(
        "promote", "--candidate", ckpt, "--registry", root, "--instances", instances_dir, env=api_env()
    )
    only_line(r)
    r.fails(2, "production v1 of albert has another vocabulary", "under another --model")
    assert tree(root) == before


def test_the_flow_itself_refuses_before_evaluating_and_names_its_parameters(tmp_path, ckpt, instances_dir):
    """Deployments call the flow directly: the same checks, with the flow's parameter names."""
    from flows.promote import promote

    other_vocab = tmp_path / "other-vocab"
    shutil.copytree(instances_dir, other_vocab)
    manifest = json.loads((other_vocab / "manifest.json").read_text())
    manifest["vocab"]["sha256"] = "0" * 64
    (other_vocab / "manifest.json").write_text(json.dumps(manifest))
    lonely = tmp_path / "lonely"
    shutil.copytree(ckpt, lonely)
    root = str(tmp_path / "reg")

    with pytest.raises(UserError, match="candidate's spm.model .* is not the vocabulary"):
        promote(candidate=ckpt, registry=root, instances_dir=str(other_vocab))
    with pytest.raises(UserError, match="no eval set: pass instances_dir"):
        promote(candidate=str(lonely), registry=root)
    with pytest.raises(UserError, match="alpha must be in"):
        promote(candidate=ckpt, registry=root, instances_dir=instances_dir, alpha=math.inf)
    assert not os.path.exists(root) and not os.path.exists(tmp_path / "evals")


def test_inputs_are_checked_once_per_promotion(tmp_path, ckpt, instances_dir, capfd, monkeypatch):
    """The command checks before Prefect starts and hands what it checked to the flow it runs (the
    checksums of the candidate and of production are not verified twice); a flow run on its own
    (a deployment's) checks inside the flow."""
    import flows.promote

    calls = []
    check_inputs = flows.promote.check_inputs
    monkeypatch.setattr(
        flows.promote, "check_inputs", lambda *a, **k: calls.append(1) or check_inputs(*a, **k)
    )
    root = str(tmp_path / "reg")
    args = ("--candidate", ckpt, "--registry", root, "--instances", instances_dir)
    r = _main(capfd, "promote", *args)
    assert r.code in (0, 1) and '"event": ' in r.out, r.err[-3000:]
    assert len(calls) == 1
    flows.promote.promote(candidate=ckpt, registry=root, instances_dir=instances_dir)
    assert len(calls) == 2
    assert [e["candidate"] for e in Registry(root).log()] == [ckpt, ckpt]


def test_a_run_folder_candidate_finds_its_eval_set_in_train_config(tmp_path, run_dir):
    """`albert pretrain` writes train_config.json, not a manifest: the eval set comes from there, and a
    run folder stands for its newest checkpoint. The 2-step model does not beat the baselines: exit 1."""
    root = str(tmp_path / "reg")
    r = albert("promote", "--candidate", run_dir, "--registry", root, env=api_env())
    assert r.code == 1 and '"event": "reject"' in r.out, r.err[-3000:]
    assert "Traceback" not in r.err
    entry = Registry(root).log()[-1]
    assert entry["event"] == "reject" and entry["candidate"].endswith("checkpoints/step-2")


# ------------------------------------------------------------------------- case 10: the umask


def _modes(folder: str, umask: int) -> dict[str, tuple[int, int]]:
    """{path: (mode, expected mode)} of every file and folder under `folder`, the folder included."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name, full in (
            [(".", 0o777)] * (root == folder) + [(d, 0o777) for d in dirs] + [(f, 0o666) for f in files]
        ):
            path = os.path.normpath(os.path.join(root, name))
            out[os.path.relpath(path, os.path.dirname(folder))] = (
                stat.S_IMODE(os.stat(path).st_mode),
                full & ~umask,
            )
    return out


@pytest.mark.parametrize("umask", [0o022, pytest.param(0o077, marks=pytest.mark.slow)], ids=["022", "077"])
def test_exported_and_registry_files_follow_the_umask(tmp_path, ckpt, instances_dir, umask):
    root, export = str(tmp_path / "reg"), str(tmp_path / "hf")
    old = os.umask(umask)  # the subprocesses inherit it
    try:
        reg = Registry(root)
        v1 = reg.register(perturbed_copy(ckpt, str(tmp_path / "worse")), {"mlm_loss": 99.0}, {})
        reg.set_production(v1, None)
        r = albert(
            "promote", "--candidate", ckpt, "--registry", root, "--instances", instances_dir,
            "--max-regression", "0.5", env=api_env(),
        )  # fmt: skip
        assert r.code == 0 and '"event": "promote"' in r.out, r.err[-3000:]
        albert("export", "--checkpoint", ckpt, "--format", "hf", "--out", export).ok()
    finally:
        os.umask(old)
    modes = {**_modes(root, umask), **_modes(export, umask)}
    for name in ("reg/albert/production.json", "reg/albert/v2/lineage.json", "reg/albert/v2/metrics.json",
                 "reg/albert/promotions.jsonl", "hf/model.safetensors", "hf/config.json"):  # fmt: skip
        assert name in modes
    wrong = {name: (oct(mode), oct(want)) for name, (mode, want) in modes.items() if mode != want}
    assert not wrong, f"umask {oct(umask)}: (mode, expected) {wrong}"


# ------------------------------------------------------------------------------- on a bucket


def test_a_gs_registry_refuses_a_rollback_to_a_deleted_version(bucket, tmp_path, ckpt):
    from core import storage

    root = f"{bucket}/registry"
    seed(root, ckpt)
    storage.remove(f"{root}/albert/v1", recursive=True)
    r = albert("promote", "--registry", root, "--rollback")
    r.fails(2, "cannot roll back albert to v1", "does not exist", "production stays v2")
    assert Registry(root).production()["version"] == "v2"
    albert("promote", "--registry", "gs://no-such-bucket-here/registry", "--rollback").fails(
        2, "--registry", "bucket no-such-bucket-here does not exist"
    )


# ---------------------------------------------------------------- registry units (no subprocess)


def test_register_refuses_a_candidate_that_changed_after_its_evaluation(tmp_path, ckpt):
    reg = Registry(str(tmp_path / "reg"))
    with pytest.raises(UserError, match="changed after it was evaluated"):
        reg.register(ckpt, {}, {}, expected_sha256={"model.safetensors": "0" * 64})
    assert reg.versions() == [] and not os.path.exists(tmp_path / "reg" / "albert")


def test_a_copy_torn_during_registration_never_becomes_production(tmp_path, ckpt, monkeypatch):
    reg = Registry(str(tmp_path / "reg"))
    put = reg.store.put_file

    def torn(src, path):
        put(src, path)
        if path.endswith("model.safetensors"):
            truncate(reg.store.url(path))

    monkeypatch.setattr(reg.store, "put_file", torn)
    v = reg.register(ckpt, {}, {})
    with pytest.raises(BrokenVersion, match="model.safetensors does not match"):
        reg.set_production(v, None)
    assert reg.production() is None


@pytest.mark.slow
def test_a_promotion_while_another_holds_the_registry_is_refused_and_a_killed_one_is_taken_over(
    tmp_path, ckpt, instances_dir
):
    """`albert promote` while another process holds the model's lock in the registry (a promotion
    holds it from its first checks to its end, evaluations included) is refused in one line naming
    it (exit 2) and registers nothing; once that process is killed with SIGKILL, the same command takes
    the lock over and promotes. Promoters that do not lock still meet the pointer's compare-and-swap
    (tests/promotion/test_registry.py: one winner, the others conflicts)."""
    from core import lock
    from tests.lock_holder import hold, kill9

    root = str(tmp_path / "reg")
    reg = Registry(root)
    reg.set_production(
        reg.register(perturbed_copy(ckpt, str(tmp_path / "worse")), {"mlm_loss": 99.0}, {}), None
    )
    cand = shutil.copytree(ckpt, str(tmp_path / "cand"))
    args = ["promote", "--candidate", cand, "--registry", root, "--instances", instances_dir]
    holder = hold(os.path.join(root, "albert"), "promote")
    try:
        before = tree(root)
        r = albert(*args, "--max-regression", "0.5", env=api_env())
        r.fails(
            2,
            f"--registry {root} (model albert) is in use by another `albert promote` "
            f"(host {lock.HOST}, pid {holder.pid}, since ",
            "wait for it to finish, or stop it",
        )
        assert tree(root) == before  # nothing registered, nothing logged
    finally:
        kill9(holder)
    r = albert(*args, "--max-regression", "0.5", env=api_env()).ok()
    assert f"taking over the lock of pid {holder.pid} on {lock.HOST} (no longer running)" in r.err
    assert reg.production()["version"] == "v2" and [e["event"] for e in reg.log()] == ["promote"]
    assert not os.path.exists(os.path.join(root, "albert", lock.NAME))  # released when it ended
