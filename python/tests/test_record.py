"""coopsim.record() on small models: exact sizes, mixed precision, checkpointing, accumulation,
zero_grad(set_to_none) and the fake copy of a built module."""
import warnings

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import coopsim  # noqa: E402
from conftest import load_trace, peak_live  # noqa: E402

N, DIMS = 512, (32, 64, 128, 256, 8)  # batch; widths of the 4-layer MLP's input, hidden layers and output


def mlp():
    layers = []
    for i in range(4):
        layers.append(nn.Linear(DIMS[i], DIMS[i + 1]))
        if i < 3:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def batch(device):
    return {"x": torch.randn(N, DIMS[0], device=device)}


def sum_loss(model, data):
    return model(data["x"]).sum()


def plain_sgd(params):
    return torch.optim.SGD(params, lr=0.1)  # no momentum: no optimizer state


def record(tmp_path, name="t", model=mlp, loss=sum_loss, optimizer=plain_sgd, **options):
    path = coopsim.record(model, batch, loss, optimizer, output=tmp_path / f"{name}.jsonl", **options)
    return load_trace(path)


def tensors(records):
    return {r["id"]: r for r in records if r["kind"] == "tensor"}


def ops(records):
    return {r["id"]: r for r in records if r["kind"] == "op"}


def phases(records):
    """Yields (iteration, phase, record) for every event; phase: forward / backward / optimizer."""
    it, phase = -1, "setup"
    for r in records:
        if r["kind"] == "iteration":
            it, phase = r["index"], "forward"
        elif r["kind"] == "mark":
            phase = r["label"]
        yield it, phase, r


def test_mlp_peak_is_the_hand_computed_one(tmp_path, coopsim_bin):
    header, records = record(tmp_path)
    f32 = 4
    params = sum(DIMS[i] * DIMS[i + 1] + DIMS[i + 1] for i in range(4)) * f32
    x, r1, r2, r3 = (N * d * f32 for d in DIMS[:4])
    # The peak is the first op of backward that meets the widest layer twice: ReLU 3's backward
    # (threshold_backward) allocates dh3 (N x 256) while its input gradient dr3 (N x 256, from the last
    # Linear's backward) and its saved output r3 are live, with the input x and the outputs r1, r2 of
    # ReLU 1 and 2 (saved by them and by Linear 2 and 3), the parameters, the scalar loss, and the last
    # Linear's weight and bias gradients (accumulated just before: AccumulateGrad runs first), and the
    # seed gradient ones_like(loss), which torch.autograd.backward holds until it returns. The pre-ReLU
    # outputs were freed in forward, the logits after sum().
    grads4 = (DIMS[3] * DIMS[4] + DIMS[4]) * f32
    # and the cuBLAS library's blocks (fake implies the a100 profile: workspaces.py): a cuBLAS workspace
    # of 4096 KiB * 2 + 16 KiB * 8 for the Python thread (forward) and one for the autograd thread
    # (backward), and the 1 MiB cuBLASLt workspace of the first addmm with a bias
    workspaces = 2 * (4096 * 1024 * 2 + 16 * 1024 * 8) + 1024 * 1024
    expected = params + x + r1 + r2 + 3 * r3 + grads4 + f32 + f32 + workspaces
    assert peak_live(records) == expected
    t = tensors(records)
    assert sorted((r["name"], r["bytes"]) for r in t.values() if r["role"] == "workspace") == [
        ("cublas_workspace[autograd]", 8519680), ("cublas_workspace[main]", 8519680),
        ("cublaslt_workspace[main]", 1048576)]
    assert f"({expected} bytes)" in coopsim.validate(tmp_path / "t.jsonl", binary=coopsim_bin)


def test_bf16_halves_the_activations(tmp_path):
    _, fp32 = record(tmp_path, "fp32")
    _, bf16 = record(tmp_path, "bf16", amp="bf16")

    def forward_outputs(records):
        # bytes of each Linear's and ReLU's output in forward, by name (module path:op)
        t = tensors(records)
        return {t[o]["name"]: t[o]["bytes"] for it, phase, r in phases(records)
                if r["kind"] == "alloc" and it == 1 and phase == "forward"
                for o in [r["tensor"]] if t[o]["name"].split(":")[-1] in ("addmm", "relu")}
    full, half = forward_outputs(fp32), forward_outputs(bf16)
    assert len(full) == 7 and set(full) == set(half)
    assert all(half[k] * 2 == full[k] for k in full), (full, half)
    # the master weights stay float32: the parameters are the same size under amp
    sizes = [sorted(t["bytes"] for t in tensors(r).values() if t["role"] == "parameter" and t["bytes"])
             for r in (fp32, bf16)]
    assert sizes[0] == sizes[1]


