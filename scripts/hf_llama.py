#!/usr/bin/env python3
"""Hugging Face Llama folders without the transformers package.

An independent Python computation of what a Llama-architecture folder
(config.json + model.safetensors, as LlamaForCausalLM reads it) computes, to
hold diloco's `eval` and `sample` to: the forward pass written after
transformers' modeling_llama (rotate_half, repeat_kv, RMSNorm in float32,
grouped-query attention, tied or untied head) and its rope initialisation
(_compute_default_rope_parameters, _compute_llama3_parameters), in float32
as transformers computes them.

  write   a folder with random weights: config.json and model.safetensors
          (what export_model.py --kind llama --format hf writes)
  loss    mean next-token loss over a byte file, in diloco eval's windows
  greedy  token ids of a greedy continuation, recomputing the whole sequence
          for each new token

  /usr/bin/python3 scripts/hf_llama.py write DIR --theta 500000 --eps 1e-6 --kv-heads 2 --untied
  /usr/bin/python3 scripts/hf_llama.py loss DIR --data FILE --seq-len 64
  /usr/bin/python3 scripts/hf_llama.py greedy DIR --prompt "Hello" --tokens 20

Runs on Debian's python3-torch (1.13); safetensors are read and written here
(the format is an 8-byte header length, a JSON header, the raw data).
"""
import argparse
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

DTYPES = {"F32": (torch.float32, 4), "F16": (torch.float16, 2), "BF16": (torch.bfloat16, 2)}


def read_safetensors(path):
    blob = open(path, "rb").read()
    n = struct.unpack_from("<Q", blob)[0]
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, t in header.items():
        dtype, width = DTYPES[t["dtype"]]
        begin, end = t["data_offsets"]
        data = bytearray(blob[8 + n + begin:8 + n + end])
        out[name] = torch.frombuffer(data, dtype=dtype).reshape(t["shape"]).float() if data else \
            torch.zeros(t["shape"])
    return out


def write_safetensors(path, tensors):
    header, offset, chunks = {}, 0, []
    for name, t in tensors.items():
        raw = t.detach().float().contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        chunks.append(raw)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for c in chunks:
            f.write(c)


def read_folder(folder):
    config = json.load(open(os.path.join(folder, "config.json")))
    index = os.path.join(folder, "model.safetensors.index.json")
    weights = {}
    if os.path.exists(index):
        for file in sorted(set(json.load(open(index))["weight_map"].values())):
            weights.update(read_safetensors(os.path.join(folder, file)))
    else:
        weights = read_safetensors(os.path.join(folder, "model.safetensors"))
    return config, weights


