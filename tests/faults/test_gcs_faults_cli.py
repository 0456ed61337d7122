"""`albert corpus` and `albert instances` reading a bucket on a bad day, through the fault proxy
(tests/faults/gcs_proxy.py) in front of the GCS emulator: errors every Nth request, resets, stalls,
an object deleted or overwritten during the run.

What holds: a fault that another attempt fixes is retried and the output is byte-identical to a
clean run's; one that does not (every download of an input reset, a 503 that outlasts the retries,
a read never answered, an input changed after it was hashed) fails the run in ONE line naming the
object and the operation, exit 1, no manifest, no lock left, and the rerun reads the input again
(docs/trust.md, "Inputs read as hashed")."""

from __future__ import annotations

import os

import pytest

from core import storage
from tests.cli import albert, tree
from tests.faults.gcs_proxy import FaultProxy, Rule

BEAM = ("--direct_running_mode", "in_memory", "--direct_num_workers", "1")
FAST = {"ALBERT_STORAGE_BACKOFF": "0.05"}  # retries without the seconds of real backoff
NEWS, TEXT = "in/news.json", "in/text.txt"


@pytest.fixture(scope="module")
def inputs(gcs, sample_docs) -> dict[str, bytes]:
    """150 news2016zh records and 100 text documents the corpus keeps (enough records that one dead
    letter is under the default 1% limit, as a whole file was before)."""
    import json

    docs = [d for d in sample_docs if sum(map(len, d["sentences"])) > 200]
    assert len(docs) >= 100
    news = "".join(
        json.dumps({"news_id": f"n{i}", "title": d["title"], "content": "\n".join(d["sentences"])}) + "\n"
        for i, d in enumerate((docs * 2)[:150])
    )
    text = "".join("\n".join(d["sentences"][::-1]) + "\n\n" for d in docs[:100])
    return {NEWS: news.encode(), TEXT: text.encode()}


@pytest.fixture
def proxy(gcs):
    with FaultProxy(gcs) as running:
        yield running


@pytest.fixture(scope="module")
def inputs_bucket(gcs) -> str:
    """One bucket for the module's inputs, so that the clean corpus is built once (a corpus names its
    inputs, and so its bucket, in what it writes)."""
    import uuid

    from flows.rehearsal.gcs_emulator import create_bucket

    name = f"faults-{uuid.uuid4().hex[:12]}"
    create_bucket(gcs, name)
    return f"gs://{name}"


def write_inputs(bucket: str, inputs: dict[str, bytes]) -> str:
    for name, data in inputs.items():
        storage.write_bytes(f"{bucket}/{name}", data)
    return bucket


@pytest.fixture
def source(inputs_bucket, inputs) -> str:
    """The inputs, written afresh: a test before may have overwritten one."""
    return write_inputs(inputs_bucket, inputs)


def corpus(host: str, bucket: str, out: str, *extra: str, env: dict | None = None):
    """`albert corpus` of the two inputs, reading the bucket through `host` (the proxy's URL, or the
    emulator's own)."""
    return albert(
        "corpus",
        "--source",
        f"news2016zh:{bucket}/{NEWS}",
        "--source",
        f"text:{bucket}/{TEXT}",
        "--out",
        out,
        *BEAM,
        *extra,
        env={"STORAGE_EMULATOR_HOST": host, **FAST, **(env or {})},
        timeout=300,
    )


def outputs(folder: str) -> dict[str, str]:
    """{file: sha256} of what a run published, but its manifest (it records when) and markers."""
    return {n: h for n, h in tree(folder).items() if n != "manifest.json" and not n.startswith(".albert-")}


@pytest.fixture(scope="module")
def clean(gcs, inputs_bucket, inputs, tmp_path_factory) -> dict[str, str]:
    """What a run with no fault publishes: built once, straight from the emulator (no proxy)."""
    out = str(tmp_path_factory.mktemp("clean") / "corpus")
    corpus(gcs, write_inputs(inputs_bucket, inputs), out).ok()
    return outputs(out)


def failed_cleanly(out: str) -> None:
    """No manifest, no shard of documents, no lock: nothing a later stage could take for a corpus."""
    names = os.listdir(out)
    assert "manifest.json" not in names and ".albert-lock" not in names, names
    assert not [n for n in names if n.startswith("docs-")], names


# --- what retries fix: the output is the clean run's --------------------------------------------------


@pytest.mark.parametrize(
    "rule",
    [
        Rule("status", every=7),  # 503 on every 7th request
        Rule("reset", every=5),  # a reset connection on every 5th
        Rule("reset_after", every=6, method="GET"),  # an answer lost on every 6th read
        Rule("stall", path="/download/*", seconds=3, times=3),  # three stalls, over --storage-timeout
    ],
    ids=["503-every-7th", "reset-every-5th", "answer-lost-every-6th", "three-stalls"],
)
def test_faults_that_a_retry_fixes_give_the_clean_output(proxy, source, clean, tmp_path, rule):
    proxy.add(rule)
    out = str(tmp_path / "out")
    corpus(proxy.url, source, out, "--storage-timeout", "1").ok()
    assert rule.fired, "the fault never happened"
    assert outputs(out) == clean


# --- row 1: an input that cannot be read fails the run ----------------------------------------------------


