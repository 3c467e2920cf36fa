#!/usr/bin/python3
"""PyTorch counterpart of bench_train.c: the same models, batch, optimizer,
data and loop structure on one thread (TORCH_BENCH_THREADS=T: T threads),
so the samples/s compare directly.

Per model: 50 warm-up steps (fewer once 1 s has passed, at least 5),
then a loop run until ~3.5 s have passed of (index a pre-loaded tensor
with a shuffled permutation → forward → cross_entropy → zero_grad →
backward → step).

The residual network is dsgd's resnet:20,16 layer for layer (3x3 stem to
16 channels, three stages of three basic blocks at 16, 32, 64 channels with
stride-2 1x1 projection shortcuts, global average pooling, a dense layer; no
bias in the convolutions), He-normal convolution weights.

Output:
  torch version=V threads=T interop_threads=I mkldnn_available=A mkldnn_enabled=E blas=B
  torch model=M batch=B steps=S seconds=T samples_per_s=X [maxrss_kb=K]
Usage: /usr/bin/python3 bench/torch_bench.py [DATA_DIR] [MODEL...]
  (MODEL: mlp, lenet, resnet; default mlp and lenet. maxrss_kb, the peak
  resident memory of the process, is printed when one model is asked for.)
"""
import resource
import gzip
import os
import re
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 64
WARMUP, WARMUP_MIN, WARMUP_S = 50, 5, 1.0  # as in bench_train.c
TARGET_S = 3.5
LR = 0.05
DATA_DIR = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/datasets/fashion-mnist"
MODELS = sys.argv[2:] or ["mlp", "lenet"]


def load_idx(images, labels):
    """MNIST-format IDX pair → x (n, 1, 28, 28) float32 in [0, 1], y (n) int64."""
    with gzip.open(images, "rb") as f:
        raw = f.read()
    n, h, w = (int.from_bytes(raw[o:o + 4], "big") for o in (4, 8, 12))
    x = np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, 1, h, w)
    with gzip.open(labels, "rb") as f:
        y = np.frombuffer(f.read(), dtype=np.uint8, offset=8)
    return (torch.from_numpy(x.astype(np.float32) / 255.0),
            torch.from_numpy(y.astype(np.int64)))


def make_model(name):
    if name == "resnet":
        return ResNet()
    if name == "mlp":
        return nn.Sequential(
            nn.Flatten(), nn.Linear(784, 256), nn.ReLU(),
            nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10))


class Block(nn.Module):
    """A basic block: two 3x3 convolutions with batch normalization, and an
    identity shortcut or a stride-2 1x1 projection where the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.proj = None
        if stride != 1 or cin != cout:
            self.proj = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.b1(self.c1(x)))
        out = self.b2(self.c2(out))
        return F.relu(out + (self.proj(x) if self.proj is not None else x))


class ResNet(nn.Module):
    def __init__(self, depth=20, width=16, cin=1, classes=10):
        super().__init__()
        n = (depth - 2) // 6
        self.stem = nn.Sequential(nn.Conv2d(cin, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        blocks, c = [], width
        for s in range(3):
            for j in range(n):
                cout = width << s
                blocks.append(Block(c, cout, 2 if s > 0 and j == 0 else 1))
                c = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(c, classes)
        for mod in self.modules():
            if isinstance(mod, nn.Conv2d):
                nn.init.kaiming_normal_(mod.weight, mode="fan_in", nonlinearity="relu")

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class Batches:
    """Shuffled minibatches in passes, like dsgd's batch_iter."""

    def __init__(self, x, y, gen):
        self.x, self.y, self.gen = x, y, gen
        self.n = x.shape[0]
        self.perm = torch.randperm(self.n, generator=gen)
        self.pos = 0

    def next(self):
        if self.pos + BATCH > self.n:
            self.perm = torch.randperm(self.n, generator=self.gen)
            self.pos = 0
        idx = self.perm[self.pos:self.pos + BATCH]
        self.pos += BATCH
        return self.x[idx], self.y[idx]


def bench(name, x, y, report_rss):
    torch.manual_seed(1)
    model = make_model(name)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    it = Batches(x, y, torch.Generator().manual_seed(1))

    def step():
        xb, yb = it.next()
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()

    w0 = time.perf_counter()
    for s in range(WARMUP):
        if s >= WARMUP_MIN and time.perf_counter() - w0 >= WARMUP_S:
            break
        step()
    steps, t0 = 0, time.perf_counter()
    while True:  # steps until TARGET_S has passed, as in bench_train.c
        step()
        steps += 1
        secs = time.perf_counter() - t0
        if secs >= TARGET_S and steps >= 10:
            break
    sps = steps * BATCH / secs
    rss = f" maxrss_kb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}" if report_rss else ""
    print(f"torch model={name} batch={BATCH} steps={steps} seconds={secs:.3f} "
          f"samples_per_s={sps:.1f}{rss}", flush=True)


def main():
    # TORCH_BENCH_THREADS=T: T threads (bench/run.sh's threads section); else 1
    torch.set_num_threads(int(os.environ.get("TORCH_BENCH_THREADS", "1")))
    blas = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    print(f"torch version={torch.__version__} threads={torch.get_num_threads()} "
          f"interop_threads={torch.get_num_interop_threads()} "
          f"mkldnn_available={torch.backends.mkldnn.is_available()} "
          f"mkldnn_enabled={torch.backends.mkldnn.enabled} "
          f"blas={blas.group(1) if blas else 'unknown'}", flush=True)
    x, y = load_idx(os.path.join(DATA_DIR, "train-images-idx3-ubyte.gz"),
                    os.path.join(DATA_DIR, "train-labels-idx1-ubyte.gz"))
    for name in MODELS:
        bench(name, x, y, len(MODELS) == 1)


if __name__ == "__main__":
    main()
