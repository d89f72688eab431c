#!/usr/bin/env python3
"""Writes a TorchScript model diloco can train (model.kind = "torchscript").

The contract diloco checks at start-up: forward(tokens) takes int64 token ids
[B, T] and returns float32 logits [B, T, V], V = model.vocab. Every parameter
is trained with diloco's AdamW; the top-level child modules (an entry of a
ModuleList counting as one) are the layers streaming fragments are made of.

Two examples, written with torch.jit.script:
  gpt    the byte-level GPT diloco has built in, with the same parameter names
         (token_embedding, blocks.N.attn.qkv, ...), so weights map one to one
  llama  a small Llama-style decoder named as Hugging Face names Llama's

  /usr/bin/python3 scripts/export_model.py --kind gpt --out gpt.pt
  /usr/bin/python3 scripts/export_model.py --kind llama --d-model 64 --out llama.pt

With --format hf, --kind llama writes a Hugging Face folder instead
(config.json + model.safetensors, as LlamaForCausalLM reads them; random
weights): --theta, --eps, --untied and --rope-scaling llama3 set what its
config says (scripts/hf_llama.py computes what such a folder computes):

  /usr/bin/python3 scripts/export_model.py --kind llama --format hf --theta 500000 --eps 1e-6 --out DIR

Your own model: any nn.Module whose forward(tokens) -> logits scripts; save it
with torch.jit.save(torch.jit.script(model), "m.pt"). Write it with a PyTorch
no newer than the libtorch diloco links (Debian's is 1.13): newer versions can
write files an older libtorch cannot read.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, seq_len: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1))

    def forward(self, x):
        B, T, C = x.shape
        hd = C // self.n_heads
        qkv = self.qkv(x).view(B, T, 3, self.n_heads, hd).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(hd)
        scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))
        y = torch.matmul(torch.softmax(scores, -1), v)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int, seq_len: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads, seq_len)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.out = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        h = x + self.attn(self.ln1(x))
        return h + self.out(F.gelu(self.fc(self.ln2(h))))


class ByteGPT(nn.Module):
    """diloco's built-in byte GPT, parameter for parameter."""

    def __init__(self, vocab: int, d_model: int, n_layers: int, n_heads: int, seq_len: int):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, d_model)
        self.position_embedding = nn.Embedding(seq_len, d_model)
        self.blocks = nn.ModuleList([Block(d_model, n_heads, seq_len) for _ in range(n_layers)])
        self.ln_final = nn.LayerNorm(d_model)
        residual_std = 0.02 / math.sqrt(2.0 * n_layers)
        for name, p in self.named_parameters():
            if "ln" in name:
                nn.init.ones_(p) if name.endswith("weight") else nn.init.zeros_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
            elif name.endswith("proj.weight") or name.endswith("out.weight"):
                nn.init.normal_(p, 0.0, residual_std)
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, tokens):
        T = tokens.shape[1]
        positions = torch.arange(T, device=tokens.device)
        x = self.token_embedding(tokens) + self.position_embedding(positions)
        for block in self.blocks:
            x = block(x)
        return torch.matmul(self.ln_final(x), self.token_embedding.weight.t())


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), -1)


class LlamaAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, d_model // n_heads
        self.q_proj = nn.Linear(d_model, n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(n_heads * self.head_dim, d_model, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if self.n_kv_heads != self.n_heads:
            k = k.repeat_interleave(self.n_heads // self.n_kv_heads, 1)
            v = v.repeat_interleave(self.n_heads // self.n_kv_heads, 1)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        y = torch.matmul(torch.softmax(scores.masked_fill(mask, float("-inf")), -1), v)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim))


class LlamaMLP(nn.Module):
    def __init__(self, d_model: int, hidden: int):
        super().__init__()
        self.gate_proj = nn.Linear(d_model, hidden, bias=False)
        self.up_proj = nn.Linear(d_model, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, hidden: int):
        super().__init__()
        self.input_layernorm = RMSNorm(d_model)
        self.self_attn = LlamaAttention(d_model, n_heads, n_kv_heads)
        self.post_attention_layernorm = RMSNorm(d_model)
        self.mlp = LlamaMLP(d_model, hidden)

    def forward(self, x, cos, sin, mask):
        h = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return h + self.mlp(self.post_attention_layernorm(h))


class LlamaBody(nn.Module):
    def __init__(self, vocab, d_model, n_layers, n_heads, n_kv_heads, hidden, seq_len):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d_model)
        self.layers = nn.ModuleList([LlamaBlock(d_model, n_heads, n_kv_heads, hidden) for _ in range(n_layers)])
        self.norm = RMSNorm(d_model)
        head_dim = d_model // n_heads
        inv_freq = 10000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        angles = torch.outer(torch.arange(seq_len, dtype=torch.float64), inv_freq)
        both = torch.cat((angles, angles), -1)
        self.register_buffer("rope_cos", both.cos().float())
        self.register_buffer("rope_sin", both.sin().float())
        self.register_buffer("mask", torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1))

    def forward(self, tokens):
        T = tokens.shape[1]
        cos, sin, mask = self.rope_cos[:T], self.rope_sin[:T], self.mask[:T, :T]
        x = self.embed_tokens(tokens)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.norm(x)


class Llama(nn.Module):
    """A small Llama-style decoder with tied embeddings."""

    def __init__(self, vocab, d_model, n_layers, n_heads, n_kv_heads, seq_len):
        super().__init__()
        hidden = (8 * d_model // 3 + 255) // 256 * 256
        self.model = LlamaBody(vocab, d_model, n_layers, n_heads, n_kv_heads, hidden, seq_len)
        for name, p in self.named_parameters():
            if p.dim() == 1:
                nn.init.ones_(p)
            elif name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2.0 * n_layers))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, tokens):
        return torch.matmul(self.model(tokens), self.model.embed_tokens.weight.t())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kind", choices=["gpt", "llama"], required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=64, help="the longest context the model accepts")
    ap.add_argument("--seed", type=int, default=0)
    hf = ap.add_argument_group("--format hf (Hugging Face folder, --kind llama)")
    ap.add_argument("--format", choices=["torchscript", "hf"], default="torchscript")
    hf.add_argument("--ffn", type=int, default=0, help="intermediate_size (0: 8/3 of --d-model rounded up to 256)")
    hf.add_argument("--theta", type=float, default=10000.0)
    hf.add_argument("--eps", type=float, default=1e-5)
    hf.add_argument("--untied", action="store_true")
    hf.add_argument("--rope-scaling", default="", help="llama3 (or another type, which diloco refuses)")
    hf.add_argument("--original-max", type=int, default=32, help="llama3: original_max_position_embeddings")
    hf.add_argument("--std", type=float, default=0.3, help="weights' standard deviation")
    a = ap.parse_args()
    if a.format == "hf":
        if a.kind != "llama":
            ap.error("--format hf writes --kind llama only (the byte GPT is no Hugging Face architecture)")
        import hf_llama
        a.folder, a.max_positions = a.out, a.seq_len
        a.ffn = a.ffn or (8 * a.d_model // 3 + 255) // 256 * 256
        hf_llama.write_folder(a)
        return
    torch.manual_seed(a.seed)
    if a.kind == "gpt":
        model = ByteGPT(a.vocab, a.d_model, a.layers, a.heads, a.seq_len)
    else:
        model = Llama(a.vocab, a.d_model, a.layers, a.heads, a.kv_heads, a.seq_len)
    scripted = torch.jit.script(model)
    torch.jit.save(scripted, a.out)
    params = sum(p.numel() for p in model.parameters())
    print(f"wrote {a.out}: {a.kind}, {params} parameters, vocab {a.vocab}, context {a.seq_len}")


if __name__ == "__main__":
    main()
