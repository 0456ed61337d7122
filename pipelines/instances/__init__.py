"""The instance stage: documents -> ALBERT pretraining TFRecords (`albert instances`).

Modules: options (InstancesOptions, the InstanceConfig they describe), grouping (documents -> groups,
long documents cut at the cap), pipeline (the Beam transforms),
accounting (the checks a run must pass before it is published), stage (inputs, the run, the
manifest), cli. The per-document work (normalise, tokenize, pack, mask, encode) is
pipelines.instance_builder's; this package reads, groups, calls it, and writes.
"""

from pipelines.instances.accounting import check_accounting
from pipelines.instances.options import InstancesOptions
from pipelines.instances.pipeline import CreateInstances, ReadGroups
from pipelines.instances.stage import beam_flags, resolve_inputs, run_instances, run_pipeline

__all__ = [
    "CreateInstances",
    "InstancesOptions",
    "ReadGroups",
    "beam_flags",
    "check_accounting",
    "resolve_inputs",
    "run_instances",
    "run_pipeline",
]
