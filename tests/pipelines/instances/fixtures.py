"""Instance-stage test helpers: the options of the test runs, a corpus folder from documents, the
invariants of one instance."""

from __future__ import annotations

import gzip
import json
import os

import numpy as np

from core.manifest import write_manifest
from pipelines.instance_builder import InstanceConfig
from pipelines.masking import MaskingConfig
from pipelines.packing import PackingConfig

L, P = 128, 20


CONFIG = InstanceConfig(
    packing=PackingConfig(L), masking=MaskingConfig(max_predictions=P), group_chars=20_000
)


RUNNER = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]


def write_corpus(folder, docs, shards=3):
    os.makedirs(folder, exist_ok=True)
    for k in range(shards):
        with gzip.open(
            os.path.join(folder, f"docs-{k:05d}-of-{shards:05d}.jsonl.gz"), "wt", encoding="utf-8"
        ) as f:
            for d in docs[k::shards]:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
    write_manifest(str(folder), "corpus", counts={"documents": len(docs)})
    return str(folder)


def check_instance(r):
    ids, mask, seg, tb = r["input_ids"], r["input_mask"], r["segment_ids"], r["token_boundary"]
    n = int(mask.sum())
    assert np.all(mask[:n] == 1) and np.all(mask[n:] == 0) and np.all(ids[n:] == 0)
    seps = np.flatnonzero(ids[:n] == 3)
    assert ids[0] == 2 and len(seps) == 2 and seps[1] == n - 1, "[CLS] A [SEP] B [SEP]"
    assert np.all(seg[: seps[0] + 1] == 0) and np.all(seg[seps[0] + 1 : n] == 1) and np.all(seg[n:] == 0)
    assert tb[0] == 1 and tb[seps].all() and np.all(tb[n:] == 0)
    k = int(r["masked_lm_weights"].sum())
    pos = r["masked_lm_positions"][:k]
    assert np.all(r["masked_lm_weights"][:k] == 1.0) and np.all(r["masked_lm_weights"][k:] == 0.0)
    assert np.all(np.diff(pos) > 0) and np.all(pos < n) and not np.isin(pos, [0, *seps]).any()
    assert np.all(r["masked_lm_positions"][k:] == 0) and np.all(r["masked_lm_ids"][k:] == 0)
    assert k <= min(P, max(1, round(n * 0.15)))
    assert r["next_sentence_labels"][0] in (0, 1)
    # whole words: every word (a run from one token_boundary to the next) is masked entirely or not at all
    masked = np.zeros(len(ids), dtype=bool)
    masked[pos] = True
    starts = [i for i in range(1, n) if tb[i]] + [n]
    for a, b in zip(starts[:-1], starts[1:]):
        assert masked[a:b].all() or not masked[a:b].any()
