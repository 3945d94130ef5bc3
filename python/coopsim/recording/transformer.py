"""BERT-Large-style encoder and GPT-2-style decoder, written with torch.nn layers and explicit attention.

Attention is spelled out (matmul, scale, softmax, dropout, matmul) rather than calling nn.MultiheadAttention
or scaled_dot_product_attention, so torch 1.13 and 2.x record the same ops and the attention matrices of
the original models appear in the trace (a fused kernel would hide them).

* BERT-Large (Devlin et al. 2019): 24 layers, hidden 1024, 16 heads, feed-forward 4096, GELU, post-layer
  norm (eps 1e-12), dropout 0.1, vocabulary 30522, 512 positions, 2 token types; pre-training heads: masked
  LM (dense + GELU + LayerNorm, decoder tied to the word embeddings) and next-sentence prediction (pooler).
* GPT-2 small (Radford et al. 2019): 12 layers, hidden 768, 12 heads, feed-forward 3072, GELU (tanh),
  pre-layer norm (eps 1e-5), dropout 0.1, vocabulary 50257, context 1024, causal mask, LM head tied to the
  token embeddings.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def attention(q, k, v, heads, dropout, causal_mask=None):
    """q, k, v: [B, S, H*D] -> [B, S, H*D]."""
    b, s, width = q.shape
    d = width // heads

    def split(x):
        return x.view(b, s, heads, d).transpose(1, 2)
    q, k, v = split(q), split(k), split(v)
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
    if causal_mask is not None:
        scores = scores.masked_fill(causal_mask[:s, :s], float("-inf"))
    probs = dropout(F.softmax(scores, dim=-1))
    return torch.matmul(probs, v).transpose(1, 2).reshape(b, s, width)


class BertLayer(nn.Module):
    def __init__(self, hidden, heads, ff, p):
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.attn_dropout = nn.Dropout(p)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.ff_in, self.ff_out = nn.Linear(hidden, ff), nn.Linear(ff, hidden)
        self.ff_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(p)

    def forward(self, x):
        a = attention(self.query(x), self.key(x), self.value(x), self.heads, self.attn_dropout)
        x = self.attn_norm(x + self.dropout(self.attn_out(a)))
        return self.ff_norm(x + self.dropout(self.ff_out(F.gelu(self.ff_in(x)))))


class BertPreTraining(nn.Module):
    def __init__(self, vocab=30522, hidden=1024, layers=24, heads=16, ff=4096, positions=512, p=0.1):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(positions, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.emb_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.emb_dropout = nn.Dropout(p)
        self.layers = nn.ModuleList(BertLayer(hidden, heads, ff, p) for _ in range(layers))
        self.mlm_dense = nn.Linear(hidden, hidden)
        self.mlm_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.mlm_bias = nn.Parameter(torch.zeros(vocab))
        self.pooler = nn.Linear(hidden, hidden)
        self.nsp = nn.Linear(hidden, 2)
        self.register_buffer("position_ids", torch.arange(positions), persistent=False)

    def forward(self, tokens, token_types):
        positions = self.position_ids[:tokens.shape[1]]
        x = self.word(tokens) + self.position(positions) + self.token_type(token_types)
        x = self.emb_dropout(self.emb_norm(x))
        for layer in self.layers:
            x = layer(x)
        h = self.mlm_norm(F.gelu(self.mlm_dense(x)))
        mlm_logits = F.linear(h, self.word.weight, self.mlm_bias)
        nsp_logits = self.nsp(torch.tanh(self.pooler(x[:, 0])))
        return mlm_logits, nsp_logits


class GPT2Block(nn.Module):
    def __init__(self, hidden, heads, p):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(hidden)
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.c_proj = nn.Linear(hidden, hidden)
        self.attn_dropout, self.resid_dropout = nn.Dropout(p), nn.Dropout(p)
        self.ln_2 = nn.LayerNorm(hidden)
        self.c_fc, self.mlp_proj = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
        self.mlp_dropout = nn.Dropout(p)

    def forward(self, x, causal_mask):
        q, k, v = self.c_attn(self.ln_1(x)).split(x.shape[-1], dim=2)
        x = x + self.resid_dropout(self.c_proj(attention(q, k, v, self.heads, self.attn_dropout, causal_mask)))
        return x + self.mlp_dropout(self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")))


class GPT2(nn.Module):
    def __init__(self, vocab=50257, context=1024, hidden=768, layers=12, heads=12, p=0.1):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(context, hidden)
        self.drop = nn.Dropout(p)
        self.h = nn.ModuleList(GPT2Block(hidden, heads, p) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)
        # True above the diagonal: positions a token may not attend to.
        self.register_buffer("causal_mask", torch.ones(context, context, dtype=torch.bool).triu(1), persistent=False)
        self.register_buffer("position_ids", torch.arange(context), persistent=False)

    def forward(self, tokens):
        x = self.drop(self.wte(tokens) + self.wpe(self.position_ids[:tokens.shape[1]]))
        for block in self.h:
            x = block(x, self.causal_mask)
        return F.linear(self.ln_f(x), self.wte.weight)
