"""Recording as OneFlow's Coop sweeps ran (record_pytorch.py --harness oneflow): the options the
harness sets, preallocated kept gradients, plain SGD, OneFlow's dropout and fused LSTM cell as ops of
their own (their values checked against PyTorch's), and fake construction of models whose
initialisers read values (torch 2.x's trunc_normal_)."""
import argparse
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from conftest import ROOT, load_trace  # noqa: E402
from coopsim.recording import fused  # noqa: E402
from coopsim.recording.harness import apply_harness  # noqa: E402

RECORDER = os.path.join(ROOT, "scripts", "record_pytorch.py")
needs_custom_ops = pytest.mark.skipif(not fused.available(), reason="torch >= 2.4 (torch.library.custom_op)")


def namespace(**given):
    args = dict(harness=None, iterations=None, optimizer=None, preallocate_grads=None, keep_grads=False,
                granularity=None)
    args.update(given)
    return argparse.Namespace(**args)


def test_harness_fills_only_what_the_command_line_left_unset():
    a = namespace(harness="oneflow")
    apply_harness(a)
    assert (a.iterations, a.optimizer, a.preallocate_grads, a.keep_grads, a.granularity) == \
        (1, "sgd-plain", True, True, "oneflow")
    b = namespace(harness="oneflow", iterations=2, optimizer="sgd", preallocate_grads=False, granularity="pytorch")
    apply_harness(b)
    assert (b.iterations, b.optimizer, b.preallocate_grads, b.keep_grads, b.granularity) == \
        (2, "sgd", False, False, "pytorch")
    c = namespace()
    apply_harness(c)
    assert (c.iterations, c.optimizer, c.preallocate_grads, c.keep_grads, c.granularity) == \
        (2, None, False, False, "pytorch")


def record_cli(tmp_path, *options):
    out = tmp_path / "t.jsonl"
    proc = subprocess.run([sys.executable, RECORDER, "--fake", "--device-profile", "a100", "--quiet", "-o", str(out),
                           *options], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return load_trace(str(out))


def test_oneflow_harness_trace(tmp_path):
    if not fused.available():
        pytest.skip("torch >= 2.4 (torch.library.custom_op)")
    header, records = record_cli(tmp_path, "--model", "mlp-tiny", "--batch", "64", "--harness", "oneflow")
    src = header["source"]
    assert header["iterations"] == 1
    assert (src["optimizer"], src["preallocate_grads"], src["set_to_none"], src["harness"], src["granularity"]) == \
        ("sgd-plain", True, False, "oneflow", "oneflow")
    tensors = {r["id"]: r for r in records if r["kind"] == "tensor"}
    roles = {}
    for t in tensors.values():
        roles.setdefault(t["role"], []).append(t["id"])
    assert "optimizer_state" not in roles  # SGD without momentum keeps no state
    params = [t for t in roles["parameter"] if "." in tensors[t]["name"] and tensors[t]["bytes"] > 0]
    grads = {t for t in roles["gradient"] if tensors[t]["name"].endswith(".grad")}
    assert len(grads) == len(params) == 4
    allocs = [r["tensor"] for r in records if r["kind"] == "alloc"]
    first_input = min(allocs.index(t) for t in roles["input"])
    assert all(allocs.index(g) < first_input for g in grads)  # zeroed before the first forward
    freed = {r["tensor"] for r in records if r["kind"] == "free"}
    assert not grads & freed  # and kept
    ops = {r["id"]: r for r in records if r["kind"] == "op"}
    names = {o["name"]: o for o in ops.values()}
    assert "aten::native_dropout" not in names
    assert names["coopsim::random_mask_like"].get("random") is True
    assert not names["coopsim::dropout"].get("random", False)  # recomputable from x and the mask
    assert "coopsim::dropout_grad" in names


def test_without_the_harness_dropout_is_one_random_op(tmp_path):
    header, records = record_cli(tmp_path, "--model", "mlp-tiny", "--batch", "64", "--iterations", "1")
    names = {r["name"]: r for r in records if r["kind"] == "op"}
    assert names["aten::native_dropout"].get("random") is True
    assert header["source"]["granularity"] == "pytorch"
    assert header["source"]["preallocate_grads"] is False


@needs_custom_ops
def test_oneflow_dropout_values_and_gradient():
    torch.manual_seed(3)
    x = torch.randn(64, 32, requires_grad=True)
    y = fused.oneflow_dropout(x, p=0.25)
    kept = y != 0
    assert torch.allclose(y[kept], x[kept] / 0.75)
    y.sum().backward()
    assert torch.allclose(x.grad, kept.float() / 0.75)
    assert fused.oneflow_dropout(x, p=0.25, training=False) is x


@needs_custom_ops
def test_fused_lstm_cell_matches_torch():
    torch.manual_seed(0)
    cell = nn.LSTMCell(5, 7)
    x, h, c = torch.randn(3, 5, requires_grad=True), torch.randn(3, 7), torch.randn(3, 7, requires_grad=True)
    h_ref, c_ref = cell(x, (h, c))
    (h_ref.sum() + 2 * c_ref.sum()).backward()
    ref = [t.grad.clone() for t in (x, c, cell.weight_ih, cell.bias_hh)]
    for t in (x, c, cell.weight_ih, cell.bias_hh):
        t.grad = None
    hy, cy, _ = fused.fused_lstm_cell(torch.mm(x, cell.weight_ih.t()), torch.mm(h, cell.weight_hh.t()), c,
                                      cell.bias_ih, cell.bias_hh)
    assert torch.allclose(hy, h_ref, atol=1e-6) and torch.allclose(cy, c_ref, atol=1e-6)
    (hy.sum() + 2 * cy.sum()).backward()
    for got, want in zip((x.grad, c.grad, cell.weight_ih.grad, cell.bias_hh.grad), ref):
        assert torch.allclose(got, want, atol=1e-5)


@needs_custom_ops
def test_fused_bilstm_records_one_cell_op_per_step(tmp_path):
    _, records = record_cli(tmp_path, "--model", "bilstm_fused", "--batch", "8", "--iterations", "1")
    ops = {r["id"]: r["name"] for r in records if r["kind"] == "op"}
    runs = [ops[r["op"]] for r in records if r["kind"] == "compute"]
    # 128 steps x 2 directions, forward and backward
    assert runs.count("coopsim::fused_lstm_cell") == 256
    assert runs.count("coopsim::fused_lstm_cell_grad") == 256
    assert not any("lstm" in n and not n.startswith("coopsim::") for n in runs)


class TruncInit(nn.Module):
    """An initialiser that reads values under torch 2.x (nn.init.trunc_normal_ calls .item())."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)
        nn.init.trunc_normal_(self.lin.weight, std=0.02)

    def forward(self, x):
        return self.lin(x)


def test_fake_recording_of_a_model_whose_initialiser_reads_values(tmp_path):
    import coopsim
    path = coopsim.record(TruncInit, lambda dev: {"x": torch.randn(4, 16, device=dev)},
                          lambda m, b: m(b["x"]).sum(), "sgd", iterations=1, fake=True,
                          output=tmp_path / "t.jsonl")
    _, records = load_trace(path)
    params = {r["name"]: r["bytes"] for r in records if r["kind"] == "tensor" and r["role"] == "parameter"}
    assert (params["lin.weight"], params["lin.bias"]) == (1024, 64)
