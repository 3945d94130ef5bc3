"""A Llama-style decoder-only language model (written here: no download, random weights).

Architecture (Touvron et al. 2023, "Llama 2"; Meta's Llama 3.2 model card), in the module layout of
Hugging Face's LlamaForCausalLM (embed_tokens, layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj,
post_attention_layernorm, mlp.{gate,up,down}_proj}, norm, lm_head):

* pre-normalisation with RMSNorm (computed in float32, as Hugging Face's LlamaRMSNorm);
* rotary position embeddings (cos/sin made once per forward and shared by the layers);
* grouped-query attention: `heads` query heads share `kv_heads` key/value heads;
* SwiGLU feed-forward: down(silu(gate(x)) * up(x)); no biases anywhere;
* next-token cross-entropy on float32 logits (labels shifted by padding, as Hugging Face's
  ForCausalLMLoss, so the logits are not copied).

Attention is one op each way, `coopsim::flash_attention` and `coopsim::flash_attention_backward`,
defined here with torch.library: the forward returns the output and the float32 log-sum-exp per query
(FlashAttention-2's outputs, Dao 2023), the backward dq, dk, dv; both take q [B, S, H, D] and k, v
[B, S, Hkv, D] (grouped heads are not repeated). This is what memory sees of a fused attention kernel
(torch 2.x scaled_dot_product_attention, flash-attn): no S x S attention matrix is kept. torch 1.13 has
no fused attention, so the op's kernels are written here: Meta (shapes only, what FakeTensors run) and
CPU / CUDA (plain math, for real runs of small configurations; its temporaries stay inside the kernel,
as a fused kernel's would). `attention="eager"` spells attention out instead (repeat_kv, matmul,
softmax in float32, matmul), as Hugging Face's attn_implementation="eager".
"""
import contextlib
import math

import torch
import torch.nn.functional as F
from torch import nn

_LIB = torch.library.Library("coopsim", "DEF")
_LIB.define("flash_attention(Tensor q, Tensor k, Tensor v, bool causal) -> (Tensor, Tensor)")
_LIB.define("flash_attention_backward(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, "
            "bool causal) -> (Tensor, Tensor, Tensor)")


def _attention_meta(q, k, v, causal):
    b, s, h, _ = q.shape
    return torch.empty_like(q, memory_format=torch.contiguous_format), q.new_empty((b, h, s), dtype=torch.float32)


def _attention_backward_meta(grad_out, q, k, v, out, lse, causal):
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            torch.empty_like(k, memory_format=torch.contiguous_format),
            torch.empty_like(v, memory_format=torch.contiguous_format))


def _probabilities(q, k, causal):
    """q [B, H, S, D], k [B, H, Sk, D] -> softmax probabilities [B, H, S, Sk] in float32."""
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        s, sk = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(s, sk, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return scores


def _grouped(q, k, v):
    """[B, S, H, D] layouts -> [B, H, S, D] with k and v repeated to H heads."""
    group = q.shape[2] // k.shape[2]
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    return q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1), group


def _attention_math(q, k, v, causal):
    qh, kh, vh, _ = _grouped(q, k, v)
    scores = _probabilities(qh, kh, causal)
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.matmul(torch.exp(scores - lse.unsqueeze(-1)), vh.float())
    return out.to(q.dtype).transpose(1, 2).contiguous(), lse


