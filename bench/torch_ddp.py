#!/usr/bin/env python3
"""PyTorch DistributedDataParallel (gloo, loopback) throughput for the mlp
that dsgd benchmarks: N processes, one thread each, batch B per process, SGD
momentum 0.9, Fashion-MNIST from Debian's package. Prints
`ddp ranks=N batch=B samples_per_s=...` (all processes together).
Usage: torch_ddp.py [ranks] [steps]"""
import gzip, os, sys, time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

DATA = "/usr/share/datasets/fashion-mnist/"


def load():
    x = np.frombuffer(gzip.open(DATA + "train-images-idx3-ubyte.gz").read(), np.uint8, offset=16)
    y = np.frombuffer(gzip.open(DATA + "train-labels-idx1-ubyte.gz").read(), np.uint8, offset=8)
    return torch.tensor(x.reshape(-1, 1, 28, 28).astype(np.float32) / 255), torch.tensor(y.astype(np.int64))


def worker(rank, world, steps, batch, port, out):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    X, Y = load()
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 256), torch.nn.ReLU(),
                              torch.nn.Linear(256, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    model = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(rank)
    shard = torch.arange(rank, X.shape[0], world)

    def step():
        idx = shard[torch.randint(0, shard.numel(), (batch,), generator=g)]
        loss = torch.nn.functional.cross_entropy(model(X[idx]), Y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(50):
        step()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dist.barrier()
    dt = time.perf_counter() - t0
    if rank == 0:
        out.put(world * batch * steps / dt)
    dist.destroy_process_group()


if __name__ == "__main__":
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    batch = 64
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = 29500 + os.getpid() % 1000
    ps = [ctx.Process(target=worker, args=(r, world, steps, batch, port, q)) for r in range(world)]
    for p in ps:
        p.start()
    sps = q.get()
    for p in ps:
        p.join()
    print("ddp ranks=%d batch=%d samples_per_s=%.0f" % (world, batch, sps))
