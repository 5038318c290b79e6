#!/usr/bin/env python3
"""Joins the GPU impute benchmark's JSON lines into one table against the
targets of the issue "impute on GPUs": the batched SVT alone (cold, the
figure a one-off batched SVT would take) beside PyTorch's batched SVD and
its gesvda driver measured in the same run, the iteration of each shape,
and the ego-Facebook protocol.

usage: impute_table.py FILE.jsonl...

Lines are recognised by their keys: impute_cuda_bench's ("capability":
"impute", "case": "svt" / "iteration" / "ego-facebook") and
bench/torch_impute_peer.py's ("peer": "torch" with "svd_ms"). Other lines
are skipped. Plain python3, no packages."""
import sys

from compare import json_lines

# Per-iteration targets (ms) by slice shape and count, fp32, default path.
ITERATION_MS = {(50, 50, 4039): 5, (64, 64, 2100): 3, (128, 128, 2000): 15, (512, 512, 300): 30}
SVD_TIMES = 100          # the SVT alone at least this much faster than torch.linalg.svd, every size
GESVDA_TIMES = 3         # ... and than gesvda at 50 x 50
GESVDA_SHAPE = (50, 50)
EGO_SECONDS = 0.6        # the ego-Facebook protocol, eigendecomposition included


def load(paths):
    svt, peers, iterations, ego = {}, {}, {}, []
    for r in json_lines(paths):
        if r.get("peer") == "torch" and "svd_ms" in r:
            peers[(r["m"], r["n"], r["N"])] = r
        elif r.get("capability") == "impute":
            shape = (r.get("m"), r.get("n"), r.get("N"))
            if r.get("case") == "svt":
                svt.setdefault(shape, {})[r.get("start")] = r["ms"]
            elif r.get("case") == "iteration" and r.get("svt_path") == "default" and r.get("gemm") == "fp32":
                iterations[shape] = r["ms"]
            elif r.get("case") == "ego-facebook" and r.get("gemm") == "fp32":
                ego.append(r)
    return svt, peers, iterations, ego


def verdict(ok):
    return "met" if ok else "missed"


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    svt, peers, iterations, ego = load(argv[1:])
    out = []
    if svt:
        out.append("| SVT alone | cold ms | warm ms | torch svd ms | x svd (>= %d) | gesvda ms | x gesvda | target |"
                   % SVD_TIMES)
        out.append("|---|---|---|---|---|---|---|---|")
        for shape in sorted(svt, key=lambda s: (s[0] or 0) * (s[1] or 0)):
            cold, warm = svt[shape].get("cold"), svt[shape].get("warm")
            peer = peers.get(shape)
            cells = ["%dx%dx%d" % shape, "%.3f" % cold if cold else "-", "%.3f" % warm if warm else "-"]
            if peer and cold:
                x_svd = peer["svd_ms"] / cold
                checks = [x_svd >= SVD_TIMES]
                gesvda = peer.get("gesvda_ms")
                x_ges = gesvda / cold if gesvda else None
                if shape[:2] == GESVDA_SHAPE and x_ges is not None:
                    checks.append(x_ges >= GESVDA_TIMES)
                cells += ["%.1f" % peer["svd_ms"], "%.0f" % x_svd, "%.2f" % gesvda if gesvda else "-",
                          "%.2f" % x_ges if x_ges is not None else "-", verdict(all(checks))]
            else:
                cells += ["-", "-", "-", "-", "no peer in this run"]
            out.append("| " + " | ".join(cells) + " |")
    if iterations:
        out.append("")
        out.append("| iteration | ms | target ms | |")
        out.append("|---|---|---|---|")
        for shape in sorted(iterations, key=lambda s: (s[0] or 0) * (s[1] or 0)):
            target = ITERATION_MS.get(shape)
            out.append("| %dx%dx%d | %.3f | %s | %s |" % (shape + (iterations[shape], target if target else "-",
                                                           verdict(iterations[shape] <= target) if target else "")))
    for r in ego:
        out.append("")
        out.append("ego-Facebook at ratio %.2f: %.3f s incl. eigendecomposition (target %.1f s: %s), rMSE %.5g"
                   % (r["ratio"], r["s"], EGO_SECONDS, verdict(r["s"] <= EGO_SECONDS), r["rmse"]))
    if not out:
        print("impute_table.py: no impute figures in %s" % ", ".join(argv[1:]), file=sys.stderr)
        return 1
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