def _attention_backward_math(grad_out, q, k, v, out, lse, causal):
    qh, kh, vh, group = _grouped(q, k, v)
    p = torch.exp(_probabilities(qh, kh, causal) - lse.unsqueeze(-1))
    do, o = grad_out.transpose(1, 2).float(), out.transpose(1, 2).float()
    dv = torch.matmul(p.transpose(-1, -2), do)
    dp = torch.matmul(do, vh.float().transpose(-1, -2))
    ds = p * (dp - (do * o).sum(-1, keepdim=True)) / math.sqrt(q.shape[-1])
    dq = torch.matmul(ds, kh.float())
    dk = torch.matmul(ds.transpose(-1, -2), qh.float())
    b, h, s, d = dk.shape
    dk = dk.view(b, h // group, group, s, d).sum(2)
    dv = dv.view(b, h // group, group, s, d).sum(2)
    return tuple(t.to(q.dtype).transpose(1, 2).contiguous() for t in (dq, dk, dv))


_LIB.impl("flash_attention", _attention_meta, "Meta")
_LIB.impl("flash_attention_backward", _attention_backward_meta, "Meta")
for _key in ("CPU", "CUDA"):
    _LIB.impl("flash_attention", _attention_math, _key)
    _LIB.impl("flash_attention_backward", _attention_backward_math, _key)


def _fake(t):
    """Whether the op's kernels run one by one: on a FakeTensor on torch 2.x (1.13's FakeTensorMode
    cannot run the math kernel: repeat_interleave has a data-dependent output shape there, so 1.13
    records the op whole, as before), and in any recording on a real device (decomposed())."""
    from .compat import is_fake
    return _DECOMPOSED[0] or (_MATH_UNDER_FAKE and is_fake(t))


_MATH_UNDER_FAKE = int(torch.__version__.split(".")[0]) >= 2
_DECOMPOSED = [False]


@contextlib.contextmanager
def decomposed():
    """Within it the attention ops run their kernels one by one on real tensors too, so that a recording
    on a GPU holds the float32 S x S temporaries the caching allocator serves inside the op (the
    recorder sees only the ops it dispatches: recorded whole, Llama-1B's trace peaked 5.2 % below the
    H200's max_memory_reserved). The step is the same kernels either way."""
    before = _DECOMPOSED[0]
    _DECOMPOSED[0] = True
    try:
        yield
    finally:
        _DECOMPOSED[0] = before


class FlashAttention(torch.autograd.Function):
    """On FakeTensors the ops of the CUDA kernel run one by one, so that a fake recording holds the
    requests the GPU makes: the kernel is plain math (above), whose float32 S x S scores and
    probabilities are allocated and freed inside the op on a real GPU (measured: traces/h200's Llama
    snapshot, 2 GiB blocks per layer at batch 4; without them the fake recording's peak reserved was
    5.2 % below the H200's)."""

    @staticmethod
    def forward(ctx, q, k, v, causal):
        if _fake(q):
            out, lse = _attention_math(q, k, v, causal)
        else:
            out, lse = torch.ops.coopsim.flash_attention(q, k, v, causal)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal = causal
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        if _fake(q):
            dq, dk, dv = _attention_backward_math(grad_out, q, k, v, out, lse, ctx.causal)
        else:
            dq, dk, dv = torch.ops.coopsim.flash_attention_backward(grad_out, q, k, v, out, lse, ctx.causal)
        return dq, dk, dv, None


class LlamaConfig:
    def __init__(self, vocab, hidden, layers, heads, kv_heads, ffn, context, rope_theta=10000.0, eps=1e-5,
                 tie_embeddings=False, attention="flash"):
        assert hidden % heads == 0 and heads % kv_heads == 0 and attention in ("flash", "eager")
        self.vocab, self.hidden, self.layers, self.heads, self.kv_heads = vocab, hidden, layers, heads, kv_heads
        self.ffn, self.context, self.rope_theta, self.eps = ffn, context, rope_theta, eps
        self.tie_embeddings, self.attention = tie_embeddings, attention
        self.head_dim = hidden // heads


class RMSNorm(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _rotary(x, cos, sin):
    """x [B, S, H, D]; cos, sin [S, D]."""
    cos, sin = cos.to(x.dtype)[:, None, :], sin.to(x.dtype)[:, None, :]
    return x * cos + _rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.q_proj = nn.Linear(c.hidden, c.heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden, c.kv_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden, c.kv_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.heads * c.head_dim, c.hidden, bias=False)

    def forward(self, x, cos, sin):
        c = self.c
        b, s, _ = x.shape
        q = _rotary(self.q_proj(x).view(b, s, c.heads, c.head_dim), cos, sin)
        k = _rotary(self.k_proj(x).view(b, s, c.kv_heads, c.head_dim), cos, sin)
        v = self.v_proj(x).view(b, s, c.kv_heads, c.head_dim)
        if c.attention == "flash":
            out = FlashAttention.apply(q, k, v, True)
        else:
            out = _eager_attention(q, k, v, c)
        return self.o_proj(out.reshape(b, s, c.heads * c.head_dim))


def _eager_attention(q, k, v, c):
    group = c.heads // c.kv_heads
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    if group > 1:  # Hugging Face's repeat_kv: expand + reshape (a copy)
        b, h, s, d = k.shape
        k = k[:, :, None].expand(b, h, group, s, d).reshape(b, h * group, s, d)
        v = v[:, :, None].expand(b, h, group, s, d).reshape(b, h * group, s, d)
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(c.head_dim)
    s = scores.shape[-1]
    scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool, device=scores.device).triu(1), float("-inf"))
    probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(probs, v).transpose(1, 2)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden, c.ffn, bias=False)
        self.up_proj = nn.Linear(c.hidden, c.ffn, bias=False)
        self.down_proj = nn.Linear(c.ffn, c.hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden, c.eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden, c.eps)
        self.mlp = MLP(c)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c.vocab, c.hidden)
        self.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.layers))
        self.norm = RMSNorm(c.hidden, c.eps)
        self.lm_head = None if c.tie_embeddings else nn.Linear(c.hidden, c.vocab, bias=False)
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, c.head_dim, 2, dtype=torch.float32) / c.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, tokens):
        x = self.embed_tokens(tokens)
        positions = torch.arange(tokens.shape[1], device=tokens.device, dtype=torch.float32)
        freqs = torch.outer(positions, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        for layer in self.layers:
            x = layer(x, cos, sin)
        x = self.norm(x)
        weight = self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(x, weight)


def causal_lm_loss(model, batch):
    """Next-token cross-entropy on float32 logits; labels shifted by padding (no copy of the logits)."""
    logits = model(batch["tokens"]).float()
    labels = F.pad(batch["tokens"], (0, 1), value=-100)[:, 1:]
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)


def token_batch(vocab, sequence):
    def make(batch, device):
        return {"tokens": torch.randint(0, vocab, (batch, sequence), device=device)}
    return make


# Llama 3.2 1B (Meta's model card and config): hidden 2048, 16 layers, 32 heads, 8 KV heads, FFN 8192,
# vocabulary 128256 (the Llama 3 tokenizer), tied embeddings, RoPE theta 500000.
LLAMA_1B = LlamaConfig(vocab=128256, hidden=2048, layers=16, heads=32, kv_heads=8, ffn=8192, context=2048,
                       rope_theta=500000.0, tie_embeddings=True)
# Llama 2 7B: hidden 4096, 32 layers, 32 heads, multi-head attention (32 KV heads: Llama 2 uses grouped
# queries only at 70B), FFN 11008, vocabulary 32000, untied LM head, context 4096.
LLAMA_7B = LlamaConfig(vocab=32000, hidden=4096, layers=32, heads=32, kv_heads=32, ffn=11008, context=4096)
