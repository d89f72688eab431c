"""Runs every benchmark and writes BENCHMARKS.md from what they print.

Each section states its command, prints the program's table as measured, and
derives its verdicts (targets met or not, paper findings reproduced or not)
from those same numbers. Ratios are measured side by side in one run; the
absolute times depend on whatever else the machine is doing.
"""
import argparse
import re
import datetime
import json
import math
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "diloco")


def env():
    e = dict(os.environ)
    e.update(OMPI_MCA_rmaps_base_oversubscribe="1", OMP_NUM_THREADS="1")
    if os.geteuid() == 0:
        e.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return e


def run(cmd, log=None, extra_env=None, show_stderr=False):
    """Runs cmd (a list) from the repository root; returns stdout, exits on
    failure; show_stderr: its stderr goes on to ours even when it succeeds."""
    shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in (extra_env or {}).items())
    shown = (shown + " " if shown else "") + " ".join(shlex.quote(c) for c in cmd)
    print(f"bench: {shown}", file=sys.stderr, flush=True)
    p = subprocess.run(cmd, cwd=ROOT, env=dict(env(), **(extra_env or {})), capture_output=True, text=True)
    if log:
        with open(log, "w") as f:
            f.write(p.stdout + p.stderr)
    if show_stderr:
        sys.stderr.write(p.stderr)
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
        sys.exit(f"bench: command failed ({p.returncode}): {shown}")
    return p.stdout


def rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def train_steps(sites, recipe, H, steps, extra=(), links=()):
    """One run of `steps` inner steps per site, checkpoints off, evaluated
    once at the end over 64 windows: its final eval loss, bytes between
    sites, wall time, and its command as shown (build/diloco, no --out)."""
    tmp = tempfile.mkdtemp()
    out_dir = os.path.join(tmp, "run")
    rounds = steps // H
    launch = ["mpirun", "-np", str(sites), "--bind-to", "none"]
    args = ["train", recipe] + list(links) + [
        "--set", f"topology.sites={sites}", "--set", f"sync.H={H}", "--set", f"outer.rounds={rounds}",
        "--set", "checkpoint.every=0", "--set", "metrics.eval_windows=64",
        "--set", f"metrics.eval_every={rounds}", "--set", f"inner.warmup_steps={steps // 20}"] + list(extra)
    run(launch + [BIN] + args + ["--out", out_dir], log=out_dir + ".log")
    r = rows(os.path.join(out_dir, "metrics.jsonl"))
    final = [x["eval_loss"] for x in r if x.get("eval_loss") is not None][-1]
    shutil.rmtree(tmp)
    return dict(H=H, final=final, bytes=r[-1]["bytes_sent"], wall=r[-1]["wall_s"],
                shown=" ".join(launch + ["build/diloco"] + args))


def machine():
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = os.cpu_count()
    mem = ""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f", {int(line.split()[1]) / 1024 / 1024:.0f} GiB"
    except OSError:
        pass
    return f"{cpu}, {cores} cores{mem}, {platform.system()} {platform.release()}"


def code(text):
    return "```\n" + text.strip("\n") + "\n```\n"


def yes(ok):
    return "met" if ok else "**not met**"


# ---------------------------------------------------------------- sections

def row_ms(text, prefix):
    """ms/step of the table row starting with `prefix`."""
    row = next(l for l in text.splitlines() if l.startswith(prefix))
    return float(row.split("|")[6])


