"""Writes token shards the way llm.c's dev/data/data_common.py does (a header
of 256 int32: magic, version, count; then the ids), independently of diloco's
own writer, so the reader is tested against the format rather than itself.

Ids come from the words of a text file, hashed into [300, vocab): text with
real structure (a Zipf distribution, word order) and ids that need uint16.

usage: make_shards.py TEXT OUT_DIR VOCAB SHARDS [--uint32] [--headerless]
"""
import array
import os
import sys
import zlib


def main():
    text, out_dir, vocab, shards = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    wide = "--uint32" in sys.argv
    headerless = "--headerless" in sys.argv
    words = open(text, "rb").read().split()
    ids = [300 + zlib.crc32(w) % (vocab - 300) for w in words]
    os.makedirs(out_dir, exist_ok=True)
    per = (len(ids) + shards - 1) // shards
    for s in range(shards):
        part = array.array("I" if wide else "H", ids[s * per:(s + 1) * per])
        with open(os.path.join(out_dir, "shard_%03d.bin" % s), "wb") as f:
            if not headerless:
                header = array.array("i", [0] * 256)
                header[0], header[1] = (20240801, 7) if wide else (20240520, 1)
                header[2] = len(part)
                f.write(header.tobytes())
            f.write(part.tobytes())
    print("wrote %d ids in %d shards to %s" % (len(ids), shards, out_dir))


if __name__ == "__main__":
    main()
