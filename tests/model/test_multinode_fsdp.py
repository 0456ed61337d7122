"""FSDP2's "returned a view tensor ... can produce wrong gradients" warning, in one gloo process: it
comes from mlm_logits, which F.linear returns as a view; nothing changes it in place, so the
gradients of the sharded model are those of the plain one, and model.distributed.shard keeps the
warning out of the logs. (With 2 ranks: tests/model/test_ddp.py, FSDP weights = one process's.)"""

from __future__ import annotations

import copy
import socket
import warnings

import pytest
import torch
import torch.distributed as dist

from model import distributed
from model.albert import AlbertForPreTraining
from tests.model.tiny import tiny_config, toy_batch


@pytest.fixture
def world_of_one():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def view_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if "returned a view tensor" in str(w.message)]


def test_the_fsdp_view_warning_is_mlm_logits_and_the_gradients_are_right(world_of_one):
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    plain = AlbertForPreTraining(tiny_config(classifier_dropout_prob=0.0))  # no dropout: same forward
    sharded, quiet = copy.deepcopy(plain), copy.deepcopy(plain)
    batch = toy_batch()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fully_shard(sharded)  # as torch does it: the warning
        out = sharded(**batch)
        assert view_warnings(caught) and "(FSDPAlbertForPreTraining)" in view_warnings(caught)[0]
        grad_outputs = ("loss", "mlm_loss", "sop_loss", "mlm_logits", "sop_logits")
        views = [name for name in grad_outputs if getattr(out, name)._base is not None]
        assert views == ["mlm_logits"]  # F.linear's view of its (B*P, V) product

        caught.clear()
        distributed.shard(quiet, 1, torch.device("cpu"))  # ours: the same sharding, the warning off
        quiet_out = quiet(**batch)
        assert view_warnings(caught) == []

    expected = plain(**batch)
    for result in (out, quiet_out):
        torch.testing.assert_close(result.loss, expected.loss, rtol=0, atol=0)
        result.loss.backward()
    expected.loss.backward()
    for (name, p), s, q in zip(plain.named_parameters(), sharded.parameters(), quiet.parameters()):
        assert p.grad is not None, name
        torch.testing.assert_close(s.grad.full_tensor(), p.grad, rtol=0, atol=0, msg=name)
        torch.testing.assert_close(q.grad.full_tensor(), p.grad, rtol=0, atol=0, msg=name)
