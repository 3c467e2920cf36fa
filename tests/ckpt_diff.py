#!/usr/bin/env python3
"""Largest absolute difference between the parameters of two dsgd checkpoints
(tensors named layer*), read with json + struct only. Prints one number.
Usage: ckpt_diff.py A.safetensors B.safetensors"""
import json, struct, sys

def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, t in hdr.items():
        if name.startswith("layer"):
            b, e = t["data_offsets"]
            out[name] = struct.unpack("<%df" % ((e - b) // 4), data[b:e])
    return out

a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
if sorted(a) != sorted(b):
    sys.exit("different tensors: %s vs %s" % (sorted(a), sorted(b)))
print("%.9g" % max(max(abs(x - y) for x, y in zip(a[k], b[k])) for k in a))
