"""The evaluation sets' index as a file (pipelines/corpus/decontam.py builds it): stage.py writes it
under the run's temporary folder and each worker process reads it once, so that the index does not
travel inside the pickled DoFn.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass

import numpy as np

from core import storage
from pipelines.corpus.decontam import EvalIndex

_ARRAYS = ("hashes", "set_of", "probe_hashes", "short_texts", "short_set_of")


@dataclass(frozen=True)
class IndexFile:
    """Where the index of a run is stored (stage.py writes it under the run's temporary folder), and
    its key. This, not the index, travels with the DoFn: Beam pickles a DoFn and compresses it with
    bz2 (about 5 MB/s), and the ~20 MB of the bundled tasks' hashes do not compress."""

    path: str
    key: str

    def load(self) -> EvalIndex:
        """The index, read once per process."""
        index = _LOADED.get(self.key)
        if index is None:
            index = load_index(self.path)
            _LOADED.clear()
            _LOADED[self.key] = index
        return index


_LOADED: dict[str, EvalIndex] = {}


def save_index(index: EvalIndex, path: str) -> IndexFile:
    """Write the index (numpy .npz, its records as JSON) to `path` (local or gs://)."""
    buf = io.BytesIO()
    meta = {"n": index.n, "min_chars": index.min_chars, "stride": index.stride, "names": list(index.names)}
    meta["records"] = list(index.records)
    np.savez(buf, meta=np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8),
             **{name: getattr(index, name) for name in _ARRAYS})  # fmt: skip
    storage.write_bytes(path, buf.getvalue())
    return IndexFile(path, index.key)


def load_index(path: str) -> EvalIndex:
    with np.load(io.BytesIO(storage.read_bytes(path))) as data:
        meta = json.loads(data["meta"].tobytes().decode("utf-8"))
        arrays = {name: data[name] for name in _ARRAYS}
    return EvalIndex(
        meta["n"],
        meta["min_chars"],
        meta["stride"],
        names=tuple(meta["names"]),
        records=tuple(meta["records"]),
        **arrays,
    )
