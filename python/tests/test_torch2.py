"""Fake recordings on PyTorch 2.x (the suite 'python-torch2' runs these with PyPI's newest torch):
torchvision ResNet-50, an nn.TransformerEncoderLayer stack, an SDPA decoder checkpointed per block
under bf16 and a Hugging Face LlamaForCausalLM built from a config; each trace validates and holds the
kernels CUDA would run. Plus the rules that make a fake recording's request stream the GPU's: the
foreach optimizers against torch's own, the cuBLAS workspaces, the dtypes inside nn.MultiheadAttention
under bf16 (this one runs on 1.13 too)."""
import math

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import coopsim  # noqa: E402
from conftest import load_trace  # noqa: E402
from coopsim.recording import workspaces as ws  # noqa: E402

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
needs_torch2 = pytest.mark.skipif(not TORCH2, reason="PyTorch 2.x feature (SDPA, foreach default on CUDA)")


def op_names(records):
    ops = {r["id"]: r["name"] for r in records if r["kind"] == "op"}
    return [ops[r["op"]] for r in records if r["kind"] == "compute"]


def by_role(records, role):
    return sorted((r["name"], r["bytes"]) for r in records if r["kind"] == "tensor" and r["role"] == role)


def record(tmp_path, name, model, batch, loss, **options):
    path = coopsim.record(model, batch, loss, options.pop("optimizer", "adamw"), output=tmp_path / f"{name}.jsonl",
                          **options)
    return path, load_trace(path)


# --- models --------------------------------------------------------------------------------------------
@needs_torch2
def test_resnet50_fake(tmp_path, coopsim_bin):
    torchvision = pytest.importorskip("torchvision")
    path, (header, records) = record(
        tmp_path, "resnet50", lambda: torchvision.models.resnet50(), lambda dev: {
            "x": torch.randn(2, 3, 224, 224, device=dev), "y": torch.randint(0, 1000, (2,), device=dev)},
        lambda m, b: F.cross_entropy(m(b["x"]), b["y"]), optimizer="sgd", iterations=1, device_profile="h200")
    coopsim.validate(path, binary=coopsim_bin)
    names = op_names(records)
    assert names.count("aten::convolution") == 53 and "aten::_foreach_add_.List" in names
    # SGD's weight decay on CUDA copies every gradient at once (foreach), then updates in place
    assert "aten::_foreach_add.List" in names
    assert header["source"]["workspaces"]["cublas_bytes"] == 32 * 1024 * 1024
    # cuDNN's workspaces: one per forward convolution, taken and given back around its compute event
    # (recording/cudnn_workspaces.py); conv1's forward at batch 2: input + output + weight + 147 bytes
    scratch = {r["id"]: r for r in records if r["kind"] == "tensor" and ".cudnn_workspace" in r["name"]}
    forward = [t for t in scratch.values() if t["name"].endswith(":convolution.cudnn_workspace0")]
    assert len(forward) == 53 and all(t["role"] == "workspace" for t in scratch.values())
    conv1 = next(t for t in forward if t["name"].startswith("conv1:"))
    assert conv1["bytes"] == (2 * 3 * 224 * 224 + 2 * 64 * 112 * 112 + 64 * 3 * 7 * 7) * 4 + 147
    events = [(r["kind"], r.get("tensor", r.get("op"))) for r in records if r["kind"] in ("alloc", "free", "compute")]
    at = events.index(("alloc", conv1["id"]))
    assert events[at + 1][0] == "compute" and events[at + 2] == ("free", conv1["id"])


class Encoder(nn.Module):
    def __init__(self, d=64, heads=4, layers=2):
        super().__init__()
        self.layers = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, heads, 4 * d, batch_first=True), layers)
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        return self.head(self.layers(x).mean(1))


def encoder_batch(dev):
    return {"x": torch.randn(4, 32, 64, device=dev), "y": torch.randint(0, 10, (4,), device=dev)}


