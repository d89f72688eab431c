"""Start-up time and peak memory of `diloco train` on token shards of 2 MB
against 2 GB (generated here, deleted after): shards are read window by
window, so they must cost the same whatever their size. Each size trains
one tiny round on 2 ranks (2 sites x 1) three times; the table gives the median wall time and peak RSS
of the largest rank, and the 2 GB run's excess over the 2 MB run, against
the targets (under 1 s, under 50 MB). `diloco check`, which scans every id,
is timed too: it is the one step that reads all the data.

usage: /usr/bin/python3 bench/data_startup.py [--gb 2] [--repeats 3]
Exit 1 when a target is missed.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("DILOCO_BIN", os.path.join(ROOT, "build", "diloco"))
MPIRUN = os.environ.get("MPIRUN", "mpirun")
VOCAB = 4096


def write_shards(folder, total_bytes, shard_bytes=256 << 20):
    """llm.c shards of uint16 ids below VOCAB, `total_bytes` of ids in all."""
    os.makedirs(folder)
    rng = np.random.default_rng(1)
    left, index = total_bytes // 2, 0
    while left > 0:
        n = min(left, shard_bytes // 2)
        header = np.zeros(256, dtype=np.int32)
        header[:3] = (20240520, 1, n)
        with open(os.path.join(folder, "shard_%04d.bin" % index), "wb") as f:
            f.write(header.tobytes())
            f.write(rng.integers(0, VOCAB, n, dtype=np.uint16).tobytes())
        left, index = left - n, index + 1
    return index


def train_once(folder, out):
    cmd = [MPIRUN, "-np", "2", "--oversubscribe", "--bind-to", "none", BIN, "train",
           os.path.join(ROOT, "recipes", "quickstart.toml"), "--out", out,
           "--set", 'data.format="tokens"', "--set", 'data.paths=["%s"]' % folder,
           "--set", "model.vocab=%d" % VOCAB, "--set", "model.d_model=32", "--set", "model.n_layers=1",
           "--set", "outer.rounds=1", "--set", "sync.H=2", "--set", "metrics.eval_windows=4",
           "--set", "checkpoint.every=0"]
    start = time.monotonic()
    run = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - start
    if run.returncode != 0:
        sys.exit("bench: train failed:\n" + run.stdout[-2000:] + run.stderr[-2000:])
    value, unit = re.search(r"peak RSS \(largest rank\)\s+([\d.]+) (\w+)", run.stdout).groups()
    rss_mb = float(value) * {"KB": 1e-3, "MB": 1.0, "GB": 1e3}[unit]
    shutil.rmtree(out)
    return wall, rss_mb


def check_once(folder):
    cmd = [BIN, "check", os.path.join(ROOT, "recipes", "quickstart.toml"), "--set", 'data.format="tokens"',
           "--set", 'data.paths=["%s"]' % folder, "--set", "model.vocab=%d" % VOCAB]
    start = time.monotonic()
    subprocess.run(cmd, capture_output=True, check=True)
    return time.monotonic() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gb", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="diloco_startup_")
    try:
        sizes = [("2 MB", 2 << 20), ("%g GB" % args.gb, int(args.gb * (1 << 30)))]
        rows = []
        for label, size in sizes:
            folder = os.path.join(work, label.replace(" ", ""))
            shards = write_shards(folder, size)
            runs = [train_once(folder, os.path.join(work, "out")) for _ in range(args.repeats)]
            wall = statistics.median(r[0] for r in runs)
            rss = statistics.median(r[1] for r in runs)
            rows.append((label, shards, wall, rss, check_once(folder)))
            shutil.rmtree(folder)
        print("# diloco train, 2 ranks (2 sites x 1), one round of 2 steps on a 32-wide GPT, median of %d"
              % args.repeats)
        print("| token shards | files | train wall (s) | peak RSS (MB) | diloco check, every id (s) |")
        print("|---|---:|---:|---:|---:|")
        for label, shards, wall, rss, check in rows:
            print("| %s | %d | %.2f | %.1f | %.2f |" % (label, shards, wall, rss, check))
        extra_s = rows[1][2] - rows[0][2]
        extra_mb = rows[1][3] - rows[0][3]
        print("\n%s over 2 MB: start-up %+.2f s (target < 1 s), peak RSS %+.1f MB (target < 50 MB)"
              % (rows[1][0], extra_s, extra_mb))
        return 0 if extra_s < 1.0 and extra_mb < 50.0 else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
