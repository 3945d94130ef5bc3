"""Recording real architectures on FakeTensors: torchvision's ResNet-18 and the Llama-style 1B decoder
(bf16, with and without per-block activation checkpointing). Every trace passes `coopsim validate`."""
import re

import pytest

torch = pytest.importorskip("torch")

import coopsim  # noqa: E402
from conftest import heavy, load_trace, peak_live  # noqa: E402


def test_resnet18_fake(tmp_path, coopsim_bin):
    torchvision = pytest.importorskip("torchvision")
    F = torch.nn.functional
    path = coopsim.record(lambda: torchvision.models.resnet18(),
                          lambda device: {"images": torch.randn(8, 3, 224, 224, device=device),
                                          "labels": torch.randint(0, 1000, (8,), device=device)},
                          lambda model, b: F.cross_entropy(model(b["images"]), b["labels"]), "sgd",
                          output=tmp_path / "resnet18.jsonl.gz", name="resnet18")
    header, records = load_trace(path)
    assert header["model"] == "resnet18" and header["source"]["fake"] is True
    reference = torchvision.models.resnet18()
    params = sum(p.numel() for p in reference.parameters()) * 4
    by_role = {}
    for r in records:
        if r["kind"] == "tensor":
            by_role[r["role"]] = by_role.get(r["role"], 0) + r["bytes"]
    assert by_role["parameter"] == params and by_role["optimizer_state"] == params  # SGD momentum
    out = coopsim.validate(path, binary=coopsim_bin)
    assert f"({peak_live(records)} bytes)" in out


def record_llama(tmp_path, name, **options):
    spec = coopsim.MODELS["llama_1b"]
    path = coopsim.record(spec.build, lambda device: spec.inputs(spec.batch, device), spec.loss, spec.optimizer,
                          iterations=1, amp="bf16", output=tmp_path / f"{name}.jsonl.gz", name="llama_1b", **options)
    return path, load_trace(path)


@heavy
def test_llama_1b_bf16_checkpointing(tmp_path, coopsim_bin):
    plain_path, (_, plain) = record_llama(tmp_path, "plain")
    ckpt_path, (header, ckpt) = record_llama(tmp_path, "ckpt", checkpoint=coopsim.MODELS["llama_1b"].blocks)
    assert header["source"]["amp"] == "bf16" and header["source"]["checkpoint"] == [f"layers.{i}" for i in range(16)]
    for path in (plain_path, ckpt_path):
        coopsim.validate(path, binary=coopsim_bin)
    # 1,235,814,400 parameters (Llama 3.2 1B with tied embeddings), float32 master weights
    params = sum(r["bytes"] for r in plain if r["kind"] == "tensor" and r["role"] == "parameter")
    assert params == 1235814400 * 4
    assert peak_live(ckpt) < peak_live(plain)

    def recomputed(records):
        tensors = {r["id"]: r for r in records if r["kind"] == "tensor"}
        ops = {r["id"]: r for r in records if r["kind"] == "op"}
        phase, found = None, []
        for r in records:
            if r["kind"] == "mark":
                phase = r["label"]
            elif r["kind"] == "compute" and phase == "backward":
                found += [(ops[r["op"]]["name"], tensors[o]["name"]) for o in ops[r["op"]].get("outputs", [])
                          if tensors[o]["role"] == "activation" and tensors[o]["bytes"]]
        return found
    assert recomputed(plain) == []
    again = recomputed(ckpt)
    # each block's forward runs again in backward: its 7 projections (mm) and its attention, under the
    # block's module names. torch 1.13 records the attention as one op; 2.x records the ops its CUDA
    # kernel runs (llama.py), whose output is the float32 product with V (an aten::matmul -> bmm)
    fused = torch.__version__.startswith("1.")
    for i in range(16):
        mine = [(op, name) for op, name in again if re.match(rf"layers\.{i}[.:]", name)]
        assert sum(op == "aten::mm" for op, _ in mine) == 7, mine
        if fused:
            assert ("coopsim::flash_attention", f"layers.{i}.self_attn:flash_attention") in mine
        else:
            assert ("coopsim::flash_attention", f"layers.{i}.self_attn:flash_attention") not in mine
            assert sum(op == "aten::bmm" and name.startswith(f"layers.{i}.self_attn:") for op, name in mine) == 2, mine
