#!/usr/bin/env python3
"""The PyTorch peers of impute_cuda_bench, on the same GPU in the same run.

For each shape m x n x N (float32, standard normal entries, as in the bench):
  svd     torch.linalg.svd of the whole batch (full_matrices=False)
  gesvda  the same with driver="gesvda" (reported as failed when it raises
          or returns non-finite values)
  eigh    the Gram-matrix route: eigh(AᵀA), σ = sqrt(μ), U = A V / σ
  gft     the GFT GEMM: (m·n x N) @ (N x N)
and the 4039-vertex symmetric eigendecomposition (eigh). Each is timed with
CUDA events after a warm-up, the median of --reps runs; one JSON line per
figure. Runs on the CPU only when asked (--device cpu), for a smoke test.
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="50x50x4039,64x64x2100,128x128x2000,512x512x300")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print(json.dumps({"peer": "torch", "error": "no torch"}))
        return 0
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"peer": "torch", "error": "no CUDA"}))
        return 0

    def timed(fn):
        fn()   # warm-up
        times = []
        for _ in range(args.reps):
            if dev.type == "cuda":
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                torch.cuda.synchronize()
                times.append(a.elapsed_time(b))
            else:
                import time
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
        times.sort()
        return times[len(times) // 2]

    gen = torch.Generator(device=dev).manual_seed(42)
    for spec in args.shapes.split(","):
        m, n, N = (int(x) for x in spec.split("x"))
        a = torch.randn(N, m, n, device=dev, generator=gen, dtype=torch.float32)
        row = {"peer": "torch", "m": m, "n": n, "N": N}
        row["svd_ms"] = timed(lambda: torch.linalg.svd(a, full_matrices=False))

        def gesvda():
            u, s, vh = torch.linalg.svd(a, full_matrices=False, driver="gesvda")
            if not torch.isfinite(s).all():
                raise RuntimeError("non-finite singular values")
        try:
            row["gesvda_ms"] = timed(gesvda) if dev.type == "cuda" else None
        except Exception as e:   # gesvda fails to converge beyond small sizes
            row["gesvda_ms"] = None
            row["gesvda_error"] = str(e).splitlines()[0][:120]

        def gram():
            g = a.transpose(1, 2) @ a
            mu, v = torch.linalg.eigh(g)
            s = mu.clamp_min(0).sqrt()
            return (a @ v) / s.clamp_min(1e-30).unsqueeze(1)
        row["gram_eigh_ms"] = timed(gram)
        x = torch.randn(m * n, N, device=dev, generator=gen)
        u = torch.randn(N, N, device=dev, generator=gen)
        row["gft_gemm_ms"] = timed(lambda: x @ u)
        print(json.dumps(row), flush=True)
        del a, x, u
    lap = torch.randn(4039, 4039, device=dev, generator=gen)
    lap = lap + lap.T
    print(json.dumps({"peer": "torch", "case": "eigh 4039", "ms": timed(lambda: torch.linalg.eigh(lap))}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
