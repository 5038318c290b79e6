#!/usr/bin/env python3
"""PyTorch peer for the map benchmark: what a GPU user would otherwise write,
T.zero_(); T.index_add_(0, R, S), on the same cases as bench/map_bench (S uniform
in [-1, 1), R uniform or Zipf(1.1) over the targets with the hot targets
scattered by a random permutation). Timed with CUDA events around the call
(zeroing included), median of the repeats after warm-up; each case checked
against a float64 index_add_ (relerr = max |T - ref| / max |ref|). Also measures
the device-to-device copy bandwidth (bytes read + written).

Prints one JSON line per case on stdout:
  {"peer": "index_add", "m":..., "n":..., "dist":..., "dtype":..., "index":...,
   "median_ms":..., "relerr":...}
and first {"peer": "copy", "copy_gbps": ...}.

usage: torch_map_peer.py [-m 40M] [-n 10k,20k,100k,500k,1M] [--dist uniform,zipf]
                         [--dtype float32] [--index int64] [-w 3] [-r 20]
"""
import argparse
import json
import sys

import torch

ZIPF_EXPONENT = 1.1


def parse_size(text):
    scale = {"k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "g": 1e9, "G": 1e9}
    if text[-1] in scale:
        return int(round(float(text[:-1]) * scale[text[-1]]))
    return int(text)


def median_event_ms(fn, warmup, repeats):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    mid = len(times) // 2
    return times[mid] if len(times) % 2 else 0.5 * (times[mid - 1] + times[mid])


def make_bridge(m, n, dist, index_dtype, gen, dev):
    if dist == "uniform":
        return torch.randint(0, n, (m,), device=dev, dtype=index_dtype, generator=gen)
    ranks = torch.arange(1, n + 1, device=dev, dtype=torch.float64)
    cdf = torch.cumsum(ranks.pow(-ZIPF_EXPONENT), 0)
    cdf /= cdf[-1].clone()
    out = torch.empty(m, device=dev, dtype=index_dtype)
    perm = torch.randperm(n, device=dev, generator=gen)
    step = 1 << 26   # bounded temporaries for large m
    for lo in range(0, m, step):
        hi = min(m, lo + step)
        u = torch.rand(hi - lo, device=dev, dtype=torch.float64, generator=gen)
        rank = torch.searchsorted(cdf, u).clamp_(max=n - 1)
        out[lo:hi] = perm[rank].to(index_dtype)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", default="40M")
    ap.add_argument("-n", default="10k,20k,100k,500k,1M")
    ap.add_argument("--dist", default="uniform,zipf")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--index", default="int64", choices=["int32", "int64"])
    ap.add_argument("-w", type=int, default=3)
    ap.add_argument("-r", type=int, default=20)
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()

    dev = torch.device("cuda")
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed if args.seed is not None else torch.seed() & 0xFFFFFFFF)
    vdtype = torch.float32 if args.dtype == "float32" else torch.float64
    idtype = torch.int32 if args.index == "int32" else torch.int64

    x = torch.empty(1 << 28, dtype=torch.float32, device=dev)
    y = torch.empty_like(x)
    x.uniform_(generator=gen)
    copy_ms = median_event_ms(lambda: y.copy_(x), 3, 20)
    print(json.dumps({"peer": "copy", "device": torch.cuda.get_device_name(0),
                      "copy_gbps": 2 * x.numel() * 4 / copy_ms / 1e6}), flush=True)
    del x, y

    for m in [parse_size(s) for s in args.m.split(",")]:
        for n in [parse_size(s) for s in args.n.split(",")]:
            for dist in args.dist.split(","):
                R = make_bridge(m, n, dist, idtype, gen, dev)
                S = torch.rand(m, device=dev, dtype=vdtype, generator=gen).mul_(2).sub_(1)
                T = torch.empty(n, device=dev, dtype=vdtype)

                def peer():
                    T.zero_()
                    T.index_add_(0, R, S)

                ms = median_event_ms(peer, args.w, args.r)
                ref = torch.zeros(n, device=dev, dtype=torch.float64).index_add_(0, R, S.double())
                peer()
                err = ((T.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-300)).item()
                print(json.dumps({"peer": "index_add", "m": m, "n": n, "dist": dist, "dtype": args.dtype,
                                  "index": args.index, "median_ms": ms, "relerr": err}), flush=True)
                del R, S, T, ref
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
