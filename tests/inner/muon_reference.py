"""Replays tests/inner/muon_steps' recorded gradients with PyTorch's own AdamW
and a Muon written here from its published description, and checks that the
parameters after ten steps match diloco's within 1e-5.

Usage: /usr/bin/python3 tests/inner/muon_reference.py STEPS.safetensors
Exit 0 when every parameter matches, 1 otherwise (the largest differences
are printed either way).
"""
import json
import math
import struct
import sys

import torch


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    meta = header.pop("__metadata__", {})
    body = data[8 + size:]
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        t = torch.frombuffer(bytearray(body[begin:end]), dtype=torch.float32)
        tensors[name] = t.reshape(entry["shape"]).clone()
    return tensors, meta


def orthogonalize(g):
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g.T if g.shape[0] > g.shape[1] else g
    x = x / (x.norm() + 1e-7)
    for _ in range(5):
        A = x @ x.T
        B = b * A + c * (A @ A)
        x = a * x + B @ x
    return x.T if g.shape[0] > g.shape[1] else x


def trained_by_muon(name, p):
    head = name == "lm_head.weight" or name.endswith(".lm_head.weight") or name.startswith("head.") or ".head." in name
    return p.dim() == 2 and "embed" not in name and not head


def main():
    tensors, meta = read_safetensors(sys.argv[1])
    steps = int(meta["steps"])
    muon = meta["optimizer"] == "muon"
    names = [k[len("before."):] for k in tensors if k.startswith("before.")]
    params = {n: tensors["before." + n].clone().requires_grad_(False) for n in names}
    lr_max, wd, mu = 0.01, 0.1, 0.95
    matrices = [n for n in names if muon and trained_by_muon(n, params[n])]
    rest = [n for n in names if n not in matrices]
    decayed = [params[n] for n in rest if params[n].dim() >= 2]
    plain = [params[n] for n in rest if params[n].dim() < 2]
    adamw = torch.optim.AdamW([{"params": decayed, "weight_decay": wd}, {"params": plain, "weight_decay": 0.0}],
                              lr=lr_max, betas=(0.9, 0.95), eps=1e-8)
    momentum = {n: torch.zeros_like(params[n]) for n in matrices}
    for step in range(steps):
        lr = lr_max * (step + 1) / steps
        for n in names:
            params[n].grad = tensors[f"grad{step}.{n}"]
        for n in matrices:
            g = params[n].grad
            momentum[n] = mu * momentum[n] + g
            update = orthogonalize(g + mu * momentum[n])
            scale = 0.2 * math.sqrt(max(params[n].shape))
            params[n].mul_(1 - lr * wd).add_(update, alpha=-lr * scale)
        for group in adamw.param_groups:
            group["lr"] = lr
        adamw.step()
    worst = sorted(((float((params[n] - tensors["after." + n]).abs().max()), n) for n in names), reverse=True)
    for diff, n in worst[:5]:
        print(f"{n}: max |python - diloco| = {diff:.3e}")
    moved = max(float((tensors["after." + n] - tensors["before." + n]).abs().max()) for n in matrices or names)
    print(f"optimizer {meta['optimizer']}: {len(matrices)} matrices by Muon, {len(rest)} tensors by AdamW; "
          f"largest change of a parameter {moved:.3e}")
    if worst[0][0] > 1e-5:
        print(f"FAIL: {worst[0][1]} differs by {worst[0][0]:.3e} (> 1e-5)")
        return 1
    if moved < 1e-3:
        print("FAIL: the parameters barely moved; the check would prove nothing")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