def inner_overhead(q):
    # diloco's loop, the raw C++ loop (alternating inside bench_inner) and the
    # Python eager loop (a process of its own), alternated round by round.
    steps = "10" if q else "20"
    cmd = ["build/bench/bench_inner", "--steps", steps, "--blocks", "3"]
    py_cmd = ["/usr/bin/python3", "bench/inner_python.py", "--steps", steps, "--blocks", "3"]
    rounds = 1 if q else 3
    outs, pys = [], []
    for _ in range(rounds):
        outs.append(run(cmd))
        pys.append(run(py_cmd))
    med = lambda xs: sorted(xs)[len(xs) // 2]
    diloco_ms = med([row_ms(o, "| diloco InnerLoop") for o in outs])
    raw_ms_ = med([row_ms(o, "| raw libtorch") for o in outs])
    py_ms = med([row_ms(p, "| python eager") for p in pys])
    out = outs[len(outs) // 2]
    ratio = med([float(o.split("diloco / raw step time:")[1].split()[0]) for o in outs])
    vs_python = py_ms / diloco_ms
    # Margins of 3% and 10% need the medians of the full run's three alternations.
    one_alternation = "judged by the full run; a quick run alternates once"
    loader = float(out.split("loader / InnerLoop tokens/s:")[1].split()[0].rstrip("x"))
    tokens = 16 * 64
    lines = out.split("\n\ndiloco")[0].splitlines()
    def with_ms(line, ms):
        cells = line.split("|")
        cells[6], cells[7] = f" {ms:.2f} ", f" {tokens / (ms / 1e3):.0f} "
        return "|".join(cells)
    py_row = next(l for l in pys[len(pys) // 2].splitlines() if l.startswith("| python eager"))
    table = "\n".join([lines[0].replace("median of", f"median over {rounds} x"), lines[1],
                       with_ms(next(l for l in lines if l.startswith("| diloco InnerLoop")), diloco_ms),
                       with_ms(next(l for l in lines if l.startswith("| raw libtorch")), raw_ms_),
                       with_ms(py_row, py_ms),
                       next(l for l in lines if l.startswith("| loader"))])
    # A ~25M Llama, and the byte GPT as a TorchScript file (same sizes as the
    # first table), each against a raw loop of the same model.
    llama_cmd = ["build/bench/bench_inner", "--model", "llama", "--d-model", "512", "--layers", "8", "--heads", "8",
                 "--kv-heads", "4", "--steps", "2" if q else "4", "--blocks", "2" if q else "3"]
    llama = run(llama_cmd)
    with tempfile.TemporaryDirectory() as tmp:
        ts_file = os.path.join(tmp, "gpt.pt")
        run(["/usr/bin/python3", "scripts/export_model.py", "--kind", "gpt", "--out", ts_file])
        ts_cmd = ["build/bench/bench_inner", "--model", "torchscript", "--path", ts_file] + cmd[1:]
        ts = run(ts_cmd)
    def ratio_of(text):
        return float(text.split("diloco / raw step time:")[1].split()[0])
    def raw_ms(text):
        row = next(l for l in text.splitlines() if l.startswith("| raw libtorch"))
        return float(row.split("|")[6])
    ts_overhead = raw_ms(ts) / raw_ms(out)
    # The byte GPT at ~25M parameters against Python eager, alternated the same way.
    big = ["--d-model", "512", "--layers", "8", "--heads", "8", "--steps", "2", "--blocks", "3"]
    big_cmd = ["build/bench/bench_inner", "--only", "diloco"] + big
    big_py_cmd = ["/usr/bin/python3", "bench/inner_python.py"] + big
    big_c, big_p = [], []
    for _ in range(rounds):
        big_c.append(row_ms(run(big_cmd), "| diloco InnerLoop"))
        big_p.append(row_ms(run(big_py_cmd), "| python eager"))
    big_vs_python = med(big_p) / med(big_c)
    profile_cmd = ["/usr/bin/python3", "bench/profile_step.py", "--steps", "20", "--top", "10"]
    profile = "(The full run profiles the step; a quick run leaves it out.)" if q else run(profile_cmd)
    rows = "\n".join(l for t in (llama, ts) for l in t.splitlines() if l.startswith("| diloco") or l.startswith("| raw"))
    muon = muon_rows(q, cmd, rounds, med)
    return f"""## 1. Inner-loop overhead (`bench/inner_bench.cpp`)

diloco's `InnerLoop` (one replica, no exchange: flat parameter and gradient
buffers, the batch sampler, the LR schedule, clipping, the loss carried in
the gradient buffer) against a minimal hand-written libtorch loop on the
same model, batch (16 x 64 bytes), AdamW and one thread, in one process, in
alternating blocks; and against the same model and step in Python eager
PyTorch (`bench/inner_python.py`: what a user switching from Python would
compare with), run as its own process between the C++ runs; median step
time of each over the rounds.

Commands: `{' '.join(cmd)}` and `{' '.join(py_cmd)}`, alternated {rounds}x

{table.strip()}

diloco / raw step time: **{ratio:.3f}** (target ≤ 1.03: {one_alternation if q else yes(ratio <= 1.03)}).
diloco steps/s over Python eager's: **{vs_python:.3f}** (target ≥ 1.15: {one_alternation if q else yes(vs_python >= 1.15)}).
At ~25M parameters (the byte GPT with `{' '.join(big[:6])}`, batch 16 x 64,
`{' '.join(big_cmd)}` and `{' '.join(big_py_cmd)}` alternated {rounds}x): diloco
{med(big_c):.0f} ms, Python eager {med(big_p):.0f} ms per step, diloco steps/s over Python's
**{big_vs_python:.3f}** (target ≥ 1.05: {yes(big_vs_python >= 1.05)}).

Where the step's time goes (`{' '.join(profile_cmd)}`): both loops under
libtorch's profiler (the C++ legacy autograd profiler, torch.profiler in
Python), calls and self time per operator. The C++ profiler adds its own
cost to every call it records, so its totals exceed the wall time and the
two compare only loosely; the wall-time row is the unprofiled measurement.
The calls are what to compare: where the C++ column shows time for an
operator Python's shows almost none (`aten::select`, `aten::resolve_conj`,
`aten::as_strided`: ATen's batched matrix product takes one view per
matrix of the batch, in both loops alike), the call counts are the same
and the time is the profiler's.

What diloco's loop does that Python's does not, and the operators it calls
more often because of it: AdamW in one vectorized pass over the flat
buffers (Python's AdamW makes about nine per parameter: its `mul_`, `add_`,
`addcmul_`, `sqrt`, `div` and `addcdiv_` rows); the attention's scale and
mask inside one `aten::baddbmm` (run as one `aten::addmm_` per matrix of
the batch; its backward scales by 1/sqrt(d) with `aten::mul`) in place of
Python's `div` and `masked_fill`; the fused q/k/v product cut with
`aten::split` (`narrow`, `slice`), whose backward is one `aten::cat` into
the product's layout; and libtorch's CPU tensors from the host block cache
(`src/inner/host_block_cache.h`), so the step's elementwise operators write
to memory reused from the step before, not to fresh pages.

{profile.strip()}

The loader row is the batch sampler alone at the same batch shape, over an
llm.c shard (pread, warm page cache), ids checked as in training: it
serves tokens **{loader:.0f}x** as fast as the inner step consumes them
(target ≥ 100x: {yes(loader >= 100)}).

The same for a ~25M-parameter Llama (`{' '.join(llama_cmd[1:])}`) and for
the byte GPT scripted in Python (`scripts/export_model.py --kind gpt`, then
`--model torchscript`), each against a raw loop of that same model:

| loop | model | device | precision | params | ms/step | tokens/s |
|---|---|---|---|---:|---:|---:|
{rows}

diloco / raw step time: llama **{ratio_of(llama):.3f}**, TorchScript GPT **{ratio_of(ts):.3f}**.
TorchScript's own overhead (its raw loop against the native GPT's raw loop
above, same sizes): **{ts_overhead:.3f}x** the step time.

{muon}"""


def muon_rows(q, cmd, rounds, med):
    """Muon against AdamW on one site: step time (alternating in one process) and loss at equal steps."""
    muon_cmd = cmd + ["--optimizer", "muon"]
    ratios = [float(run(muon_cmd).split("Muon / AdamW step time:")[1].split()[0]) for _ in range(rounds)]
    steps = 120 if q else 400
    no_links = ["--set", "links.latency_ms=[]", "--set", "links.bandwidth_mbps=[]"]
    runs = {optimizer: train_steps(1, "recipes/data-parallel.toml", 10, steps,
                                   ["--set", f"inner.optimizer={optimizer}"], no_links)
            for optimizer in ("adamw", "muon")}
    losses = {optimizer: r["final"] for optimizer, r in runs.items()}
    change = 100 * (losses["muon"] / losses["adamw"] - 1)
    return f"""### Muon as the inner optimizer

`inner.optimizer = "muon"`: Muon on the hidden matrices, AdamW on the
embeddings, norms and biases, one site of one rank, {steps} inner steps of
the quickstart model (`{runs["muon"]["shown"]}`, and the same with `adamw`):

| inner optimizer | final eval loss | step time against AdamW (`{' '.join(muon_cmd)}`, median of {rounds}) |
|---|---:|---:|
| AdamW | {losses["adamw"]:.4f} | 1.000 |
| Muon | {losses["muon"]:.4f} ({change:+.1f}%) | {med(ratios):.3f} |

Muon's five Newton-Schulz iterations cost up to 15 min(rows, cols)² x
max(rows, cols) multiply-adds per matrix and step, whatever the batch: at
this model's batch of 1024 tokens that is a large share of the step; it
shrinks as the batch grows.
"""


def codecs(q):
    cmd = ["build/bench/bench_compression"] + (["--elements", "4194304", "--repeats", "3"] if q else [])
    throughput = run(cmd)
    train_cmd = ["bench/codec_training.sh"] + (["--set", "outer.rounds=4"] if q else [])
    # A quick run trains the codecs the targets name.
    training = run(train_cmd, extra_env={"CODECS": "none int8 int4 topk"} if q else None)
    losses = {}
    for line in training.splitlines():
        parts = line.split()
        if len(parts) >= 7 and parts[0] in ("none", "fp16", "int8", "int4", "topk", "topk+int8", "sign"):
            losses[parts[0]] = (float(parts[2]), float(parts[4]))
    speed = {}
    for line in throughput.splitlines():
        cells = line.split()
        if len(cells) == 8 and cells[0] not in ("codec", "#"):
            speed[cells[0]] = (float(cells[2]), float(cells[4]))  # encode, decode as fractions of memcpy
    short = [f"{c} {'enc' if e < need else 'dec'} {min(e, d):.2f}"
             for c, (e, d) in speed.items() for need in [0.6 if c in ("int8", "fp16") else 0.3] if min(e, d) < need]
    none_enc = speed["none"][0]
    base = losses["none"]
    change = {c: 100 * (v[0] / base[0] - 1) for c, v in losses.items()}
    bytes_cut = {c: base[1] / v[1] for c, v in losses.items()}
    return f"""## 2. Compression

### Codec throughput (`bench/compression_bench.cpp`)

Encode and decode of fp32 input (one thread) as a ratio to memcpy of the same
bytes, timed in alternation with that codec's encode and decode (the last
column: memcpy's rate moves between runs on this machine, 7-12 GB/s, so each
row has its own baseline taken under the same conditions); compression
ratio; RMS error relative to the input's RMS.

Command: `{' '.join(cmd)}`

{code(throughput)}
{throughput_verdict(q, short, none_enc)}

### Training effect of each codec (`bench/codec_training.sh`)

`recipes/quickstart.toml` (4 ranks = 2 sites x 2) once per codec, same seed,
error feedback on for lossy codecs (decay 0.5), top-k ratio 0.1.

Command: `{'CODECS="none int8 int4 topk" ' if q else ''}{' '.join(train_cmd)}`

{code(training)}
Targets: int8 within 1% of fp32 ({change['int8']:+.2f}%: {yes(abs(change['int8']) <= 1)}), int4 within 3%
({change['int4']:+.2f}%: {yes(change['int4'] <= 3)}), top-k 0.1 with error feedback within 5%
({change['topk']:+.2f}%: {yes(change['topk'] <= 5)}), int8 about 4x fewer bytes ({bytes_cut['int8']:.2f}x).
"""


def throughput_verdict(q, short, none_enc):
    targets = ("Targets (at the full size, 16M values): every codec's encode and decode at least 0.3 of memcpy, "
               "int8 and fp16\nat least 0.6; `none` (a copy and its CRC32C) encodes at least 0.7 of memcpy")
    if q:
        # The ratios move with the size (`none` encoded at 0.31 of memcpy at
        # 4M values and 0.79 at 16M in one pair of runs): not judged here.
        return f"{targets}: judged by the full run (this quick run's 4M values are shown, not judged)."
    return (f"{targets}: {yes(not short)}{'' if not short else ' (short: ' + ', '.join(short) + ')'}; "
            f"`none` {yes(none_enc >= 0.7)} ({none_enc:.2f}).")


def bound_verdict(q, over, worst, worst_codec):
    if q:
        # At 1M values the encode, decode and start of each exchange weigh
        # more against the link time than at the full run's 4M.
        return (f"Targets ≤ 1.10x of the bound with 2 sites, ≤ 1.25x with 4, at 4M values: judged by the full run "
                f"(this quick run's 1M values are shown, not judged; worst {worst:.2f}x, {worst_codec}).")
    return (f"Target ≤ 1.10x of the bound with 2 sites (one rank per core): {yes(not over[2])}"
            f"{'' if not over[2] else ' for ' + ', '.join(over[2])};\n≤ 1.25x with 4 sites (two ranks per core): "
            f"{yes(not over[4])}{'' if not over[4] else ' for ' + ', '.join(over[4])}; worst {worst:.2f}x ({worst_codec}).")


def exchange_vs_bound(q):
    values = "1000000" if q else "4000000"
    out = []
    worst = 0.0
    worst_codec = ""
    cmds = []
    for sites in (2, 4):
        cmd = ["mpirun", "-np", str(sites), "--bind-to", "none", "build/bench/bench_exchange", "--mode", "link",
               "--values", values, "--latency-ms", "50", "--mbps", "100", "--repeats", "2" if q else "3"]
        cmds.append(" ".join(cmd))
        table = run(cmd)
        out.append(f"{sites} sites:\n\n{table.strip()}\n")
        for line in table.splitlines()[2:]:
            cells = [c.strip() for c in line.strip("|").split("|")]
            r = float(cells[4])
            if r > worst:
                worst, worst_codec = r, f"{cells[0]} ({sites} sites)"
    over = {2: [], 4: []}
    limit = {2: 1.10, 4: 1.25}  # 2 sites: one rank per core; 4 sites: two ranks share each core
    for sites, block in zip((2, 4), out):
        for line in block.splitlines():
            if line.startswith("| ") and not line.startswith("| codec"):
                cells = [c.strip() for c in line.strip("|").split("|")]
                if float(cells[4]) > limit[sites]:
                    over[sites].append(f"{cells[0]} ({float(cells[4]):.2f}x)")
    return f"""## 3. One exchange against the link's limit (`bench/exchange_bench.cpp`)

One all-gather exchange of {int(values) / 1e6:.0f}M values per codec (error feedback on
for lossy codecs) between site leaders whose links are emulated at 100 Mbit/s
and 50 ms, against the lower bound for the same payload: 2 latencies (the
weights, then the payload) + payload bytes / bandwidth. Measured is the
median over exchanges, averaged over sites; it includes encoding, decoding,
error feedback and the real MPI transfer on this machine (which runs inside
the emulated link time). The payload is the largest one a site sent.

Commands: `{cmds[0]}` and `{cmds[1]}`

{chr(10).join(out)}
{bound_verdict(q, over, worst, worst_codec)}
What is left above the bound is compute on this machine, not the link: the
emulated link time runs alongside the real transfer, and error feedback
(encoding the own payload and decoding it) runs while the sites' reports
cross the link (the first latency), but decoding every site's payload comes
after the payload's transfer, and with 4 sites 4 ranks share 2 cores.
"""


def dp_settings(q, Hs, H1, tau):
    if q:
        return (f"A quick run tries data-parallel and DiLoCo (Nesterov 0.7/0.9) at H = {H1}, then the\n"
                f"longer runs at H = {H1} with int8 and H = {2 * H1} with int4 (error feedback on); the\n"
                "full run adds local SGD, more H, streaming and int8 at the shorter length.")
    return (f"DiLoCo uses Nesterov 0.7/0.9 with H ∈ {{{', '.join(map(str, Hs))}}}, then H = {H1} with int8 and with\n"
            f"streaming (2 fragments, τ = {tau}, α = 0.5), and longer runs with larger H and\n"
            "int8/int4 (error feedback on for lossy codecs).")


def diloco_vs_dp(q, report_dir):
    steps = 120 if q else 400
    site_counts = (2,) if q else (2, 4)
    Hs = [steps // 40, steps // 8, steps // 2]
    H1 = Hs[1]
    tau = max(1, H1 // 10)
    text = [f"""## 4. DiLoCo against data parallelism over a slow link

Each site is 1 rank; every site's link is emulated at 100 Mbit/s and 50 ms.
Every run takes {steps} inner steps per site on the quickstart model (0.44M
params, batch 16 x 64 per rank) unless its name says `x2` ({2 * steps} steps).
`data-parallel` is the true baseline (`recipes/data-parallel.toml`,
`sync.mode = "data-parallel"`): every step the gradients of all sites are
averaged through the same exchange and link (fp32, no agreement message) and
one AdamW update is applied everywhere, as DDP would over these links.
`local SGD H=1` is the former baseline (`recipes/local-sgd-h1.toml`): each
site steps its own AdamW, then the parameters are averaged every step.
{dp_settings(q, Hs, H1, tau)} `vs DP` is the final eval
loss against data-parallel's; `to DP loss` is the wall time and the bytes
sent at the first evaluation at or below data-parallel's final eval loss.
The report page of each comparison is linked below its table.
"""]
    for sites in site_counts:
        lat = ",".join(["50.0"] * sites)
        bw = ",".join(["100.0"] * sites)
        common = ["--set", f"topology.sites={sites}", "--set", f"links.latency_ms=[{lat}]",
                  "--set", f"links.bandwidth_mbps=[{bw}]", "--set", "checkpoint.every=0",
                  "--set", "metrics.eval_windows=64"]
        # name, recipe, H, inner steps, extra flags
        int8 = ["--set", "compression.codec=int8"]
        int4 = ["--set", "compression.codec=int4"]
        configs = [("data-parallel", "recipes/data-parallel.toml", 10, steps, [])]
        if not q:
            configs.append(("local SGD H=1", "recipes/local-sgd-h1.toml", 1, steps, []))
        for H in (Hs if not q else [H1]):
            configs.append((f"diloco H={H}", "recipes/quickstart.toml", H, steps, []))
        if not q:
            configs.append((f"diloco H={H1} int8", "recipes/quickstart.toml", H1, steps, int8))
            configs.append((f"diloco H={H1} streaming", "recipes/quickstart.toml", H1, steps,
                            ["--set", "sync.overlap=streaming", "--set", "sync.fragments=2",
                             "--set", f"sync.overlap_steps={tau}"]))
        configs.append((f"diloco H={H1} int8 x2", "recipes/quickstart.toml", H1, 2 * steps, int8))
        if not q:
            configs.append((f"diloco H={2 * H1} int8 x2", "recipes/quickstart.toml", 2 * H1, 2 * steps, int8))
        configs.append((f"diloco H={2 * H1} int4 x2", "recipes/quickstart.toml", 2 * H1, 2 * steps, int4))
        results = []
        tmp = tempfile.mkdtemp()
        dirs = []
        for name, recipe, H, n_steps, extra in configs:
            rounds = n_steps // H
            out_dir = os.path.join(tmp, name.replace(" ", "-").replace("=", ""))
            cmd = ["mpirun", "-np", str(sites), "--bind-to", "none", BIN, "train", recipe] + common + [
                "--set", f"sync.H={H}", "--set", f"outer.rounds={rounds}",
                "--set", f"metrics.eval_every={max(1, rounds // 10)}", "--set", f"inner.warmup_steps={steps // 20}",
                "--out", out_dir] + extra
            run(cmd, log=out_dir + ".log")
            r = rows(os.path.join(out_dir, "metrics.jsonl"))
            evals = [(x["wall_s"], x["bytes_sent"], x["eval_loss"]) for x in r if x.get("eval_loss") is not None]
            results.append(dict(name=name, final=evals[-1][2], bytes=r[-1]["bytes_sent"], wall=r[-1]["wall_s"],
                                evals=evals, cmd=cmd))
            dirs.append(out_dir)
        dp = results[0]
        text.append(f"\n{sites} sites (the data-parallel run: `mpirun -np {sites} --bind-to none build/diloco train recipes/data-parallel.toml --set topology.sites={sites} --set links.latency_ms=[{lat}] --set links.bandwidth_mbps=[{bw}] --set sync.H=10 --set outer.rounds={steps // 10} ...`):\n")
        text.append("| run | final eval loss | vs DP | bytes between sites | wall s | to DP loss: s | to DP loss: bytes |\n"
                    "|---|---:|---:|---:|---:|---:|---:|")
        for res in results:
            reach = next(((w, b) for w, b, e in res["evals"] if e <= dp["final"] + 1e-9), None)
            res["reach"] = reach
            text.append(f"| {res['name']} | {res['final']:.4f} | {100 * (res['final'] / dp['final'] - 1):+.1f}% | "
                        f"{res['bytes'] / 1e6:.1f} MB | {res['wall']:.1f} | "
                        f"{'not reached' if reach is None else f'{reach[0]:.1f}'} | "
                        f"{'not reached' if reach is None else f'{reach[1] / 1e6:.1f} MB'} |")
        diloco = [r for r in results if r["name"].startswith("diloco")]
        close = [r for r in diloco if r["final"] <= 1.03 * dp["final"]]
        local = next((r for r in results if r["name"].startswith("local SGD")), None)
        verdict = [f"Data-parallel: {dp['final']:.4f} in {dp['wall']:.0f} s with {dp['bytes'] / 1e6:.0f} MB"
                   + ("." if local is None else
                      f"; local SGD H=1 (the former baseline): {local['final']:.4f} "
                      f"({100 * (local['final'] / dp['final'] - 1):+.1f}%) in {local['wall']:.0f} s.")]
        if close:
            best = max(close, key=lambda r: dp["bytes"] / r["bytes"])
            verdict.append(f"DiLoCo settings within 3% of data-parallel's final loss: {len(close)} of {len(diloco)}; "
                           f"the best bytes reduction among them: {best['name']}, {best['final']:.4f} "
                           f"({100 * (best['final'] / dp['final'] - 1):+.1f}%), {dp['bytes'] / best['bytes']:.0f}x fewer "
                           f"bytes in {dp['wall'] / best['wall']:.1f}x less wall time.")
        else:
            verdict.append("No DiLoCo setting tried here ends within 3% of data-parallel's final loss.")
        reached = [r for r in diloco if r["reach"] is not None]
        if reached:
            quickest = min(reached, key=lambda r: r["reach"][0])
            verdict.append(f"Reaching data-parallel's final loss: {len(reached)} of {len(diloco)} DiLoCo settings; "
                           f"soonest {quickest['name']} after {quickest['reach'][0]:.0f} s "
                           f"({dp['wall'] / quickest['reach'][0]:.1f}x sooner) and "
                           f"{quickest['reach'][1] / 1e6:.1f} MB ({dp['bytes'] / quickest['reach'][1]:.0f}x fewer bytes).")
        else:
            verdict.append("No DiLoCo setting tried here reaches data-parallel's final loss.")
        text.append("\n" + " ".join(verdict))
        page = os.path.join(report_dir, f"BENCHMARKS-dp-vs-diloco-{sites}sites.html")
        run([BIN, "report"] + dirs + ["--out", page, "--title", f"DiLoCo against data parallelism, {sites} sites"])
        text.append(f"\nCharts (`diloco report`: loss against steps, wall time and bytes, utilization and H per "
                    f"site, links): [{os.path.basename(page)}]({os.path.basename(page)})\n")
        shutil.rmtree(tmp)
    return "\n".join(text) + "\n"


def nesterov_verdict(q, nesterov, averaging, rounds):
    change = f"({100 * (nesterov / averaging - 1):+.2f}%)"
    if q:
        return f"judged by the full run {change}: the paper measures it over 88 rounds, a quick run has {rounds}"
    if nesterov < averaging:
        return f"yes {change}"
    return (f"**no** {change}. The paper measures it over many outer steps (88 rounds of H = 500); here there are "
            f"{rounds} rounds, too few for momentum 0.9 to pay back its overshoot")


def ablations(q):
    steps = 120 if q else 400
    base = ["--set", "checkpoint.every=0", "--set", f"inner.warmup_steps={steps // 20}",
            "--set", "metrics.eval_windows=128"]

    done = {}  # a run asked for twice (the same seed and settings) is run once

    def train(sites, H, extra=()):
        key = (sites, H, tuple(extra))
        if key not in done:
            done[key] = train_once(sites, H, extra)
        return done[key]

    def train_once(sites, H, extra):
        tmp = tempfile.mkdtemp()
        out_dir = os.path.join(tmp, "run")
        cmd = ["mpirun", "-np", str(sites), "--bind-to", "none", BIN, "train", "recipes/quickstart.toml",
               "--set", f"topology.sites={sites}", "--set", f"sync.H={H}", "--set", f"outer.rounds={steps // H}",
               "--set", f"metrics.eval_every={steps // H}", "--out", out_dir] + base + list(extra)
        run(cmd, log=out_dir + ".log")
        r = rows(os.path.join(out_dir, "metrics.jsonl"))
        shutil.rmtree(tmp)
        return r[-1]["eval_loss"]

    H0 = steps // 8
    text = [f"""## 5. Ablations against the DiLoCo paper (small scale)

Quickstart model, {steps} inner steps per site, 1 rank per site, no link
emulation (these compare losses, not times), final eval loss on 128
held-out windows. Command pattern: `mpirun -np SITES build/diloco train
recipes/quickstart.toml --set topology.sites=SITES --set sync.H=H --set
outer.rounds={steps}/H ...` with the changes named in each row.
"""]
    nesterov = train(2, H0)
    averaging = train(2, H0, ["--set", "outer.optimizer=sgd", "--set", "outer.lr=1.0", "--set", "outer.momentum=0.0"])
    text.append(f"""### Outer optimizer (2 sites, H = {H0})

| outer optimizer | final eval loss |
|---|---:|
| Nesterov, lr 0.7, momentum 0.9 | {nesterov:.4f} |
| SGD lr 1, no momentum (parameter averaging) | {averaging:.4f} |

Paper: Nesterov momentum beats plain averaging. Reproduced here: {nesterov_verdict(q, nesterov, averaging, steps // H0)}.
""")
    Hs = [steps // 40, steps // 8, steps // 2] if q else [steps // 40, steps // 16, steps // 8, steps // 4, steps // 2]
    h_loss = [(H, train(2, H)) for H in Hs]
    text.append("### Sync period H (2 sites, Nesterov)\n\n| H | rounds | final eval loss |\n|---:|---:|---:|")
    for H, loss in h_loss:
        text.append(f"| {H} | {steps // H} | {loss:.4f} |")
    monotone = all(a[1] <= b[1] + 0.01 for a, b in zip(h_loss, h_loss[1:]))
    best_H, best_loss = min(h_loss, key=lambda x: x[1])
    above = [x for x in h_loss if x[0] >= best_H]
    graceful = all(a[1] <= b[1] + 0.01 for a, b in zip(above, above[1:]))
    text.append(f"""
Paper: more frequent syncs (smaller H) give lower loss, and the loss degrades
gracefully as H grows. Reproduced here: {'yes' if monotone else '**only from H = ' + str(best_H) + ' up**'}: the
lowest loss is at H = {best_H} ({best_loss:.4f}); from there up the loss {'rises steadily' if graceful else 'moves unevenly'}
(H = {Hs[-1]}: {100 * (h_loss[-1][1] / best_loss - 1):+.2f}%).{'' if monotone else ' Below it the outer Nesterov step (lr 0.7, momentum 0.9) is applied after only a few inner steps and overshoots; the paper tunes H in the hundreds, where this does not arise.'}
""")
    site_counts = (1, 2, 4) if q else (1, 2, 4, 8)
    s_loss = [(s, train(s, H0)) for s in site_counts]
    text.append(f"### Number of sites at equal steps per site (H = {H0})\n\n| sites | final eval loss |\n|---:|---:|")
    for s, loss in s_loss:
        text.append(f"| {s} | {loss:.4f} |")
    better = all(b[1] <= a[1] + 0.005 for a, b in zip(s_loss, s_loss[1:]))
    text.append(f"""
Paper: with each site doing the same steps, more sites (more total compute)
lower the loss, with diminishing returns. Reproduced here: {'yes' if better else '**no**'}.
""")
    iid = train(4, H0)
    non_iid = train(4, H0, ["--set", "data.sharding=\"contiguous\""])
    text.append(f"""### IID against non-IID shards (4 sites, H = {H0})

| sharding | final eval loss |
|---|---:|
| iid (every site samples all text) | {iid:.4f} |
| contiguous (site i sees only the i-th slice) | {non_iid:.4f} |

Paper: DiLoCo is robust to non-IID data: only slightly worse than IID.
Here non-IID is {100 * (non_iid / iid - 1):+.2f}% against IID; reproduced (within 5%):
{'yes' if non_iid <= 1.05 * iid else '**no**'}.
""")
    return "\n".join(text) + "\n"


def scaling(q):
    sizes = [1_000_000, 10_000_000] if q else [1_000_000, 3_000_000, 10_000_000, 30_000_000, 100_000_000]
    lines = ["| params | fp32 MB | exchange s | outer step s | outer total s | peak RSS MB | RSS / param bytes |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    totals = []
    for n in sizes:
        out = run(["mpirun", "-np", "2", "--bind-to", "none", "build/bench/bench_exchange", "--mode", "outer",
                   "--values", str(n), "--repeats", "3"])
        row = out.strip().splitlines()[-1]
        lines.append(row)
        cells = [c.strip() for c in row.strip("|").split("|")]
        totals.append((n, float(cells[4]), float(cells[5])))
    (n0, t0, m0), (n1, t1, m1) = totals[0], totals[-1]
    slope = math.log(t1 / t0) / math.log(n1 / n0)
    mem_slope = (m1 - m0) / ((n1 - n0) * 4 / 1e6)
    return f"""## 6. Outer step against model size (`bench/exchange_bench.cpp --mode outer`)

Exchange (fp32, 2 sites on this machine's MPI, no link emulation) plus the
outer Nesterov step, median of 3, and the rank's peak resident memory, for
{sizes[0] / 1e6:.0f}M to {sizes[-1] / 1e6:.0f}M parameters.

Command: `mpirun -np 2 build/bench/bench_exchange --mode outer --values N --repeats 3`

{chr(10).join(lines)}

Outer-step time grows as N^{slope:.2f} (linear is 1.00); memory grows by
{mem_slope:.2f} bytes of RSS per parameter byte (global params, outer
momentum, the pseudo-gradient: 3, plus exchange parts of at most 8 MB).
"""


def memory(q):
    cmd = ["bench/memory.sh"] + (["256", "4"] if q else [])
    out = run(cmd)
    none = [l for l in out.splitlines() if "codec none" in l][0]
    ratio = float(none.strip("|").split("|")[3].strip().rstrip("x"))
    return f"""## 7. Memory of the outer state (`bench/memory.sh`)

Peak resident memory of one `diloco train` rank (2 sites x 1 rank) over the
inner loop alone on the same model and batch, as a multiple of the fp32
parameter bytes.

Command: `{' '.join(cmd)}`

{out.strip()}

Target (GPU issue): at most about 3x the parameter bytes over plain training
with fp32 pseudo-gradients: {ratio:.2f}x, {'judged by the full run: at this quick size (a few million parameters) the MPI runtime and exchange buffers of a few MB, which do not grow with the model, dominate' if q else yes(ratio <= 3.2)}. Lossy codecs keep an
error-feedback residual (+1x, state that must persist between rounds);
top-k payloads cannot be cut into parts, so whole payloads of every site
are held during its exchange.
"""


def overlap(q):
    cmd = ["bench/overlap.sh"] + (["--set", "outer.rounds=5"] if q else [])
    # A quick run measures the peak exchange of 1 and 4 fragments only.
    out = run(cmd, extra_env={"FRAGMENTS": "1 4"} if q else None)
    util = {}
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0] in ("none", "delayed", "streaming") and len(parts) >= 6:
            util[parts[0]] = (float(parts[2]), float(parts[3]), float(parts[4]))
    return f"""## 8. Hiding the exchange behind compute (`bench/overlap.sh`)

`recipes/streaming.toml` (2 sites of 1 rank, fp32 over an emulated 20 Mbit/s,
5 ms link) once per `sync.overlap` mode at the same H; then the largest
single exchange against the fragment count. `utilization` is rank 0's
site, `util_slowest` the slower site (which waits for nobody), `exposed` the
share of wall time spent on sync while not computing (means over the middle
rounds).

Command: `{'FRAGMENTS="1 4" ' if q else ''}{' '.join(cmd)}`

{code(out)}
Blocking exposes {util['none'][2]:.2f} of wall time; delayed {util['delayed'][2]:.3f}, streaming
{util['streaming'][2]:.3f}. Utilization ≥ 0.95 of the slower site: delayed {util['delayed'][1]:.3f}
({yes(util['delayed'][1] >= 0.95)}), streaming {util['streaming'][1]:.3f} ({yes(util['streaming'][1] >= 0.95)}). Rank 0's
site also waits for the slower site at every exchange (the two ranks share
2 cores and one steps 10-25% slower in every mode); that wait is not
communication.
"""


def data_startup(q):
    cmd = ["/usr/bin/python3", "bench/data_startup.py"] + (["--gb", "0.5", "--repeats", "1"] if q else [])
    out = run(cmd)
    return f"""## 9. Start-up on large token shards (`bench/data_startup.py`)

`diloco train` (2 ranks, one round of 2 steps on a tiny GPT) on llm.c shards
of 2 MB and of {'0.5' if q else '2'} GB, written by the program and deleted after; wall time of
the whole run and peak RSS of the largest rank. Only the shards' headers
and a sample of 64 blocks of 4096 ids are read at start-up, and each window
on its own during training, so the larger
set costs the same. `diloco check` reads every id, and so grows with size.

Command: `{' '.join(cmd)}`

{out.strip()}
"""


def recovery(q):
    cmd = ["bench/recovery.sh", "1", "5"] if q else ["bench/recovery.sh", "2", "5", "10"]
    out = run(cmd)
    return f"""## 10. Losing and regaining a site launched apart (`bench/recovery.sh`)

Three sites, each its own `mpirun` (one of two ranks), joined through a real
`ompi-server` (`topology.join = "rendezvous"`), the small GPT at H = 20; one
site is killed with kill -9 mid-round and launched again with `--resume
auto`, then another site's leader is stopped with SIGSTOP. Per run: seconds
from the kill (and from the SIGSTOP) to the survivors' next completed round,
and from the relaunch to the relaunched site's first completed round.
A loss is noticed when `sync.timeout_s` passes, then the survivors listen for
each other for `rendezvous.ping_s`, agree and redo the round: the first
column is about timeout + ping + one exchange. The second is the process's
start-up, its admission at the next round boundary and one round.

Command: `{' '.join(cmd)}`

{out.strip()}
"""


def fault_bounds(rows):
    """The bound each cell's recovery is held to: the deadline D (to notice),
    the alarm window (at most max(P, D)), at most three agreement attempts of
    P, and one round (the redone one); admission cells run to the first round
    with the newcomer, one round more. A round's inner steps take longer with
    more sites on the same cores: its length scales with the sites (3 sites
    the base). Returns a markdown table by kind."""
    P = 2.0
    kinds = {}
    for r in rows:
        c = [x.strip() for x in r.strip().strip("|").split("|")]
        n, sig, phase = int(c[0]), c[1], c[3]
        try:
            seconds = float(c[5])
        except ValueError:
            continue  # no majority left (a second loss): nobody goes on
        if sig == "cut":
            kind, D, round_s, rounds = "cut link", 5.0, 1.0, 1
        elif phase == "admission":
            kind, D, round_s, rounds = "admission", 3.0, 3.0, 2
        elif phase.startswith("join-"):
            kind, D, round_s, rounds = "newcomer lost", 3.0, 3.0, 1
        else:
            kind, D, round_s, rounds = "inner, exchange", 3.0, 0.5, 1
        bound = D + max(P, D) + 3 * P + rounds * round_s * n / 3
        key = f"{kind}, {n} sites"
        cells, worst, slack = kinds.get(key, (0, 0.0, None))
        kinds[key] = (cells + 1, max(worst, seconds), (seconds, bound) if slack is None or
                      bound - seconds < slack[1] - slack[0] else slack)
    lines = ["| cells | count | largest recovery (s) | tightest: recovery / bound (s) | held |",
             "|---|---:|---:|---:|---|"]
    for key, (cells, worst, (seconds, bound)) in kinds.items():
        lines.append(f"| {key} | {cells} | {worst:.1f} | {seconds:.1f} / {bound:.1f} | "
                     f"{'yes' if seconds <= bound else '**no**'} |")
    return "\n".join(lines)


def faults(q):
    if q:  # about an hour: left to the full run (and two cells to the e2e_fault_cells test)
        return """## 14. The membership's fault matrix (`bench/faults.sh`)

A quick run leaves the matrix (about an hour) to the full run; the `e2e_fault_cells` test runs two of its cells.
"""
    cmd = ["bench/faults.sh", "--report", "mpirun", "build/diloco"]
    out = run(cmd, show_stderr=True)  # where a failing cell's logs were kept
    rows = [l for l in out.splitlines() if l.startswith("| 3 ") or l.startswith("| 4 ")]
    failed = [r for r in rows if "FAILED" in r]
    return f"""## 14. The membership's fault matrix (`bench/faults.sh`)

Sites launched apart (each its own `mpirun`, one real `ompi-server`), each
the real trainer (`diloco train` of a GPT with d_model 64 on the bundled
corpus, rounds of about 0.5 s (H 30), `sync.timeout_s` 3 s,
`rendezvous.ping_s` 2 s, a checkpoint every 2 rounds; the fault is raised
by the recipe's `[debug] fault_*` keys on the real code paths). In each
cell one site kills (SIGKILL) or stops (SIGSTOP) itself in round 6 (every
site, 3 and 4 sites): halfway through its inner steps (`inner`), as it
enters the round's exchange (`exchange`), as the group admits a newcomer
queued at the door (`admission`, rounds of about 3 s, H 180), or as it
enters the recovery from another site's loss (`recovery`: a second loss,
so no strict majority of the last membership is left and every site must
stop with exit 4). A stopped site is woken after the survivors went on and
must exit 4 (with a checkpoint); the lost site is launched again with
`--resume auto` and must be admitted. A cell holds when every process ended
with its documented exit code, every site finished every round with all
members and the same final eval loss (the trainer also compares a hash of
the global params every round and stops on a mismatch, exit 3), and the
relaunched site was admitted within 2 rounds of its knock. Recovery: from
the fault to the survivors' next completed round (the deadline, 3 s, is its
floor); in admission cells, to their first round with the newcomer admitted
(when the keeper is lost, the newcomer notices its door's silence and knocks
at the next keeper's door).

Newcomer cells (site `new`, 3 sites, rounds of about 3 s): a fourth site,
launched as round 5 ends, is killed (`kill`) or gives up (`exit`, exit 2,
as its own join timeout would) at a step of joining: its hello sent
(`join-hello`), queued at the door, told the port (`join-port`), its
"ready" sent (`join-ready`: the group is entering MPI's accept, which only
the keeper's stand-in can complete in its place), connected (before
proving itself on the MPI connection), merged (before the roster). The
group must go on without it (recovery: from the fault to its next round),
and the newcomer, launched again, must be admitted within 2 rounds.

Cut cells (`cut`, the real trainer, 3 sites as network namespaces through
`scripts/netsim --rendezvous`, quickstart model, `sync.timeout_s` 5): the
site's link goes down 8 s in; the cut-off site must stop as a minority
(exit 4) while the others go on (recovery: from the cut to the first
metrics row that lists it as left); its link is back 6 s after the cut and
it is launched again with `--resume auto`; every site must finish all 30
rounds with 3 members and the same final eval loss (the trainer also
compares a hash of the global params every round). Skipped where network
namespaces cannot be made.

Command: `{' '.join(cmd)}`

{out.strip()}

{len(rows) - len(failed)} of {len(rows)} cells hold{'.' if not failed else ': **' + str(len(failed)) + ' fail** (rows marked FAILED).'}

The bound each recovery is held to: the deadline D (3 s; 5 s in cut cells)
to notice, the alarm window (at most max(P, D)), at most three agreement
attempts of P (2 s) and the redone round (0.5 s; 3 s in admission and
newcomer cells, 1 s in cut cells; with 4 sites on the 2 cores, 4/3 of
that); admission cells run to the first round with the newcomer, a round
more (the keeper lost, the newcomer waits out its door's silence, max(D,
3 s), and knocks at the next keeper's door):

{fault_bounds(rows)}
"""


def plan_check(q):
    cmd = ["bench/plan_memory.sh"] + (["--quick"] if q else [])
    mem = run(cmd)
    rows = [l.strip("|").split("|") for l in mem.splitlines() if l.startswith(("| gpt", "| llama"))]
    rows = [r for r in rows if len(r) == 10]
    in_use = sum(1 for r in rows if abs(float(r[6]) - 1) <= 0.15)
    rss = sum(1 for r in rows if abs(float(r[9]) - 1) <= 0.15)
    checks = []
    # Each goal trains its plan across the namespaces for a minute or more; a
    # quick run leaves them to the full run and to the netsim_plan_check test.
    goals = [] if q else ["bytes", "utilization=0.9", "time"]
    if q:
        checks.append("A quick run leaves the time goals out: the full run and the `netsim_plan_check` test check them.")
    # 3 sites as before; then 4 sites with unequal uplinks, ring and
    # all-gather, where a model of one payload on the slowest pair is wrong.
    # PLAN_OLD_BIN (an earlier build) adds its predictions beside.
    shapes = [("40,20,10", None)] + [("100,50,20,10", x) for x in ("ring", "all_gather")]
    for mbps, exchange in shapes:
        for goal in goals:
            args = [goal] + (["--set", f"compression.exchange={exchange}"] if exchange else [])
            shown = f"PLAN_MBPS={mbps} tests/netsim/plan_check.sh {' '.join(args)}"
            print(f"bench: {shown}", file=sys.stderr, flush=True)
            e = dict(env(), DILOCO_BIN=os.path.join(ROOT, "build/diloco"), MPIRUN="mpirun", PLAN_TARGETS="1",
                     PLAN_MBPS=mbps)
            p = subprocess.run(["bash", "tests/netsim/plan_check.sh"] + args, cwd=ROOT, env=e, capture_output=True,
                               text=True)
            where = f"{mbps} Mbit/s" + (f", compression.exchange = {exchange}" if exchange else "")
            if p.returncode == 77:
                checks.append(f"{where}, goal {goal}: skipped ({p.stdout.strip()})")
                continue
            lines = p.stdout.splitlines()
            plan = next((l for l in lines if l.startswith("plan: ")), "plan: none (see the test's output)")
            table = "\n".join(l for l in lines if l.startswith("|"))
            verdict = "within the targets" if p.returncode == 0 else "**outside a target** (or the run failed)"
            checks.append(f"{where}, goal `{goal}`, {plan[6:]}: {verdict}.\n\n{table}")
    return f"""## 12. The planner's predictions against runs (`bench/plan_memory.sh`, `tests/netsim/plan_check.sh`)

Memory: for each model, what `diloco plan` predicts for a site leader (2
sites x 1 rank): fp32 weights, gradients and AdamW, the activations autograd
keeps, the outer state and exchange buffers, the tokens, and the runtime
measured in the planning process after libtorch has started. "In use"
against a run with the host block cache off and glibc returning freed
blocks at once (`DILOCO_HOST_BLOCK_CACHE=0 MALLOC_MMAP_THRESHOLD_=131072`,
so RSS follows use); "peak RSS" adds what the host block cache keeps of
freed activations at the step's peak (two layers' worth of them) and is
against a run as diloco runs. The second table is the step time with the host block cache
and with glibc's malloc (`DILOCO_HOST_BLOCK_CACHE=0`).

Command: `{' '.join(cmd)}`

{mem.strip()}

Target: within 15%: in use {in_use} of {len(rows)} models, peak RSS {rss} of {len(rows)} ({yes(in_use == rss == len(rows))}).

Time: 3 sites as network namespaces (tc at 40, 20, 10 Mbit/s), then 4 (100,
50, 20, 10 Mbit/s: each site's uplink and downlink) with the ring and the
all-gather, one rank each on the 2 cores; "earlier planner" is a build
before the per-site exchange model (PLAN_OLD_BIN), where given. `probe --all-ranks` times every rank's steps (all at
once, each step kept) and measures every link; `plan --cluster --goal G`
recommends a plan, a round's compute being the mean over windows of H steps
of that round's slowest site, and for sites whose ranks outnumber their
host's cores (here every site) H steps at the host's rate, n / sum(1/t_s):
the cores of the sites that finished move to those still stepping, and the
probe's side-by-side series, without a round's pauses, swing further than a
round's steps do,
the steps an overlapped exchange is in flight for slowed by the host's
measured `overlap_slowdown`, and an overlapped round lasting, round by
round, the longer of its steps and its exchange, whose time varies as the
probe's exchanges with the recipe's codec (int4 here) varied, and whose
mean is the model's time scaled by what the probe's exchanges took (the
largest of the leaders' means) over the model's time for them; each round's
report gather pays what the probe's small all-reduce right behind an
exchange took, on top of the steps (an exchange that outlasts the steps and
the report hides it: the round lasts the exchange); that plan trains across the same namespaces for at least 6 rounds and 10 s
of steady rounds (all but the first and the last), which are compared with
the prediction. Targets: round time and utilization within 10%, peak RSS
within 15%.

{chr(10).join(chr(10) + c for c in checks)}
"""


def sampling(q):
    tokens = "64" if q else "256"
    runs = [["build/bench/bench_sample", "--tokens", tokens, "--repeats", "1" if q else "3"],
            ["build/bench/bench_sample", "--model", "gpt", "--d-model", "128", "--layers", "2", "--heads", "4",
             "--kv-heads", "4", "--tokens", tokens, "--repeats", "1" if q else "3"]]
    outs = [run(cmd) for cmd in runs]
    ratios = [float(l.split()[-1]) for out in outs for l in out.splitlines() if l.startswith("kv cache")]
    same = all("same greedy ids: yes" in out for out in outs)
    tables = "\n\n".join(f"Command: `{' '.join(cmd)}`\n\n```\n{out.strip()}\n```" for cmd, out in zip(runs, outs))
    return f"""## 13. Sampling with the key/value cache (`bench/sample_bench.cpp`)

`diloco sample`'s loop (`inner::sample`, greedy) on one thread: each new token
through the model's key/value cache (one position per token) against
recomputing the whole sequence for every token, the same model, prompt and
ids, alternating repeats, medians. A Llama with grouped-query attention and
the quickstart's byte GPT size; the sample fits the context, so no window
slides in either.

{tables}

Target: the cache at least 5x faster at 256 tokens: {', '.join(f'{r:.1f}x' for r in ratios)}
({'judged by the full run: the gain grows with the length, and a quick run samples 64' if q else yes(bool(ratios) and min(ratios) >= 5 and same)}; the same greedy ids both ways: {yes(same)}).
"""


def waiting(q):
    cmd = ["mpirun", "-np", "2", "--bind-to", "none", "build/bench/bench_wait"] + (
        ["--wait-s", "1", "--blocks", "6", "--repeats", "2"] if q else ["--wait-s", "3", "--blocks", "20", "--repeats", "5"])
    out = run(cmd)
    idle = float(out.split("idle comm thread:")[1].split("%")[0]) / 100
    steps = float(out.split("steps with an exchange in flight / without:")[1].split()[0])
    tables = out.split("\nidle comm thread:")[0].strip() + "\n\n" + out.split("of a core\n", 1)[1].split("steps with")[0].strip()
    judged = "judged by the full run (a quick run alternates 6 blocks)"
    return f"""## 15. What waiting costs the cores (`bench/wait_bench.cpp`)

Two ranks, each one site, on a host where ranks share the cores. A wait
that must not take a core (a comm thread's exchange, a wait with a
deadline between sites, a site's ranks waiting for their leader's
exchange through `wait_for_all`) sleeps between MPI tests, each pause
1/32 of the time waited so far, from 50 us up to 20 ms
(`src/comm/wait_pacer.h`); Open MPI's own `MPI_Wait` spins a core. First
the CPU of a thread waiting for a peer that comes late, against the
spinning wait; then what the pauses add to an exchange whose peer comes
late; then the quickstart model's inner steps on both ranks in alternating
blocks: without an exchange, and with this rank's comm thread waiting in
an exchange (1 MB) for the whole block.

Command: `{' '.join(cmd[:5])} {' '.join(cmd[5:])}`

{tables.strip()}

Targets: an idle comm thread at most 1% of a core: {100 * idle:.2f}% ({yes(idle <= 0.01)});
inner steps at most 3% slower with an exchange in flight: {steps:.3f}x ({judged if q else yes(steps <= 1.03)}).
"""


def apart(q):
    cmd = ["bash", "bench/apart.sh", "--set", "compression.codec=int8"]
    # quick: rounds 2-4 measured; the fault run 16 rounds, killed at 5, relaunched at 10
    extra = {"ROUNDS": "5", "FAULT_ROUNDS": "16", "KILL_ROUND": "5", "RELAUNCH_ROUND": "10"} if q else {}
    out = run(cmd, extra_env=extra)
    if out.startswith("skipped"):
        return f"""## 17. Sites launched apart against one mpirun (`bench/apart.sh`)

{out.strip()}
"""
    # Both tables' rows by their first cell.
    rows = {}
    for line in out.splitlines():
        if line.startswith("| ") and not line.startswith("| run "):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows[cells[0]] = cells
    verdicts = []
    for mode in ("delayed", "streaming"):
        mine, world = float(rows[f"{mode}, sites launched apart"][1]), float(rows[f"{mode}, one mpirun"][1])
        verdicts.append(f"{mode} {mine:.3f} against {world:.3f} ({yes(mine >= world)}; "
                        f"at least 0.90: {yes(mine >= 0.90)})")
    budget_H = rows["delayed, time-budget, sites launched apart"][2].split("/")
    dp, dl = rows["data-parallel, sites launched apart"], rows["delayed, sites launched apart"]
    dp_verdict = (f"delayed DiLoCo {float(dl[4]):.1f} MB against data parallelism's {float(dp[4]):.1f} MB "
                  f"({float(dp[4]) / float(dl[4]):.0f}x fewer), final eval loss {float(dl[3]):.4f} against "
                  f"{float(dp[3]):.4f}, wall {float(dl[5]):.1f} s against {float(dp[5]):.1f} s")
    calm, hit = rows["no fault"], rows["site 2 killed and launched again"]
    lowest, loss_off = float(hit[3]), float(hit[6].rstrip("%"))
    fault_verdict = (f"the lowest {lowest:.3f} against {float(calm[3]):.3f} without the fault "
                     f"(at least 0.90: {yes(lowest >= 0.90)}); final eval loss {loss_off:+.2f}% "
                     f"(within 2%: {yes(abs(loss_off) <= 2.0)})")
    return f"""## 17. Sites launched apart against one mpirun (`bench/apart.sh`)

Three sites in network namespaces (`scripts/netsim`: the kernel shapes each
site's link at 20, 20 and 10 Mbit/s, the link emulation adds 50 ms), the
model of `recipes/streaming.toml` on 3 sites (int8 pseudo-gradients),
rounds of H 20 (10; 5 in a quick run): blocking, delayed and streaming
overlap (2 fragments, each in flight for 10 steps), each as one mpirun spanning
the three namespaces and as three sites launched apart (each its own
mpirun, joined through `ompi-server`); then delayed overlap with H
planned from the measured links and steps (`sync.schedule =
"time-budget"`: the fastest site's H keeps the exposed exchange near the
target share, each other site runs the steps that fit in the same time);
then data parallelism (every step's gradients averaged, same codec) as the
baseline.
Utilization: the slowest site's
inner-step time over the round's wall time, all rounds but the first
(it evaluates) and the last (it drains); the slowest site waits for nobody. Sites
launched apart send more: the group's starting state goes from site 0 to
the others once (global params and outer state).

Command: `{''.join(k + '=' + v + ' ' for k, v in extra.items())}{' '.join(cmd)}`

{out.strip()}

Targets: overlap between sites launched apart at least as busy as one
mpirun on the same links, and at least 0.90: {"; ".join(verdicts)}.
H planned per site between sites launched apart: {"/".join(budget_H)} for
the next round (the 10 Mbit/s site, site 2: {budget_H[-1]}). Every site's
exchange is the same collective, paced by the slowest link, so the link
sets the common H and the sites' step times set their differences.
A site lost and launched again, rounds outside the membership changes
(the round before, of and after each): {fault_verdict}.
Against the baseline between sites launched apart, on the same links:
{dp_verdict}.
"""


def frontier(q, report_dir):
    cmd = ["/usr/bin/python3", "bench/frontier.py", "--plot-dir", report_dir] + (["--quick", "--sites", "2"] if q else [])
    out = run(cmd)
    shown = [os.path.relpath(c) if c == report_dir else c for c in cmd]  # no machine path in the report
    return f"""## 16. Bytes against loss: the frontier (`bench/frontier.py`)

Data parallelism (`recipes/data-parallel.toml`, fp32 gradients every step)
and DiLoCo settings (H, codec, chunk, kept share, bits, inner optimizer) on
the quickstart model, each site 1 rank behind an emulated 100 Mbit/s, 50 ms
link, every run the same inner steps per site (the loss does not depend on
the links; the wall time does). "fewer bytes than DP" is data parallelism's
bytes between sites over the run's; "on the frontier": no other run has both
fewer bytes and a lower loss. Target: a setting within 3% of data
parallelism's final eval loss sends at least 1000x fewer bytes. Data
parallelism with Muon (`inner.optimizer = "muon"`, the optimizer of the
settings that reach the target on 4 sites) is run too: the verdict is
against the recipe's baseline (AdamW), and the line after it says where
the settings stand against a baseline with the same inner optimizer.

Command: `{' '.join(shown)}`
{out.rstrip()}
"""


SECTIONS = [("inner", inner_overhead), ("codecs", codecs), ("exchange", exchange_vs_bound),
            ("dp", diloco_vs_dp), ("ablations", ablations), ("scaling", scaling), ("memory", memory),
            ("overlap", overlap), ("data", data_startup), ("recovery", recovery),
            ("plan", plan_check), ("sample", sampling), ("faults", faults), ("wait", waiting),
            ("frontier", frontier), ("apart", apart)]


def section_number(text):
    m = re.match(r"## (\d+)\.", text)
    return int(m.group(1)) if m else None


def splice(path, parts, provenance):
    """--only with an existing file: its sections of the same numbers are
    replaced in place (new ones go in number order), each marked with the
    run it came from; the rest of the file stays as the full run wrote it."""
    text = open(path).read()
    pieces = re.split(r"(?m)^(?=## \d+\. )", text)
    head, sections = pieces[0], {section_number(p): p for p in pieces[1:]}
    for part in parts:
        body = part.rstrip("\n") + f"\n\n*This section: {provenance}.*\n\n"
        sections[section_number(part)] = body
    with open(path, "w") as f:
        f.write(head + "".join(sections[n].rstrip("\n") + "\n\n" for n in sorted(sections)).rstrip("\n") + "\n")


def main():
    parser = argparse.ArgumentParser(prog="scripts/bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller runs (under 10 minutes on 2 cores)")
    parser.add_argument("--only", help="comma-separated sections: " + ",".join(n for n, _ in SECTIONS) +
                        " (an existing --out file keeps its other sections; these are replaced in place)")
    parser.add_argument("--out", default=os.path.join(ROOT, "BENCHMARKS.md"), help="the file written")
    args = parser.parse_args()
    wanted = args.only.split(",") if args.only else [n for n, _ in SECTIONS]
    unknown = set(wanted) - {n for n, _ in SECTIONS}
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    for tool in ("build/diloco", "build/bench/bench_inner", "build/bench/bench_exchange", "build/bench/bench_compression",
                 "build/bench/bench_sample"):
        if not os.access(os.path.join(ROOT, tool), os.X_OK):
            sys.exit(f"bench: {tool} is missing: run scripts/setup first")
    report_dir = os.path.dirname(os.path.abspath(args.out))  # the dp section's report pages go beside it
    started = time.time()
    parts = []
    for name, section in SECTIONS:
        if name not in wanted:
            continue
        t0 = time.time()
        parts.append(section(args.quick, report_dir) if name in ("dp", "frontier") else section(args.quick))
        print(f"bench: section {name} took {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    if args.only and os.path.exists(args.out):
        splice(args.out, parts, f"`scripts/bench{' --quick' if args.quick else ''} --only {args.only}` at commit "
                                f"{commit or 'unknown'} on {datetime.date.today().isoformat()}, on: {machine()}")
        print(f"bench: updated {', '.join(wanted)} in {args.out} in {(time.time() - started) / 60:.1f} minutes",
              file=sys.stderr)
        return
    header = f"""# Benchmarks

Written by `scripts/bench{' --quick' if args.quick else ''}` (every number below is from that run, except in
sections marked as updated alone by `scripts/bench --only`) on
{datetime.date.today().isoformat()}, commit {commit or 'unknown'}, in {(time.time() - started) / 60:.1f} minutes, on: {machine()}.
Release build, one thread per rank. Each table carries its own baseline
measured in the same run; ratios are what to compare, since absolute times
move with whatever else the machine is doing. `scripts/bench --quick` runs
smaller versions of every section (under 10 minutes on 2 cores).

"""
    with open(args.out, "w") as f:
        f.write(header + "\n".join(parts))
    print(f"bench: wrote {args.out} in {(time.time() - started) / 60:.1f} minutes", file=sys.stderr)


if __name__ == "__main__":
    main()