def test_an_input_whose_every_download_is_reset_fails_the_run_in_one_line(proxy, source, clean, tmp_path):
    proxy.add(Rule("reset", path=f"/download/*{NEWS.replace('/', '%2F')}*"))
    out = str(tmp_path / "out")
    r = corpus(proxy.url, source, out)
    r.fails(1, f"reading {source}/{NEWS}", "connection reset", "gave up after 6 attempts", "no manifest")
    failed_cleanly(out)
    proxy.clear()  # the rerun reads it again, and builds what a clean run builds
    rerun = corpus(proxy.url, source, out)
    rerun.ok()
    assert "up to date" not in rerun.err
    assert outputs(out) == clean


def test_an_input_deleted_during_the_run_fails_the_run_in_one_line(proxy, source, tmp_path):
    # GCS answers 404 to a read of an object deleted since its metadata was read (the hashing)
    proxy.add(Rule("status", status=404, path=f"/download/*{TEXT.replace('/', '%2F')}*"))
    out = str(tmp_path / "out")
    r = corpus(proxy.url, source, out)
    r.fails(1, f"reading {source}/{TEXT}", "deleted or replaced after it was hashed", "no manifest")
    failed_cleanly(out)


# --- row 2: the run reads exactly what it hashed -------------------------------------------------------


def test_an_input_overwritten_after_it_was_hashed_is_refused(proxy, source, clean, inputs, tmp_path):
    def overwrite(_method: str, _path: str) -> None:
        storage.write_bytes(f"{source}/{NEWS}", inputs[NEWS][: len(inputs[NEWS]) // 3] + b"\xff changed\n")

    proxy.add(Rule("hook", path=f"/download/*{NEWS.replace('/', '%2F')}*", times=1, hook=overwrite))
    out = str(tmp_path / "out")
    r = corpus(proxy.url, source, out)
    r.fails(1, f"reading {source}/{NEWS}", "replaced after it was hashed", "no manifest")
    failed_cleanly(out)
    # the original back: the rerun builds the clean corpus (it is not "up to date": nothing was published)
    storage.write_bytes(f"{source}/{NEWS}", inputs[NEWS])
    rerun = corpus(proxy.url, source, out)
    rerun.ok()
    assert "up to date" not in rerun.err
    assert outputs(out) == clean
    manifest = storage.read_json(os.path.join(out, "manifest.json"))
    generations = {e["path"]: e["identity"].get("generation") for e in manifest["inputs"]}
    assert generations[f"{source}/{NEWS}"] == str(storage.identity(f"{source}/{NEWS}")["generation"])


# --- row 4: a read never answered ---------------------------------------------------------------------------


def test_a_read_never_answered_gives_up_after_the_configured_attempts(proxy, source, tmp_path):
    proxy.add(Rule("stall", path=f"/download/*{NEWS.replace('/', '%2F')}*"))  # never answered
    out = str(tmp_path / "out")
    r = corpus(proxy.url, source, out, "--storage-timeout", "1", "--storage-retries", "2")
    r.fails(1, f"reading {source}/{NEWS}", "timed out", "gave up after 3 attempts", "--storage-timeout 1")
    assert len(proxy.actions("stall")) == 3
    failed_cleanly(out)


# --- row 5: a request that keeps failing, in one line ---------------------------------------------------------


def test_a_503_that_outlasts_the_retries_is_one_line(proxy, source, tmp_path):
    proxy.add(Rule("status", path=f"*{NEWS.replace('/', '%2F')}*"))
    out = str(tmp_path / "out")
    r = corpus(proxy.url, source, out, "--storage-retries", "3")
    r.fails(1, f"{source}/{NEWS}", "HTTP 503", "gave up after 4 attempts")
    assert not os.path.exists(os.path.join(out, "manifest.json"))


def test_a_lost_answer_to_a_resumable_upload_is_one_line(proxy, tmp_path, bucket, monkeypatch):
    """The last chunk of an upload reaches the store, its answer is lost, every time: one error
    naming the object written, never a traceback of the HTTP library."""
    from core.errors import StorageFailed

    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(6 << 20))  # over gcsfs's 5 MiB: a resumable upload
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.url)
    monkeypatch.setenv("ALBERT_STORAGE_BACKOFF", "0.01")
    proxy.add(Rule("reset_after", method="POST", path="*upload_id=*"))  # gcsfs sends chunks by POST
    with pytest.raises(StorageFailed) as failed:
        storage.copy(str(big), f"{bucket}/out/big.bin")
    assert str(failed.value).startswith(f"writing {bucket}/out/big.bin: ")
    assert proxy.actions("reset_after")


def test_instances_reading_a_reset_input_names_the_read(proxy, source, tmp_path, vocab_dir):
    proxy.add(Rule("reset", path=f"/download/*{TEXT.replace('/', '%2F')}*"))
    out = str(tmp_path / "inst")
    r = albert(
        "instances",
        "--text",
        f"{source}/{TEXT}",
        "--vocab",
        vocab_dir,
        "--out",
        out,
        "--max-seq-length",
        "64",
        "--max-predictions",
        "10",
        env={"STORAGE_EMULATOR_HOST": proxy.url, **FAST},
        timeout=300,
    )
    line = r.fails(1, f"reading {source}/{TEXT}", "connection reset")
    assert "writing" not in line
    assert not [n for n in os.listdir(out) if n == "manifest.json" or n.endswith(".tfrecord")]
