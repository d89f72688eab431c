"""Bytes between sites against final loss: data parallelism and DiLoCo
settings (H, codec, chunk, kept share, bits, inner optimizer) on the
quickstart model over emulated links, every run the same inner steps per
site; prints a markdown table per site count, the Pareto frontier, the
verdicts, and writes an SVG plot (bytes on a log axis) beside BENCHMARKS.md.

usage: /usr/bin/python3 bench/frontier.py [--quick] [--sites 2,4] [--steps N] [--plot-dir DIR]
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from bench import train_steps  # noqa: E402

# (name, H, flags). Outer steps: Nesterov at lr 0.7 with momentum 0.5 (0.9,
# the paper's, overshoots with H this small), and, for the sparse codecs,
# lr 2 with error feedback keeping 0.95 of the residual: a top-k sends a
# small share of each pseudo-gradient, and the residual carries the rest.
# The chunk-topk settings are SparseLoCo's (chunks of 4096, 1/64 kept, 2
# bits) and neighbours of it.
DENSE = ["--set", "outer.lr=0.7", "--set", "outer.momentum=0.5"]
SPARSE = ["--set", "outer.lr=2.0", "--set", "outer.momentum=0.5", "--set", "compression.error_feedback_decay=0.95"]
MUON = ["--set", "inner.optimizer=muon"]


def ctk(share, bits):
    return ["--set", "compression.codec=chunk-topk", "--set", "compression.block=4096",
            "--set", f"compression.topk_ratio={share}", "--set", f"compression.bits={bits}"] + SPARSE


def settings(quick):
    full = [
        ("diloco H=10", 10, DENSE),
        ("diloco H=10 muon", 10, DENSE + MUON),
        ("diloco H=10 int4", 10, DENSE + ["--set", "compression.codec=int4"]),
        ("diloco H=10 ctk 1/64 2b", 10, ctk(1 / 64, 2)),
        ("diloco H=10 ctk 1/64 4b", 10, ctk(1 / 64, 4)),
        ("diloco H=10 ctk 1/64 8b", 10, ctk(1 / 64, 8)),
        ("diloco H=20 ctk 1/32 8b", 20, ctk(1 / 32, 8)),
        # With 4 sites the outer steps want more: dense at lr 1.0 ended
        # 1.9121 against lr 0.7's 1.9275, chunk-topk at lr 3 1.9863 against
        # lr 2's 2.0353 and lr 4's 2.0109 (1200 steps; data parallelism 1.8666).
        ("diloco H=10 lr 1.0", 10, DENSE + ["--set", "outer.lr=1.0"]),
        ("diloco H=10 ctk 1/64 4b lr 3", 10, ctk(1 / 64, 4) + ["--set", "outer.lr=3.0"]),
        ("diloco H=5 ctk 1/128 4b lr 3", 5, ctk(1 / 128, 4) + ["--set", "outer.lr=3.0"]),
        # Muon keeps its loss at large H and with int4 (4 sites, no links:
        # dense H 40 1.8348, H 60 1.8423; int4 H 40 1.8207), where sparse
        # and 2-bit codecs lose 8-17% with it (chunk-topk 1/64 2b H 10
        # 2.1817, sign H 40 2.0915, 2-bit chunks of every value H 60 2.0263).
        ("diloco H=150 muon int4", 150, DENSE + MUON + ["--set", "compression.codec=int4"]),
        ("diloco H=200 muon int4", 200, DENSE + MUON + ["--set", "compression.codec=int4"]),
    ]
    if quick:
        return [s for s in full if s[0] == "diloco H=10 ctk 1/64 4b"]
    return full


def pareto(results):
    """The runs no other run beats on both bytes and loss."""
    front = []
    for r in sorted(results, key=lambda r: (r["bytes"], r["final"])):
        if not front or r["final"] < front[-1]["final"]:
            front.append(r)
    return front


def svg(path, title, results, dp):
    """A scatter of final eval loss against bytes (log axis), the frontier joined."""
    w, h, left, bottom, top, right = 760, 420, 70, 50, 40, 60
    xs = [math.log10(max(r["bytes"], 1)) for r in results]
    ys = [r["final"] for r in results]
    x0, x1 = math.floor(min(xs)), math.ceil(max(xs))
    y0, y1 = min(ys) - 0.02, max(ys) + 0.02
    px = lambda x: left + (x - x0) / (x1 - x0) * (w - left - right)  # noqa: E731
    py = lambda y: h - bottom - (y - y0) / (y1 - y0) * (h - bottom - top)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
           f'<text x="{w / 2}" y="18" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>',
           f'<text x="{w / 2}" y="{h - 12}" text-anchor="middle">bytes between sites (log scale)</text>',
           f'<text x="16" y="{h / 2}" text-anchor="middle" transform="rotate(-90 16 {h / 2})">final eval loss</text>']
    for e in range(x0, x1 + 1):
        label = f"{10 ** e / 1e6:g} MB"
        out.append(f'<line x1="{px(e):.1f}" y1="{h - bottom}" x2="{px(e):.1f}" y2="{h - bottom + 5}" stroke="black"/>'
                   f'<text x="{px(e):.1f}" y="{h - bottom + 18}" text-anchor="middle">{label}</text>')
    for i in range(6):
        y = y0 + (y1 - y0) * i / 5
        out.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:.2f}</text>')
    limit = 1.03 * dp["final"]
    out.append(f'<line x1="{left}" y1="{py(limit):.1f}" x2="{w - right}" y2="{py(limit):.1f}" stroke="#c33" '
               f'stroke-dasharray="4 3"/><text x="{w - right}" y="{py(limit) - 4:.1f}" text-anchor="end" '
               f'fill="#c33">data parallelism + 3%</text>')
    front = pareto(results)
    out.append('<polyline fill="none" stroke="#36c" points="' +
               " ".join(f"{px(math.log10(r['bytes'])):.1f},{py(r['final']):.1f}" for r in front) + '"/>')
    for r in results:
        x, y = px(math.log10(max(r["bytes"], 1))), py(r["final"])
        colour = "#c33" if r is dp else ("#36c" if r in front else "#888")
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{colour}"/>'
                   f'<text x="{x + 6:.1f}" y="{y - 6:.1f}" fill="{colour}">{r["name"]}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--sites", default="2,4")
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--plot-dir", default="")
    a = p.parse_args()
    # 1200 steps: the quickstart model's loss is still falling fast at 400,
    # where every sparse setting ends 4% or more above data parallelism
    # (chunk-topk 1/64 at 8 bits, H 10: +4.2%, 964x fewer bytes); by 1200 the
    # gap has closed to 2% (measured without links, which change neither
    # loss nor bytes).
    steps = a.steps or (120 if a.quick else 1200)
    for sites in [int(s) for s in a.sites.split(",")]:
        links = ["--set", f"links.latency_ms=[{','.join(['50.0'] * sites)}]",
                 "--set", f"links.bandwidth_mbps=[{','.join(['100.0'] * sites)}]"]
        dp = dict(train_steps(sites, "recipes/data-parallel.toml", 10, steps, links=links), name="data-parallel")
        # The baseline with the inner optimizer the best settings use: what a
        # user who can change the optimizer would compare with.
        dp_muon = None if a.quick else dict(train_steps(sites, "recipes/data-parallel.toml", 10, steps, MUON, links),
                                            name="data-parallel muon")
        diloco = [dict(train_steps(sites, "recipes/quickstart.toml", H, steps, flags, links), name=name)
                  for name, H, flags in settings(a.quick)]
        results = [dp] + ([dp_muon] if dp_muon else []) + diloco
        front = pareto(results)
        print(f"\n{sites} sites, {steps} inner steps per site, links 100 Mbit/s and 50 ms (the last run: "
              f"`{results[-1]['shown']}`):\n")
        print("| run | H | final eval loss | vs DP | bytes between sites | fewer bytes than DP | wall s | on the frontier |")
        print("|---|---:|---:|---:|---:|---:|---:|---|")
        for r in results:
            print(f"| {r['name']} | {r['H']} | {r['final']:.4f} | {100 * (r['final'] / dp['final'] - 1):+.1f}% | "
                  f"{r['bytes'] / 1e6:.3f} MB | {dp['bytes'] / r['bytes']:.0f}x | {r['wall']:.1f} | "
                  f"{'yes' if r in front else ''} |")
        close = [r for r in diloco if r["final"] <= 1.03 * dp["final"]]
        if close:
            best = max(close, key=lambda r: dp["bytes"] / r["bytes"])
            ratio = dp["bytes"] / best["bytes"]
            print(f"\nWithin 3% of data parallelism's final loss ({dp['final']:.4f}): {len(close)} of "
                  f"{len(diloco)} settings; the fewest bytes among them: {best['name']}, "
                  f"{best['final']:.4f} ({100 * (best['final'] / dp['final'] - 1):+.1f}%), {ratio:.0f}x fewer bytes "
                  f"(target ≥ 1000x: {'met' if ratio >= 1000 else '**not met**'}).")
        else:
            print(f"\nNo setting ends within 3% of data parallelism's final loss ({dp['final']:.4f}): "
                  "target ≥ 1000x fewer bytes there: **not met**.")
        if dp_muon:
            near = [r for r in diloco if r["final"] <= 1.03 * dp_muon["final"]]
            best = max(near, key=lambda r: dp_muon["bytes"] / r["bytes"]) if near else None
            print(f"\nAgainst data parallelism with Muon ({dp_muon['final']:.4f}, "
                  f"{100 * (dp_muon['final'] / dp['final'] - 1):+.1f}% against AdamW's): " +
                  (f"{len(near)} settings within 3%; the fewest bytes among them: {best['name']}, {best['final']:.4f} "
                   f"({100 * (best['final'] / dp_muon['final'] - 1):+.1f}%), "
                   f"{dp_muon['bytes'] / best['bytes']:.0f}x fewer bytes." if best else "no setting within 3%."))
        if a.plot_dir:
            name = f"BENCHMARKS-frontier-{sites}sites.svg"
            svg(os.path.join(a.plot_dir, name), f"Bytes against loss, {sites} sites, {steps} steps", results, dp)
            print(f"\nPlot: ![bytes against loss, {sites} sites]({name})")


if __name__ == "__main__":
    main()
