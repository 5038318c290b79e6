#!/usr/bin/env python3
"""A numpy model of in-batch negatives for implicit feedback (issue 14's GPU
lead): one SGD trainer of the cross-entropy loss with item biases. A step
holds one or more warps of W = 8 interactions; each interaction's negatives
are either other items of its warp at that step ("inbatch": all 7 others;
"inbatch3": the 3 of groups g+1..g+3 mod 8) or N items drawn in proportion
to their interactions^E ("sampled": E 0.75, N 4, as `lacuna mf train
--implicit` draws them; "sampled-e1": E 1, N 7). Items the user has seen are
never negatives ("inbatch-noseen" skips that test and drops only the items
equal to the row's own positive). Full ranking as `lacuna mf evaluate --negatives 0`
(bench/als_implicit_peer.py's), raw and with E x log(interactions) added to
the scores (the `--negative-correction 1` of the tool). Same hyperparameters
for every mode: the comparison is between the negatives, not a tuned model.

Schedules. Without --streams: steps of one warp, 8 interactions in a fresh
random order each epoch. With --streams S (a multiple of 8): the
interactions are dealt once into S streams of whole user runs (greedy, the
least loaded stream), as the CUDA schedule; a step takes every stream's next
interaction, S / 8 warps of 8 streams in lockstep. The streams are grouped
into warps anew each epoch (--fixed-warps: once; --regroup-steps: each step).

  implicit_inbatch_model.py TRAIN TEST [-k 32] [--epochs 20] [--lr 0.05]
      [--l2 0.01[,0.02,...]] [--seeds 1,2] [--streams S [--fixed-warps | --regroup-steps]]
      [--modes inbatch,inbatch3,sampled (the default; also inbatch-noseen, sampled-e1)]
  (TRAIN, TEST: `user item 1` lines, e.g. from als_implicit_peer.py split)
  One line a mode, l2 and seed; then each mode's best l2 (mean corrected HR@10).
"""
import argparse
import time

import numpy as np

from als_implicit_peer import figures, indexed, ranks

W = 8
# name: (kind, negatives an interaction, exponent, seen test)
MODES = {
    "inbatch": ("inbatch", 7, 1.0, True),
    "inbatch3": ("inbatch", 3, 1.0, True),
    "inbatch-noseen": ("inbatch", 7, 1.0, False),
    "sampled": ("sampled", 4, 0.75, True),
    "sampled-e1": ("sampled", 7, 1.0, True),
}


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def unseen(seen_keys, keys):
    """Whether each user * ni + item key is not among the training pairs (sorted)."""
    at = np.minimum(np.searchsorted(seen_keys, keys), len(seen_keys) - 1)
    return seen_keys[at] != keys


def streams_of(u, nu, S, rng):
    """S x L interaction indices (-1: past a stream's end), each user's run in one stream."""
    order = np.argsort(u, kind="stable")
    cnt = np.bincount(u, minlength=nu)
    starts = np.concatenate([[0], np.cumsum(cnt)])
    load = np.zeros(S, np.int64)
    members = [[] for _ in range(S)]
    for usr in rng.permutation(nu):
        s = int(np.argmin(load))
        members[s].append(usr)
        load[s] += cnt[usr]
    cells = np.full((S, int(load.max())), -1, np.int64)
    for s in range(S):
        if members[s]:
            idx = np.concatenate([order[starts[x]:starts[x + 1]] for x in members[s]])
            cells[s, :len(idx)] = idx
    return cells


def steps(u, nu, epochs, streams, warps, rng):
    """Each step's interactions, warps x W (-1: none)."""
    n = len(u)
    if streams:
        cells = streams_of(u, nu, streams, rng)
        perm = None
    for ep in range(epochs):
        if not streams:
            order = rng.permutation(n)
            for s in range(0, n - W + 1, W):
                yield order[s:s + W][None, :]
            continue
        if perm is None or warps != "fixed":
            perm = rng.permutation(streams)
        for t in range(cells.shape[1]):
            if warps == "step":
                perm = rng.permutation(streams)
            yield cells[perm, t].reshape(-1, W)


