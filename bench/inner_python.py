"""The inner step a user would write in Python: the byte GPT of
scripts/export_model.py (diloco's model, parameter for parameter), eager
PyTorch (Debian's python3-torch, the same libtorch diloco links), AdamW with
weight decay on matrices only, gradient clipping at 1.0, random token
batches, one thread: what `bench_inner` measures for diloco's InnerLoop, in
the same table format, so scripts/bench can run the two alternately and
compare steps/s.

usage: /usr/bin/python3 bench/inner_python.py [--d-model 128] [--layers 2]
       [--heads 4] [--seq-len 64] [--batch 16] [--steps 20] [--blocks 3]
       [--threads 1] [--profile FILE]
--profile writes a Chrome trace of --steps more steps, after the timed ones,
from torch.profiler (bench/profile_step.py reads it).
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from export_model import ByteGPT  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    for flag, default in (("d-model", 128), ("layers", 2), ("heads", 4), ("seq-len", 64), ("batch", 16),
                          ("steps", 20), ("blocks", 3), ("threads", 1)):
        p.add_argument("--" + flag, type=int, default=default)
    p.add_argument("--profile", default="")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = ByteGPT(256, a.d_model, a.layers, a.heads, a.seq_len)
    decay = [q for q in model.parameters() if q.dim() >= 2]
    plain = [q for q in model.parameters() if q.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": plain, "weight_decay": 0.0}],
                            lr=2e-3, betas=(0.9, 0.95))
    params = list(model.parameters())

    def step():
        tokens = torch.randint(0, 256, (a.batch, a.seq_len + 1))
        opt.zero_grad(set_to_none=True)
        logits = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), tokens[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss.item()

    for _ in range(3):
        step()
    per_step = []
    for _ in range(a.blocks):
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step()
        per_step.append((time.perf_counter() - t0) / a.steps)
    if a.profile:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for _ in range(a.steps):
                step()
        prof.export_chrome_trace(a.profile)
    ms = 1e3 * statistics.median(per_step)
    n = sum(q.numel() for q in params)
    print("| python eager (torch %s) | gpt | cpu | fp32 | %.2fM | %.2f | %.0f |"
          % (torch.__version__, n / 1e6, ms, a.batch * a.seq_len / (ms / 1e3)))


if __name__ == "__main__":
    main()