def inverse_frequencies(config):
    """transformers' _compute_default_rope_parameters and _compute_llama3_parameters."""
    base = config.get("rope_theta", 10000.0)
    dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    scaling = config.get("rope_scaling")
    if not scaling or scaling.get("rope_type", scaling.get("type")) == "default":
        return inv_freq
    if scaling.get("rope_type", scaling.get("type")) != "llama3":
        raise SystemExit("rope_scaling type not computed here: %r" % scaling)
    factor = scaling["factor"]
    low_freq_factor = scaling["low_freq_factor"]
    high_freq_factor = scaling["high_freq_factor"]
    old_context_len = scaling["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


def rms_norm(x, weight, eps):
    variance = x.float().pow(2).mean(-1, keepdim=True)
    return weight * (x.float() * torch.rsqrt(variance + eps)).to(x.dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, n_rep):
    b, heads, t, d = x.shape
    if n_rep == 1:
        return x
    return x[:, :, None, :, :].expand(b, heads, n_rep, t, d).reshape(b, heads * n_rep, t, d)


def forward(config, w, ids):
    """LlamaForCausalLM's logits for ids [B, T]."""
    h_dim, n_heads = config["hidden_size"], config["num_attention_heads"]
    n_kv = config.get("num_key_value_heads", n_heads)
    head_dim = h_dim // n_heads
    eps = config.get("rms_norm_eps", 1e-6)
    B, T = ids.shape
    freqs = torch.arange(T).float()[:, None] * inverse_frequencies(config)[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    x = w["model.embed_tokens.weight"][ids]
    causal = torch.full((T, T), float("-inf")).triu(1)
    for i in range(config["num_hidden_layers"]):
        p = "model.layers.%d." % i
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].t()).view(B, T, n_heads, head_dim).transpose(1, 2)
        k = (h @ w[p + "self_attn.k_proj.weight"].t()).view(B, T, n_kv, head_dim).transpose(1, 2)
        v = (h @ w[p + "self_attn.v_proj.weight"].t()).view(B, T, n_kv, head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, n_heads // n_kv), repeat_kv(v, n_heads // n_kv)
        attn = torch.softmax(q @ k.transpose(2, 3) / math.sqrt(head_dim) + causal, dim=-1, dtype=torch.float32)
        y = (attn @ v).transpose(1, 2).reshape(B, T, h_dim)
        x = x + y @ w[p + "self_attn.o_proj.weight"].t()
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = F.silu(h @ w[p + "mlp.gate_proj.weight"].t())
        x = x + (gate * (h @ w[p + "mlp.up_proj.weight"].t())) @ w[p + "mlp.down_proj.weight"].t()
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if config.get("tie_word_embeddings", False) else w["lm_head.weight"]
    return x @ head.t()


def write_folder(a):
    torch.manual_seed(a.seed)
    d, L, V, kv = a.d_model, a.layers, a.vocab, a.kv_heads or a.heads
    hd = d // a.heads
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": d,
        "intermediate_size": a.ffn, "num_hidden_layers": L, "num_attention_heads": a.heads,
        "num_key_value_heads": kv, "vocab_size": V, "max_position_embeddings": a.max_positions,
        "rope_theta": a.theta, "rms_norm_eps": a.eps, "tie_word_embeddings": not a.untied,
        "hidden_act": "silu", "attention_bias": False, "torch_dtype": "float32",
        "rope_scaling": None,
    }
    if a.rope_scaling == "llama3":
        config["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0, "original_max_position_embeddings": a.original_max}
    elif a.rope_scaling:
        config["rope_scaling"] = {"rope_type": a.rope_scaling, "factor": 2.0}
    # Larger than a training init, so attention is far from uniform and
    # position (theta, scaling) shows in the loss.
    std = a.std
    w = {"model.embed_tokens.weight": torch.randn(V, d) * std}
    for i in range(L):
        p = "model.layers.%d." % i
        w[p + "input_layernorm.weight"] = 1.0 + 0.1 * torch.randn(d)
        w[p + "self_attn.q_proj.weight"] = torch.randn(a.heads * hd, d) * std
        w[p + "self_attn.k_proj.weight"] = torch.randn(kv * hd, d) * std
        w[p + "self_attn.v_proj.weight"] = torch.randn(kv * hd, d) * std
        w[p + "self_attn.o_proj.weight"] = torch.randn(d, a.heads * hd) * std
        w[p + "post_attention_layernorm.weight"] = 1.0 + 0.1 * torch.randn(d)
        w[p + "mlp.gate_proj.weight"] = torch.randn(a.ffn, d) * std
        w[p + "mlp.up_proj.weight"] = torch.randn(a.ffn, d) * std
        w[p + "mlp.down_proj.weight"] = torch.randn(d, a.ffn) * std
    w["model.norm.weight"] = 1.0 + 0.1 * torch.randn(d)
    if a.untied:
        w["lm_head.weight"] = torch.randn(V, d) * std
    os.makedirs(a.folder, exist_ok=True)
    json.dump(config, open(os.path.join(a.folder, "config.json"), "w"), indent=2)
    write_safetensors(os.path.join(a.folder, "model.safetensors"), w)
    print("wrote %s: %d parameters" % (a.folder, sum(t.numel() for t in w.values())))


def greedy_ids(config, w, prompt, tokens):
    ids = list(prompt.encode())
    with torch.no_grad():
        for _ in range(tokens):
            logits = forward(config, w, torch.tensor([ids]))
            ids.append(int(torch.argmax(logits[0, -1])))
    return ids[len(prompt.encode()):]


def loss(a):
    """Windows as diloco eval takes them: window k holds ids [k*T, k*T + T + 1).
    With --prompt, also the greedy ids (one process for both)."""
    config, w = read_folder(a.folder)
    ids = torch.tensor(list(open(a.data, "rb").read()), dtype=torch.long)
    T, total, count = a.seq_len, 0.0, 0
    with torch.no_grad():
        for start in range(0, len(ids) - 1, T):
            window = ids[start:start + T + 1]
            logits = forward(config, w, window[None, :-1])
            total += F.cross_entropy(logits[0].double(), window[1:], reduction="sum").item()
            count += len(window) - 1
    out = {"loss": total / count, "tokens": count}
    if a.prompt:
        out["ids"] = greedy_ids(config, w, a.prompt, a.tokens)
    print(json.dumps(out))


def greedy(a):
    config, w = read_folder(a.folder)
    print(json.dumps({"ids": greedy_ids(config, w, a.prompt, a.tokens)}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    wr = sub.add_parser("write")
    wr.add_argument("folder")
    wr.add_argument("--vocab", type=int, default=256)
    wr.add_argument("--d-model", type=int, default=64)
    wr.add_argument("--layers", type=int, default=2)
    wr.add_argument("--heads", type=int, default=4)
    wr.add_argument("--kv-heads", type=int, default=0, help="0: as many as --heads")
    wr.add_argument("--ffn", type=int, default=96)
    wr.add_argument("--theta", type=float, default=500000.0)
    wr.add_argument("--eps", type=float, default=1e-5)
    wr.add_argument("--untied", action="store_true")
    wr.add_argument("--rope-scaling", default="", help="llama3, or another type (to test its refusal)")
    wr.add_argument("--original-max", type=int, default=32, help="llama3: original_max_position_embeddings")
    wr.add_argument("--max-positions", type=int, default=256)
    wr.add_argument("--std", type=float, default=0.3)
    wr.add_argument("--seed", type=int, default=0)
    lo = sub.add_parser("loss")
    lo.add_argument("folder")
    lo.add_argument("--data", required=True)
    lo.add_argument("--seq-len", type=int, required=True)
    lo.add_argument("--prompt", default="", help="also the greedy ids after this prompt")
    lo.add_argument("--tokens", type=int, default=20)
    gr = sub.add_parser("greedy")
    gr.add_argument("folder")
    gr.add_argument("--prompt", required=True)
    gr.add_argument("--tokens", type=int, default=20)
    a = ap.parse_args()
    {"write": write_folder, "loss": loss, "greedy": greedy}[a.command](a)


if __name__ == "__main__":
    main()
