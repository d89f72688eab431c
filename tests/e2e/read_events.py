"""An independent reader of diloco's TensorBoard event files: checks every
TFRecord's length and data CRCs (CRC32C computed here, masked as TFRecord
does), parses each record with Python's protobuf runtime from the same
.proto diloco compiles, and compares the scalars with metrics.jsonl.

  read_events.py PY_PROTO_DIR RUN_DIR   (PY_PROTO_DIR: protoc --python_out of tensorboard.proto)
Exit 0 when every record is whole and every value equals its metrics.jsonl
field (as float32); 1 with the reason otherwise.
"""
import glob
import json
import os
import struct
import sys


def crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    return table


TABLE = crc32c_table()


def masked_crc(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        if len(data) - at < 12:
            raise ValueError(f"{path}: record header cut short at byte {at}")
        length = data[at:at + 8]
        (size,) = struct.unpack("<Q", length)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if length_crc != masked_crc(length):
            raise ValueError(f"{path}: length CRC mismatch at byte {at}")
        body = data[at + 12:at + 12 + size]
        if len(body) != size or len(data) < at + 16 + size:
            raise ValueError(f"{path}: record cut short at byte {at}")
        (data_crc,) = struct.unpack("<I", data[at + 12 + size:at + 16 + size])
        if data_crc != masked_crc(body):
            raise ValueError(f"{path}: data CRC mismatch in the record at byte {at}")
        yield body
        at += 16 + size


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def expected(rows):
    """(tag, step) -> value, as the metrics rows hold them."""
    out = {}
    for r in rows:
        n = r["round"]
        for key in ("train_loss", "eval_loss", "tokens", "bytes_sent", "wall_s", "utilization", "comm_share", "H",
                    "excluded_total", "tokens_per_s", "mfu", "eta_s"):
            if r.get(key) is not None:
                out[(f"round/{key}", n)] = r[key]
        for s, h in enumerate(r.get("site_steps", [])):
            out[(f"site/site-{s}/H", n)] = h
            out[(f"site/site-{s}/step_s", n)] = r["site_step_s"][s]
            out[(f"site/site-{s}/exchange_s", n)] = r["site_exchange_s"][s]
        for key in ("latency_ms", "bandwidth_mbps"):
            if r.get(f"link_{key}") is not None:
                out[(f"link/{key}", n)] = r[f"link_{key}"]
        for p in r.get("probed", []):
            for key in ("latency_ms", "bandwidth_mbps"):
                out[(f"link/site-{p['a']}-site-{p['b']}/{key}", n)] = p[key]
        if "members" in r:
            out[("membership/epoch", n)] = r["epoch"]
            out[("membership/members", n)] = r["members"]
    return out


def main():
    sys.path.insert(0, sys.argv[1])
    import tensorboard_pb2  # noqa: E402 (generated into argv[1])

    run = sys.argv[2]
    rows = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))]
    files = sorted(glob.glob(os.path.join(run, "tb", "events.out.tfevents.*")))
    if not files:
        sys.exit(f"no event file in {run}/tb")
    seen, steps, count = {}, [], 0
    for path in files:
        for i, body in enumerate(records(path)):
            event = tensorboard_pb2.Event()
            event.ParseFromString(body)
            count += 1
            if i == 0:
                assert event.file_version == "brain.Event:2", f"{path}: first record is not the file version"
                continue
            for v in event.summary.value:
                if v.tag.startswith("step/"):
                    if v.tag == "step/loss":
                        steps.append(event.step)
                    continue
                assert (v.tag, event.step) not in seen, f"{v.tag} at {event.step} written twice"
                seen[(v.tag, event.step)] = v.simple_value
    want = {k: f32(v) for k, v in expected(rows).items()}
    missing = sorted(set(want) - set(seen))
    extra = sorted(set(seen) - set(want))
    assert not missing, f"in metrics.jsonl, not in the event file: {missing[:5]}"
    assert not extra, f"in the event file, not in metrics.jsonl: {extra[:5]}"
    wrong = [(k, seen[k], want[k]) for k in want if seen[k] != want[k]]
    assert not wrong, f"values differ (event file, metrics.jsonl): {wrong[:5]}"
    total = sum(r["H"] for r in rows)
    assert steps == list(range(1, total + 1)), f"inner steps {steps[:3]}...{steps[-3:]}, expected 1..{total}"
    print(f"{count} records, CRCs good; {len(seen)} round scalars equal metrics.jsonl; {len(steps)} inner steps")


if __name__ == "__main__":
    try:
        main()
    except (AssertionError, ValueError) as e:
        print(f"read_events: {e}", file=sys.stderr)
        sys.exit(1)
