"""Instance-stage fixtures: a corpus folder of the sample, and one run over it with gold word boundaries."""

from __future__ import annotations

import pytest

from pipelines.instance_builder import InstanceConfig
from pipelines.instances import run_pipeline
from tests.pipelines.instances.fixtures import CONFIG, RUNNER, write_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, sample_docs):
    return write_corpus(tmp_path_factory.mktemp("corpus"), sample_docs)


@pytest.fixture(scope="module")
def gold_run(tmp_path_factory, corpus, vocab_dir):
    from pipelines.instances import resolve_inputs

    out = str(tmp_path_factory.mktemp("gold"))
    config = InstanceConfig(**{**CONFIG.__dict__, "whole_word": "gold"})
    manifest = run_pipeline(resolve_inputs(None, corpus), vocab_dir, out, config, RUNNER)
    return out, manifest