def train(u, i, nu, ni, mode, k, epochs, lr, l2, seed, streams=0, warps="epoch"):
    """User and item factors and item biases after `epochs` passes."""
    kind, N, E, seen_test = MODES[mode]
    rng = np.random.default_rng(seed)
    P = rng.standard_normal((nu, k)) * 0.1 / np.sqrt(k)
    Q = rng.standard_normal((ni, k)) * 0.1 / np.sqrt(k)
    bq = np.zeros(ni)
    seen_keys = np.sort(u.astype(np.int64) * ni + i)
    weight = np.bincount(i, minlength=ni).astype(np.float64) ** E
    cdf = np.cumsum(weight / weight.sum())
    off = (np.arange(W)[None, :] - np.arange(W)[:, None]) % W
    pairs = ((off >= 1) & (off <= N))[None]          # group g takes group h's item
    eye = np.eye(W, dtype=bool)[None]
    for c in steps(u, nu, epochs, streams, warps, rng):
        live = c >= 0
        cc = np.where(live, c, 0)
        us, its = u[cc], i[cc]
        Pu, Qi = P[us], Q[its]                       # warps x W x k
        if kind == "inbatch":
            L = np.einsum("wgk,whk->wgh", Pu, Qi) + bq[its][:, None, :]
            taken = live[:, :, None] & live[:, None, :] & pairs
            if seen_test:
                valid = taken & unseen(seen_keys, us[:, :, None] * ni + its[:, None, :])
            else:
                valid = taken & (its[:, :, None] != its[:, None, :])
            G = sigmoid(L) - eye
            G = np.where(valid | (eye & live[:, :, None]), G, 0.0)
            dP = np.einsum("wgh,whk->wgk", G, Qi) + l2 * Pu
            # l2 once for the positive and once for each interaction that takes
            # the row as a negative, seen or not: the sampled modes charge every
            # draw, seen ones too, and charging only unseen ones left in-batch
            # rows less regularised (the ML-100k "loss" of the first model).
            occ = live + taken.sum(1)
            dQ = np.einsum("wgh,wgk->whk", G, Pu) + l2 * occ[:, :, None] * Qi
            m = live.ravel()
            np.add.at(P, us.ravel()[m], -lr * dP.reshape(-1, k)[m])
            np.add.at(Q, its.ravel()[m], -lr * dQ.reshape(-1, k)[m])
            np.add.at(bq, its.ravel()[m], -lr * G.sum(1).ravel()[m])
        else:
            us, its, Pu, Qi = us[live], its[live], Pu[live], Qi[live]
            neg = np.minimum(np.searchsorted(cdf, rng.random((len(us), N))), ni - 1)
            valid = unseen(seen_keys, us[:, None] * ni + neg)
            Qn = Q[neg]                                   # B x N x k
            lp = np.einsum("bk,bk->b", Pu, Qi) + bq[its]
            ln = np.einsum("bk,bnk->bn", Pu, Qn) + bq[neg]
            gp = sigmoid(lp) - 1
            gn = np.where(valid, sigmoid(ln), 0.0)
            dP = gp[:, None] * Qi + np.einsum("bn,bnk->bk", gn, Qn) + l2 * Pu
            np.add.at(P, us, -lr * dP)
            np.add.at(Q, its, -lr * (gp[:, None] * Pu + l2 * Qi))
            np.add.at(bq, its, -lr * gp)
            np.add.at(Q, neg.ravel(), -lr * ((gn[:, :, None] * Pu[:, None, :]).reshape(-1, k) + l2 * Qn.reshape(-1, k)))
            np.add.at(bq, neg.ravel(), -lr * gn.ravel())
    return P, Q, bq


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("train")
    ap.add_argument("test")
    ap.add_argument("-k", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--l2", default="0.01", help="comma list")
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--modes", default="inbatch,inbatch3,sampled")
    ap.add_argument("--streams", type=int, default=0, help="0: steps of one warp in a random order")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--fixed-warps", action="store_true")
    g.add_argument("--regroup-steps", action="store_true")
    a = ap.parse_args()
    modes = a.modes.split(",")
    for m in modes:
        if m not in MODES:
            ap.error("unknown mode %s (known: %s)" % (m, ", ".join(MODES)))
    if a.streams % W:
        ap.error("--streams must be a multiple of %d" % W)
    warps = "fixed" if a.fixed_warps else "step" if a.regroup_steps else "epoch"
    l2s = [float(x) for x in a.l2.split(",")]
    seeds = [int(s) for s in a.seeds.split(",")]
    u, i, seen, items_users, held = indexed(a.train, a.test)
    nu, ni = len(seen), len(items_users)
    logcnt = np.log(np.maximum(np.bincount(i, minlength=ni), 1)).astype(np.float64)
    best = {}
    for mode in modes:
        E = MODES[mode][2]
        for l2 in l2s:
            hcs = []
            for seed in seeds:
                t = time.time()
                P, Q, bq = train(u, i, nu, ni, mode, a.k, a.epochs, a.lr, l2, seed, a.streams, warps)
                S = P @ Q.T + bq[None, :]
                hr, nd, _ = figures(ranks(S, seen, held), 10)
                hc, ndc, _ = figures(ranks(S + E * logcnt[None, :], seen, held), 10)
                hcs.append(hc)
                print("%-14s l2 %-6g seed %d: HR@10 %.4f NDCG@10 %.4f | corrected %.4f %.4f (%.0f s)"
                      % (mode, l2, seed, hr, nd, hc, ndc, time.time() - t), flush=True)
            if mode not in best or np.mean(hcs) > best[mode][1]:
                best[mode] = (l2, np.mean(hcs), hcs)
    for mode in modes:
        l2, mean, hcs = best[mode]
        print("best %-14s l2 %-6g corrected HR@10 %s (mean %.4f)"
              % (mode, l2, " / ".join("%.4f" % h for h in hcs), mean), flush=True)


if __name__ == "__main__":
    main()
