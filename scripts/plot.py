"""Plots of diloco runs from their metrics.jsonl (see scripts/plot).

eval_loss.png     eval loss (points) and train loss (dashed) against wall time and
                  against bytes sent between sites
H.png             inner steps per round, per site
utilization.png   communication share and compute utilization per round
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def die(message):
    print(f"plot: {message}", file=sys.stderr)
    sys.exit(2)  # bad input, as diloco itself


def load(run_dir):
    path = os.path.join(run_dir, "metrics.jsonl")
    try:
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except OSError as e:
        die(f"cannot read {path}: {e.strerror}")
    except json.JSONDecodeError as e:
        die(f"{path} is not JSON lines: {e}")
    if not rows:
        die(f"{path} has no rounds")
    return rows


def name_of(run_dir):
    return os.path.basename(os.path.normpath(run_dir))


def save(fig, axes, path):
    """Grid and legend on every panel, then the PNG."""
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_eval(runs, out):
    fig, (by_time, by_bytes) = plt.subplots(1, 2, figsize=(11, 4))
    for name, rows in runs:
        pts = [r for r in rows if r.get("eval_loss") is not None]
        for ax, x in ((by_time, lambda r: r["wall_s"]), (by_bytes, lambda r: r["bytes_sent"] / 1e6)):
            line, = ax.plot([x(r) for r in pts], [r["eval_loss"] for r in pts], marker="o", label=f"{name} eval")
            ax.plot([x(r) for r in rows], [r["train_loss"] for r in rows], linestyle="--", linewidth=1,
                    color=line.get_color(), label=f"{name} train")
    by_time.set(xlabel="wall time (s)", ylabel="loss", title="loss vs wall time")
    by_bytes.set(xlabel="bytes sent between sites (MB)", ylabel="loss", title="loss vs bytes")
    for ax in (by_time, by_bytes):
        ax.ticklabel_format(useOffset=False)
    save(fig, (by_time, by_bytes), os.path.join(out, "eval_loss.png"))


def plot_H(runs, out):
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, rows in runs:
        rounds = [r["round"] for r in rows]
        sites = max((len(r.get("site_steps", [])) for r in rows), default=0)
        if sites == 0:
            ax.step(rounds, [r["H"] for r in rows], where="mid", label=name)
        for s in range(sites):
            steps = [r["site_steps"][s] if s < len(r.get("site_steps", [])) else None for r in rows]
            ax.step(rounds, steps, where="mid", label=f"{name} site {s}")
    ax.set(xlabel="round", ylabel="inner steps (H)", title="H per site per round")
    save(fig, (ax,), os.path.join(out, "H.png"))


def plot_utilization(runs, out):
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, rows in runs:
        rounds = [r["round"] for r in rows]
        ax.plot(rounds, [r["comm_share"] for r in rows], marker=".", label=f"{name} comm share")
        if all("utilization" in r for r in rows):
            ax.plot(rounds, [r["utilization"] for r in rows], marker=".", linestyle="--", label=f"{name} utilization")
    ax.set(xlabel="round", ylabel="share of wall time", ylim=(0, 1.05),
           title="communication share and compute utilization")
    save(fig, (ax,), os.path.join(out, "utilization.png"))


def main():
    parser = argparse.ArgumentParser(prog="scripts/plot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", metavar="OUT_DIR", help="a run's output folder (holds metrics.jsonl)")
    parser.add_argument("--to", help="where the PNGs go (default: OUT_DIR/plots for one run, plots/ for several)")
    args = parser.parse_args()
    runs = [(name_of(d), load(d)) for d in args.runs]
    out = args.to or (os.path.join(args.runs[0], "plots") if len(args.runs) == 1 else "plots")
    os.makedirs(out, exist_ok=True)
    plot_eval(runs, out)
    plot_H(runs, out)
    plot_utilization(runs, out)
    for f in ("eval_loss.png", "H.png", "utilization.png"):
        print(os.path.join(out, f))


if __name__ == "__main__":
    main()