@needs_torch2
def test_transformer_encoder_stack_bf16(tmp_path, coopsim_bin):
    path, (_, records) = record(tmp_path, "encoder", Encoder, encoder_batch,
                                lambda m, b: F.cross_entropy(m(b["x"]), b["y"]), amp="bf16", device_profile="h200")
    coopsim.validate(path, binary=coopsim_bin)
    names = op_names(records)
    # CUDA's choices: flash attention (bf16, head dim 16), dropout's fused kernel with a bool mask
    assert names.count("aten::_scaled_dot_product_flash_attention") == 4  # 2 layers x 2 iterations
    assert names.count("aten::_scaled_dot_product_flash_attention_backward") == 4
    assert "aten::native_dropout" in names and "aten::bernoulli_.float" not in names
    masks = [r for r in records if r["kind"] == "tensor" and r["name"].endswith("native_dropout.1")]
    assert masks and all(m["bytes"] in (4 * 32 * 64, 4 * 32 * 256) for m in masks)  # one byte per element


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(x)


class Decoder(nn.Module):
    def __init__(self, vocab=500, d=64, heads=4, layers=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.embed.weight  # tied

    def forward(self, ids):
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.lm_head(x)


def decoder_batch(dev):
    return {"ids": torch.randint(0, 500, (2, 64), device=dev)}


def decoder_loss(m, b):
    logits = m(b["ids"])
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), b["ids"][:, 1:].flatten())


@needs_torch2
def test_sdpa_decoder_checkpointed_bf16(tmp_path, coopsim_bin):
    blocks = [f"blocks.{i}" for i in range(3)]
    path, (header, records) = record(tmp_path, "decoder", Decoder, decoder_batch, decoder_loss, amp="bf16",
                                     checkpoint=blocks, device_profile="h200")
    coopsim.validate(path, binary=coopsim_bin)
    assert header["source"]["checkpoint"] == blocks
    names = op_names(records)
    # forward, the recomputation in backward, and the backward op: per block and iteration
    assert names.count("aten::_scaled_dot_product_flash_attention") == 2 * 3 * 2
    assert names.count("aten::_scaled_dot_product_flash_attention_backward") == 3 * 2
    # the tied weight is one parameter
    assert [n for n, _ in by_role(records, "parameter")].count("embed.weight") == 1
    assert not any(n == "lm_head.weight" for n, _ in by_role(records, "parameter"))


@needs_torch2
def test_hugging_face_llama_from_config(tmp_path, coopsim_bin):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=1000, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)

    def batch(dev):
        ids = torch.randint(0, 1000, (2, 64), device=dev)
        return {"input_ids": ids, "labels": ids.clone()}
    path, (_, records) = record(tmp_path, "hf_llama", lambda: transformers.LlamaForCausalLM(cfg), batch,
                                lambda m, b: m(input_ids=b["input_ids"], labels=b["labels"]).loss,
                                amp="bf16", device_profile="h200")
    coopsim.validate(path, binary=coopsim_bin)
    names = op_names(records)
    # grouped-query attention (4 query heads, 2 key/value heads) on CUDA's flash kernel
    assert names.count("aten::_scaled_dot_product_flash_attention") == 2 * 2
    params = sum(b for _, b in by_role(records, "parameter"))
    model = transformers.LlamaForCausalLM(cfg)
    assert params == sum(p.numel() * 4 for p in model.parameters())