def test_autocast_casts_the_last_argument_first(tmp_path):
    """CUDA autocast casts an op's arguments right to left (amp._cast_right_to_left): each Linear's
    weight, then its input. The first layer's casts in the first forward: the weight (DIMS[1] x
    DIMS[0]) and the bias before the batch (N x DIMS[0])."""
    _, bf16 = record(tmp_path, "bf16", amp="bf16")
    t = tensors(bf16)
    casts = [t[r["tensor"]]["bytes"] for it, phase, r in phases(bf16)
             if r["kind"] == "alloc" and it == 0 and phase == "forward" and t[r["tensor"]]["name"].endswith("_to_copy")]
    assert casts[:3] == [DIMS[1] * 2, DIMS[1] * DIMS[0] * 2, N * DIMS[0] * 2], casts[:3]


def test_amp_header_and_fp16_scaler(tmp_path, coopsim_bin):
    header, records = record(tmp_path, "fp16", amp="fp16")
    assert header["source"]["amp"] == "fp16" and header["source"]["dtype"] == "float32"
    names = {t.get("name") for t in tensors(records).values()}
    assert {"grad_scaler.scale", "grad_scaler.growth_tracker"} <= names
    coopsim.validate(tmp_path / "fp16.jsonl", binary=coopsim_bin)


def recompute_outputs(records):
    """Names of the activations allocated in backward (a checkpointed module's forward run again)."""
    t = tensors(records)
    return [t[r["tensor"]]["name"] for it, phase, r in phases(records)
            if r["kind"] == "alloc" and phase == "backward" and t[r["tensor"]]["role"] == "activation"]


def blocks():
    """Eight blocks of Linear(64, 64)-ReLU-Linear(64, 64)-ReLU: inside each block the first ReLU's
    output is saved for backward, which checkpointing a block drops (its input stays)."""
    return nn.Sequential(*(nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
                           for _ in range(8)))


def wide_batch(device):
    return {"x": torch.randn(N, 64, device=device)}


def test_checkpointing_lowers_the_peak_and_recomputes(tmp_path, coopsim_bin):
    def run(name, **options):
        path = coopsim.record(blocks, wide_batch, sum_loss, plain_sgd, output=tmp_path / f"{name}.jsonl", **options)
        return load_trace(path)
    _, plain = run("plain")
    names = [str(b) for b in range(8)]
    header, ckpt = run("ckpt", checkpoint=names)
    assert header["source"]["checkpoint"] == names
    activation = N * 64 * 4
    # without: at the last block's backward the input, 15 saved ReLU outputs and 2 gradients in flight
    # are live (18 activation-sized tensors); with: at the recomputation of block 6 the input, the
    # outputs of blocks 0-5, the incoming gradient, block 6's 2 recomputed ReLU outputs and 2 gradients
    # in flight (12); more weight gradients exist by then, so the peak drops by a little less than 6
    # (tensors only: the recomputation's addmm also gives the autograd thread a cuBLASLt workspace)
    assert peak_live(ckpt, skip_roles=("workspace",)) <= peak_live(plain, skip_roles=("workspace",)) - 5 * activation
    assert recompute_outputs(plain) == []
    again = recompute_outputs(ckpt)
    # every block runs again in each iteration's backward, under its modules' own names
    expected = [f"{b}.{m}" for b in range(8) for m in ("0:addmm", "1:relu", "2:addmm", "3:relu")]
    assert sorted(again) == sorted(expected * 2), again
    # block 0's input does not require grad: reentrant checkpointing gets it a copy that does, so
    # block 0's parameters still get gradients
    grads = {t["name"] for t in tensors(ckpt).values() if t["role"] == "gradient"}
    assert {f"{b}.{i}.{w}.grad" for b in range(8) for i in (0, 2) for w in ("weight", "bias")} <= grads
    coopsim.validate(tmp_path / "ckpt.jsonl", binary=coopsim_bin)


class KeywordBlocks(nn.Module):
    """Calls its blocks with a keyword argument: checkpointed non-reentrantly."""

    def __init__(self):
        super().__init__()
        self.blocks = blocks()

    def forward(self, x):
        for block in self.blocks:
            x = block(input=x)
        return x


def test_checkpointing_with_keyword_arguments(tmp_path, coopsim_bin):
    path = coopsim.record(KeywordBlocks, wide_batch, sum_loss, plain_sgd, output=tmp_path / "kw.jsonl",
                          checkpoint=lambda name, module: name.startswith("blocks.") and name.count(".") == 1)
    header, records = load_trace(path)
    assert header["source"]["checkpoint"] == [f"blocks.{b}" for b in range(8)]
    again = recompute_outputs(records)
    assert sorted(again) == sorted(f"blocks.{b}.{m}" for b in range(8) for m in ("0:addmm", "1:relu", "2:addmm", "3:relu")
                                   for _ in range(2)), again
    coopsim.validate(path, binary=coopsim_bin)


def test_checkpoint_predicate_and_unknown_names(tmp_path):
    header, _ = record(tmp_path, checkpoint=lambda name, module: isinstance(module, nn.ReLU))
    assert header["source"]["checkpoint"] == ["1", "3", "5"]
    with pytest.raises(ValueError, match="no module named 'block9'"):
        record(tmp_path, checkpoint=["block9"])


