"""One measured configuration of `albert bench instances` (benchmarks/instances.py), in a fresh process.

`run_child(spec)` starts `python -m benchmarks.instance_runs SPEC`, which runs the configuration the
JSON `spec` names (kind: ours, core or reference) and prints its figures as one JSON line; the parent
adds the child's peak RSS and the CPU of the whole process (the whole command), read by `os.wait4`,
so every configuration's memory and CPU are its own.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time


def _cpu_seconds() -> float:
    """CPU time of this process and of its waited-for children (Beam workers), user + system."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def _instance_config(spec: dict):
    from pipelines.instance_builder import InstanceConfig
    from pipelines.masking import MaskingConfig
    from pipelines.packing import PackingConfig

    return InstanceConfig(
        packing=PackingConfig(spec["max_seq_length"]),
        masking=MaskingConfig(max_predictions=spec["max_predictions"]),
        whole_word=spec["mode"],
        dupe_factor=spec["dupe_factor"],
    )


def _child_ours(spec: dict) -> dict:
    """`albert instances` itself, as a user runs it (flows.cli.main; its printout goes to stderr).
    The timed region starts after Beam and the stage are imported; the parent adds the whole
    process's CPU (`command_cpu_s`)."""
    import contextlib
    import importlib

    from flows.cli import main as albert

    importlib.import_module("pipelines.instances.cli")  # Beam: imported outside the timed region
    argv = [
        "instances", "--corpus", spec["corpus"], "--vocab", spec["vocab"], "--out", spec["out"],
        "--max-seq-length", str(spec["max_seq_length"]), "--max-predictions", str(spec["max_predictions"]),
        "--dupe-factor", str(spec["dupe_factor"]), "--whole-word", spec["mode"], "--runner=DirectRunner",
    ]  # fmt: skip
    if spec["workers"] == 1:
        argv.append("--direct_running_mode=in_memory")
    else:
        argv += ["--direct_running_mode=multi_processing", f"--direct_num_workers={spec['workers']}"]
    baseline = _own_peak_rss_mb()
    cpu, wall = _cpu_seconds(), time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):
        code = albert(argv)
    cpu, wall = _cpu_seconds() - cpu, time.perf_counter() - wall
    if code != 0:
        raise RuntimeError(f"albert instances exited with {code}")
    with open(os.path.join(spec["out"], "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    counts = [manifest["counts"][s] for s in ("train", "eval") if s in manifest["counts"]]
    return _figures(
        documents=sum(c.get("documents", 0) for c in counts),
        instances=sum(c["instances"] for c in counts),
        real_tokens=sum(c["real_tokens"] for c in counts),
        positions=sum(c["positions"] for c in counts),
        masked=sum(c["masked"] for c in counts),
        cpu_s=cpu,
        wall_s=wall,
        rss_after_imports_mb=baseline,
    )


def _child_core(spec: dict) -> dict:
    """The pipeline's per-group work without Beam: documents are read first (untimed), then grouped
    per input file exactly as `ReadGroups` does (pipelines.instances.grouping), and built for every
    dupe index."""
    from collections import Counter

    from core.tokenizer import Tokenizer
    from pipelines.documents import corpus_files, read_jsonl_documents
    from pipelines.instance_builder import build_group, encode_group, prepare_document
    from pipelines.instances.grouping import Grouper

    config = _instance_config(spec)
    files = [list(read_jsonl_documents(p)) for p in corpus_files(spec["corpus"])]
    tokenizer = Tokenizer.load(spec["vocab"])
    totals = Counter()
    baseline = _own_peak_rss_mb()  # the documents are already in memory here
    cpu, wall = time.process_time(), time.perf_counter()
    for index, docs in enumerate(files):
        grouper, groups = Grouper(index, config), []
        for doc in docs:
            notes = Counter()
            prepared = prepare_document(doc, config.whole_word, notes, tokenizer.normalizer)
            if not isinstance(prepared, str):
                groups += grouper.add(prepared, notes)
        for group in groups + list(grouper.finish()):
            stream = encode_group(group.docs, tokenizer, config.whole_word)
            totals["documents"] += group.documents
            for dupe in range(config.dupe_factor):
                _, stats = build_group(group.docs, tokenizer, config, dupe, stream)
                totals.update({k: stats[k] for k in ("instances", "real_tokens", "positions", "masked")})
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return _figures(**totals, cpu_s=cpu, wall_s=wall, rss_after_imports_mb=baseline)


def _child_reference(spec: dict) -> dict:
    import tensorflow  # noqa: F401  (imported before timing, like Beam for ours)

    from benchmarks.reference_generator import ReferenceConfig, generate, read_text
    from core.tokenizer import Tokenizer

    config = ReferenceConfig(
        max_seq_length=spec["max_seq_length"],
        max_predictions=spec["max_predictions"],
        dupe_factor=spec["dupe_factor"],
        whole_word=spec["mode"],
    )
    baseline = _own_peak_rss_mb()
    cpu, wall = _cpu_seconds(), time.perf_counter()
    tokenizer = Tokenizer.load(spec["vocab"])
    stats = generate(read_text(spec["text"]), tokenizer, spec["out"], config)
    cpu, wall = _cpu_seconds() - cpu, time.perf_counter() - wall
    return _figures(
        **{k: stats[k] for k in ("documents", "instances", "real_tokens", "positions", "masked")},
        cpu_s=cpu,
        wall_s=wall,
        rss_after_imports_mb=baseline,
    )


def _own_peak_rss_mb() -> float:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return round(kb / 2**20 if sys.platform == "darwin" else kb / 1024, 1)


def _figures(
    documents, instances, real_tokens, positions, masked, cpu_s, wall_s, rss_after_imports_mb
) -> dict:
    return {
        "documents": documents,
        "instances": instances,
        "real_tokens": real_tokens,
        "cpu_s": round(cpu_s, 3),
        "tokens_per_cpu_s": round(real_tokens / cpu_s) if cpu_s > 0 else None,
        "wall_s": round(wall_s, 3),
        "fill_rate": round(real_tokens / positions, 4) if positions else 0.0,
        "masked_fraction": round(masked / real_tokens, 4) if real_tokens else 0.0,
        "rss_after_imports_mb": rss_after_imports_mb,
    }


CHILDREN = {"ours": _child_ours, "core": _child_core, "reference": _child_reference}


def run_child(spec: dict) -> dict:
    """Run one measured configuration in a fresh interpreter; add its peak RSS (MB), read by wait4."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    cmd = [sys.executable, "-m", "benchmarks.instance_runs", json.dumps(spec)]
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env, cwd=root)
        out = proc.stdout.read()
        proc.stdout.close()
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, not all children's
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            tail = err.read().decode("utf-8", "replace")[-3000:]
            raise RuntimeError(f"benchmark child {spec['kind']} failed ({proc.returncode}):\n{tail}")
    result = json.loads(out.decode().strip().splitlines()[-1])
    kb = usage.ru_maxrss  # KiB on Linux, bytes on macOS
    result["peak_rss_mb"] = round(kb / 2**20 if sys.platform == "darwin" else kb / 1024, 1)
    # The whole command: interpreter start, imports and the processes it waited for (Beam workers)
    command_cpu_s = usage.ru_utime + usage.ru_stime
    result["command_cpu_s"] = round(command_cpu_s, 3)
    result["command_tokens_per_cpu_s"] = (
        round(result["real_tokens"] / command_cpu_s) if command_cpu_s else None
    )
    return result


if __name__ == "__main__":  # python -m benchmarks.instance_runs SPEC: one JSON line on stdout
    spec = json.loads(sys.argv[1])
    print(json.dumps(CHILDREN[spec["kind"]](spec)), flush=True)