@needs_torch2
def test_hugging_face_llama_mask_and_checkpointing(tmp_path, coopsim_bin):
    """An attention mask (padding) and per-layer checkpointing: HF's decoder layers take keyword
    arguments, so they are checkpointed non-reentrantly; a mask sends SDPA to the memory-efficient
    kernel. use_cache=False, as Hugging Face's gradient_checkpointing_enable() sets: with a cache the
    recomputation would append its keys a second time."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=1000, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)

    def batch(dev):
        ids = torch.randint(0, 1000, (2, 64), device=dev)
        mask = torch.ones_like(ids)
        mask[1, 48:] = 0
        return {"input_ids": ids, "labels": ids.clone(), "attention_mask": mask}
    layers = ["model.layers.0", "model.layers.1"]
    path, (header, records) = record(
        tmp_path, "hf_llama_ckpt", lambda: transformers.LlamaForCausalLM(cfg), batch,
        lambda m, b: m(input_ids=b["input_ids"], attention_mask=b["attention_mask"], labels=b["labels"],
                       use_cache=False).loss, amp="bf16", device_profile="h200", checkpoint=layers)
    coopsim.validate(path, binary=coopsim_bin)
    assert header["source"]["checkpoint"] == layers
    names = op_names(records)
    # 2 layers x 2 iterations, forward and recomputation; the backward op once each
    assert names.count("aten::_scaled_dot_product_efficient_attention") == 2 * 2 * 2
    assert names.count("aten::_scaled_dot_product_efficient_attention_backward") == 2 * 2


# --- the request stream -----------------------------------------------------------------------------------
def test_multihead_attention_dtypes_under_bf16():
    """CUDA autocast casts the projections and matrix products inside nn.MultiheadAttention (its
    Python composite) to bf16; softmax is computed in float32 where it is an op of its own."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from coopsim.recording.amp import CudaAutocast
    seen = []

    class Spy(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            first = out[0] if isinstance(out, (tuple, list)) else out
            if isinstance(first, torch.Tensor):
                seen.append((func._schema.name, first.dtype))
            return out
    mha = nn.MultiheadAttention(64, 4, batch_first=True)
    x = torch.randn(2, 8, 64)
    with CudaAutocast(torch.bfloat16), Spy():
        y, _ = mha(x, x, x, need_weights=False)
    assert y.dtype == torch.bfloat16
    products = [d for n, d in seen if n in ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
                or "scaled_dot_product" in n]
    assert products and all(d == torch.bfloat16 for d in products), seen
    assert all(d == torch.float32 for n, d in seen if n == "aten::_softmax"), seen


@needs_torch2
def test_foreach_adamw_matches_torch():
    """ForeachStepCountAdamW (what fake recordings run) computes torch.optim.AdamW(foreach=True)'s update
    with the same _foreach_ ops."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from coopsim.recording.optim import ForeachStepCountAdamW

    class Names(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func._schema.name.startswith("aten::_foreach"):
                self.names.append(func._schema.name)
            return func(*args, **(kwargs or {}))
    torch.manual_seed(0)
    a = [torch.randn(5, 3, requires_grad=True), torch.randn(7, requires_grad=True)]
    b = [p.detach().clone().requires_grad_() for p in a]
    ours, theirs = ForeachStepCountAdamW(a, lr=1e-2), torch.optim.AdamW(b, lr=1e-2, weight_decay=0.01, foreach=True)
    for step in range(3):
        grads = [torch.randn_like(p) for p in a]
        for p, q, g in zip(a, b, grads):
            p.grad, q.grad = g.clone(), g.clone()
        spy_ours, spy_theirs = Names(), Names()
        with spy_ours:
            ours.step()
        with spy_theirs:
            theirs.step()
        for p, q in zip(a, b):
            assert torch.allclose(p, q, rtol=1e-6, atol=1e-7), step
        # torch also bumps its CPU step counters with a _foreach_add_ (not on the device: not in traces)
        theirs_names = list(spy_theirs.names)
        theirs_names.remove("aten::_foreach_add_")
        assert spy_ours.names == theirs_names


def test_cublas_workspace_sizes():
    assert ws.parse_cublas_workspace_config(":4096:8") == 33554432
    assert ws.parse_cublas_workspace_config(":4096:2:16:8") == 4096 * 1024 * 2 + 16 * 1024 * 8
    assert ws.parse_cublas_workspace_config(":0:0") == 0
    for bad in ("4096:8", ":4096", ":a:8", ""):
        assert ws.parse_cublas_workspace_config(bad) is None
    assert ws.sizes(9, env={}) == (33554432, 1048576)
    assert ws.sizes(8, env={}) == (8519680, 1048576)
    assert ws.sizes(9, env={"CUBLAS_WORKSPACE_CONFIG": ":16:8"}) == (131072, 131072)  # Lt capped at cuBLAS
    assert ws.sizes(9, env={"CUBLASLT_WORKSPACE_SIZE": "4096"}) == (33554432, 4 * 1048576)


def test_workspaces_per_thread_and_lt_only_for_addmm_with_bias():
    w = ws.Workspaces(100, 10, "test")
    x, wt, bias = torch.zeros(4, 8), torch.zeros(8, 6), torch.zeros(6)
    assert w.needed("aten::mm", (x, wt), "forward") == [(("workspace", "main", "cublas"), 100, "cublas_workspace[main]")]
    assert w.needed("aten::mm", (x, wt), "optimizer") == []  # the same (Python) thread
    assert w.needed("aten::addmm", (bias, x, wt), "forward") == [
        (("workspace", "main", "cublaslt"), 10, "cublaslt_workspace[main]")]
    assert w.needed("aten::addmm", (bias, x, wt), "forward") == []
    assert [k[2] for k in w.needed("aten::bmm", (x, wt), "backward")] == ["cublas_workspace[autograd]"]
    assert w.needed("aten::addmm", (torch.zeros(4, 6), x, wt), "backward") == []  # 2-D bias: cublasGemmEx
    assert w.needed("aten::add", (x, x), "backward") == []
    assert math.isclose(len(w.held), 3)


def test_fitted_duration_model():
    """duration = max(floor, roofline / efficiency of the op's kind); the bare roofline on request."""
    from coopsim.recording.cost import EFFICIENCY, KERNEL_FLOOR_NS, Roofline, op_kind
    assert op_kind("aten::mm", "bfloat16") == "matmul_half" and op_kind("aten::addmm", "float32") == "matmul_fp32"
    assert op_kind("aten::bmm", "float32") == "bmm_fp32" and op_kind("aten::convolution_backward", "float32") == "conv"
    assert op_kind("aten::native_layer_norm_backward", "float32") == "norm"
    assert op_kind("aten::_softmax", "float32") == "reduction" and op_kind("aten::sum.dim_IntList", "float32") == "reduction"
    assert op_kind("aten::_scaled_dot_product_flash_attention", "bfloat16") == "attention"
    assert op_kind("aten::add_.Tensor", "float32") == "elementwise"
    big = torch.empty(64 << 20, dtype=torch.float32)  # 256 MiB: memory-bound, read once and written once
    out = torch.empty_like(big)
    roof = Roofline("h200", model="roofline").estimate("aten::relu", (big,), [big], [out], [], False)
    assert roof == pytest.approx(2 * big.numel() * 4 / 4.8e12 * 1e9)
    fitted = Roofline("h200").estimate("aten::relu", (big,), [big], [out], [], False)
    assert fitted == pytest.approx(roof / EFFICIENCY["elementwise"])
    small = torch.empty(16)
    assert Roofline("h200").estimate("aten::relu", (small,), [small], [torch.empty(16)], [], False) == KERNEL_FLOOR_NS
    assert Roofline("h200").estimate("aten::view", (small,), [small], [], [], True) == 0  # no kernel
    with pytest.raises(ValueError, match="unknown duration model"):
        Roofline("h200", model="guess")
    # Each profile names its device's host link (a coopsim link preset, taken by `coopsim run`).
    assert {p: Roofline(p).describe()["link"] for p in ("a100", "h100", "h200")} == \
        {"a100": "pcie4-x16", "h100": "pcie5-x16", "h200": "h200"}


@needs_torch2
def test_llama_attention_kernels_recorded_one_by_one_on_a_real_device(tmp_path, coopsim_bin):
    """On a real device (here the CPU) the recording holds the ops coopsim::flash_attention's kernel runs,
    with its float32 S x S scores, as a fake recording does: recorded whole, the H200 Llama trace peaked
    5.2 % below max_memory_reserved (llama.py, decomposed)."""
    from coopsim.recording.llama import Llama, LlamaConfig, _DECOMPOSED
    cfg = LlamaConfig(vocab=256, hidden=64, layers=2, heads=4, kv_heads=2, ffn=128, context=32)

    def batch(device):
        return {"ids": torch.randint(0, cfg.vocab, (2, cfg.context), device=device)}

    def loss(model, data):
        logits = model(data["ids"])
        return torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), data["ids"].flatten())

    paths = {}
    for fake in (True, False):
        paths[fake] = coopsim.record(lambda: Llama(cfg), batch, loss, "adamw", iterations=1, fake=fake,
                                     device_profile="h100", output=tmp_path / f"llama-{fake}.jsonl.gz")
        coopsim.validate(paths[fake], binary=coopsim_bin)
    assert _DECOMPOSED == [False]  # the recording's context is left
    names = {fake: [r["name"] for r in load_trace(paths[fake])[1] if r["kind"] == "op"] for fake in paths}
    for fake in paths:
        assert "coopsim::flash_attention" not in names[fake] and "coopsim::flash_attention_backward" not in names[fake]
        # per layer forward and backward: the scores and the probabilities' products are bmm in float32
        assert names[fake].count("aten::bmm") >= 2 * cfg.layers
    scores = 2 * cfg.heads * cfg.context * cfg.context * 4  # [B, H, S, S] float32
    for fake in paths:
        tensors = [r for r in load_trace(paths[fake])[1] if r["kind"] == "tensor"]
        assert any(t["bytes"] == scores for t in tensors), fake