def test_accumulation_records_two_passes_per_step(tmp_path, coopsim_bin):
    header, records = record(tmp_path, "acc", accumulation=2)
    assert header["source"]["accumulation"] == 2
    flow = [(r["kind"], r.get("label", r.get("index"))) for r in records if r["kind"] in ("iteration", "mark")]
    one = [("mark", "forward"), ("mark", "backward")] * 2 + [("mark", "optimizer")]
    assert flow == [("iteration", 0)] + one + [("iteration", 1)] + one
    t = tensors(records)
    inputs = [r for it, _, r in phases(records) if r["kind"] == "alloc" and it == 1 and t[r["tensor"]]["role"] == "input"]
    assert len(inputs) == 2  # one batch per micro-batch
    coopsim.validate(tmp_path / "acc.jsonl", binary=coopsim_bin)


def grads_live_at_iteration_starts(records):
    t = tensors(records)
    live, found = set(), []
    for r in records:
        if r["kind"] == "iteration" and r["index"] > 0:
            found.append(sorted(t[i]["name"] for i in live if t[i]["role"] == "gradient"))
        elif r["kind"] == "alloc":
            live.add(r["tensor"])
        elif r["kind"] == "free":
            live.discard(r["tensor"])
    return found


def test_set_to_none_false_keeps_gradients(tmp_path):
    _, none = record(tmp_path, "none", iterations=3)
    _, kept = record(tmp_path, "kept", iterations=3, set_to_none=False)
    params = [f"{i}.{w}.grad" for i in (0, 2, 4, 6) for w in ("bias", "weight")]
    assert grads_live_at_iteration_starts(none) == [[], []]
    assert grads_live_at_iteration_starts(kept) == [sorted(params)] * 2
    # zeroed in place, then accumulated into in place: no gradient is allocated after iteration 0
    t = tensors(kept)
    later = [r for it, _, r in phases(kept) if r["kind"] == "alloc" and it > 0 and t[r["tensor"]]["name"].endswith(".grad")]
    assert later == []


def test_built_module_is_copied_to_fake_tensors(tmp_path):
    model = mlp()
    before = [p.detach().clone() for p in model.parameters()]
    header, records = record(tmp_path, model=model, optimizer="adamw")
    assert all(torch.equal(a, b.detach()) for a, b in zip(before, model.parameters()))  # untouched
    assert all(type(p) is nn.Parameter for p in model.parameters())
    t = tensors(records)
    sizes = {x["name"]: x["bytes"] for x in t.values() if x["role"] in ("parameter", "optimizer_state")}
    for name, p in model.named_parameters():
        assert sizes[name] == p.numel() * 4
        assert sizes[f"{name}.exp_avg"] == sizes[f"{name}.exp_avg_sq"] == p.numel() * 4
    assert header["source"]["fake"] is True and header["source"]["optimizer"] == "adamw"


def test_optimizer_callable_under_fake(tmp_path):
    header, records = record(tmp_path, optimizer=lambda params: torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1))
    states = sorted(t["name"] for t in tensors(records).values() if t["role"] == "optimizer_state")
    names = [f"{i}.{w}" for i in (0, 2, 4, 6) for w in ("bias", "weight")]
    assert states == sorted(f"{n}.{k}" for n in names for k in ("exp_avg", "exp_avg_sq"))
    with pytest.raises(ValueError, match="AdamW with amsgrad cannot be recorded under fake=True"):
        record(tmp_path, optimizer=lambda params: torch.optim.AdamW(params, amsgrad=True))
    with pytest.raises(TypeError, match="not a torch.optim.Optimizer"):
        record(tmp_path, optimizer=lambda params: "sgd")


def test_batch_dict_and_real_run_warns(tmp_path):
    data = {"x": torch.randn(N, DIMS[0])}
    with pytest.warns(UserWarning, match="CPU wall-clock"):
        path = coopsim.record(mlp, data, sum_loss, plain_sgd, fake=False, device="cpu",
                              output=tmp_path / "real.jsonl")
    header, records = load_trace(path)
    assert header["source"]["durations"]["timing"] == "measured"
    inputs = [x for x in tensors(records).values() if x["role"] == "input"]
    assert [x["bytes"] for x in inputs] == [N * DIMS[0] * 4]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a profile: no warning
        coopsim.record(mlp, data, sum_loss, plain_sgd, fake=False, device="cpu", device_profile="h100",
                       output=tmp_path / "real2.jsonl")
    # a real run and a fake run with the same profile make the same records
    fake = load_trace(coopsim.record(mlp, data, sum_loss, plain_sgd, device_profile="h100",
                                     output=tmp_path / "fake2.jsonl"))[1]
    assert load_trace(tmp_path / "real2.jsonl")[1] == fake


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="unknown optimizer 'lamb'"):
        record(tmp_path, optimizer="lamb")
    with pytest.raises(ValueError, match="unknown amp 'fp8'"):
        record(tmp_path, amp="fp8")
    with pytest.raises(TypeError, match="not a torch.nn.Module"):
        record(tmp_path, model=lambda: 42)
