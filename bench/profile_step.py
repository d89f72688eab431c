"""Where an inner step's time goes, in diloco's InnerLoop and in the same
step written in Python eager PyTorch: both run under libtorch's profiler
(bench_inner --profile, inner_python.py --profile) and this reads their
Chrome traces and prints one table of calls and self time per step by
operator, the two side by side, with each one's total of operator time and
its wall time per step, then the operators diloco's loop calls more often
than Python's (what C++ pays that Python does not).

usage: /usr/bin/python3 bench/profile_step.py [--d-model 128] [--layers 2]
       [--heads 4] [--seq-len 64] [--batch 16] [--steps 20] [--top 15]
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def self_times(path, steps):
    """Self time (ms per step) and calls per step by operator name: each
    complete event's duration less that of the events directly inside it on
    the same thread."""
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    by_thread = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and "dur" in e:
            by_thread[(e.get("pid"), e.get("tid"))].append(e)
    totals, calls = collections.Counter(), collections.Counter()
    for evs in by_thread.values():
        calls.update(e["name"] for e in evs)
        evs.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
        stack = []  # [end, event, child time]
        for e in evs:
            start, dur = float(e["ts"]), float(e["dur"])
            while stack and stack[-1][0] <= start:
                end, top, children = stack.pop()
                totals[top["name"]] += float(top["dur"]) - children
            if stack:
                stack[-1][2] += dur
            stack.append([start + dur, e, 0.0])
        while stack:
            end, top, children = stack.pop()
            totals[top["name"]] += float(top["dur"]) - children
    return ({name: us / 1e3 / steps for name, us in totals.items()},
            {name: n / steps for name, n in calls.items()})


def wall_ms(table_line):
    return float([c.strip() for c in table_line.strip().strip("|").split("|")][5])


def main():
    p = argparse.ArgumentParser()
    for flag, default in (("d-model", 128), ("layers", 2), ("heads", 4), ("seq-len", 64), ("batch", 16),
                          ("steps", 20), ("top", 15)):
        p.add_argument("--" + flag, type=int, default=default)
    a = p.parse_args()
    shape = ["--d-model", str(a.d_model), "--layers", str(a.layers), "--heads", str(a.heads),
             "--seq-len", str(a.seq_len), "--batch", str(a.batch), "--steps", str(a.steps), "--blocks", "3",
             "--threads", "1"]
    tmp = tempfile.mkdtemp()
    cpp_trace, py_trace = os.path.join(tmp, "diloco.json"), os.path.join(tmp, "python.json")
    cpp = subprocess.run([os.path.join(ROOT, "build/bench/bench_inner"), "--only", "diloco", "--profile", cpp_trace]
                         + shape, capture_output=True, text=True, check=True).stdout
    py = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "bench/inner_python.py"), "--profile", py_trace]
                        + shape, capture_output=True, text=True, check=True).stdout
    cpp_wall = wall_ms(next(l for l in cpp.splitlines() if l.startswith("| diloco InnerLoop")))
    py_wall = wall_ms(next(l for l in py.splitlines() if l.startswith("| python eager")))
    (c, c_calls), (q, q_calls) = self_times(cpp_trace, a.steps), self_times(py_trace, a.steps)
    names = sorted(set(c) | set(q), key=lambda n: -max(c.get(n, 0.0), q.get(n, 0.0)))
    print(f"Calls and self time per inner step by operator (ms), {a.steps} profiled steps, one thread; "
          f"d_model {a.d_model}, {a.layers} layers, batch {a.batch} x {a.seq_len}.\n")
    print("| operator | diloco calls | Python calls | diloco InnerLoop | Python eager | difference |\n"
          "|---|---:|---:|---:|---:|---:|")
    shown_c = shown_q = 0.0
    for n in names[:a.top]:
        x, y = c.get(n, 0.0), q.get(n, 0.0)
        shown_c, shown_q = shown_c + x, shown_q + y
        print(f"| {n} | {c_calls.get(n, 0):.0f} | {q_calls.get(n, 0):.0f} | {x:.3f} | {y:.3f} | {x - y:+.3f} |")
    rest_c, rest_q = sum(c.values()) - shown_c, sum(q.values()) - shown_q
    print(f"| (other operators) | | | {rest_c:.3f} | {rest_q:.3f} | {rest_c - rest_q:+.3f} |")
    print(f"| **all operators** | {sum(c_calls.values()):.0f} | {sum(q_calls.values()):.0f} | {sum(c.values()):.3f} | "
          f"{sum(q.values()):.3f} | {sum(c.values()) - sum(q.values()):+.3f} |")
    print(f"| wall time per step (timed blocks, unprofiled) | | | {cpp_wall:.3f} | {py_wall:.3f} | "
          f"{cpp_wall - py_wall:+.3f} |")
    # aten:: operators only: the rest are the profilers' own labels (autograd
    # nodes, Python's optimizer and module scopes).
    more = [n for n in sorted(c_calls) if n.startswith("aten::") and round(c_calls[n]) > round(q_calls.get(n, 0))]
    print("\nOperators diloco's loop calls more often per step than Python's: " +
          (", ".join(f"{n} ({c_calls[n]:.0f} against {q_calls.get(n, 0):.0f})" for n in more) or "none") + ".")


if __name__ == "__main__":
    sys.exit(main())
