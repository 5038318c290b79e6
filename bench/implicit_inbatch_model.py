#!/usr/bin/env python3
"""A numpy model of in-batch negatives for implicit feedback (issue 14's GPU
lead): one SGD trainer of the cross-entropy loss with item biases, steps of
B interactions in a random order; each interaction's negatives are either
the other B - 1 items of its step ("inbatch", what a warp of B groups would
use) or N items drawn in proportion to their interactions^E ("sampled", as
`lacuna mf train --implicit` draws them). Items the user has seen are never
negatives in either. Full ranking as `lacuna mf evaluate --negatives 0`
(bench/als_implicit_peer.py's), raw and with E x log(interactions) added to
the scores (the `--negative-correction 1` of the tool). Same hyperparameters
for every mode: the comparison is between the negatives, not a tuned model.

  implicit_inbatch_model.py TRAIN TEST [-k 32] [--epochs 20] [--lr 0.05] [--l2 0.01] [--seeds 1,2]
  (TRAIN, TEST: `user item 1` lines, e.g. from als_implicit_peer.py split)
"""
import argparse
import time

import numpy as np

from als_implicit_peer import figures, indexed, ranks


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def unseen(seen_keys, keys):
    """Whether each user * ni + item key is not among the training pairs (sorted)."""
    at = np.minimum(np.searchsorted(seen_keys, keys), len(seen_keys) - 1)
    return seen_keys[at] != keys


def train(u, i, nu, ni, mode, k, epochs, lr, l2, B, N, E, seed):
    """User and item factors and item biases after `epochs` passes."""
    rng = np.random.default_rng(seed)
    P = rng.standard_normal((nu, k)) * 0.1 / np.sqrt(k)
    Q = rng.standard_normal((ni, k)) * 0.1 / np.sqrt(k)
    bq = np.zeros(ni)
    seen_keys = np.sort(u.astype(np.int64) * ni + i)
    weight = np.bincount(i, minlength=ni).astype(np.float64) ** E
    cdf = np.cumsum(weight / weight.sum())
    n = len(u)
    for _ in range(epochs):
        order = rng.permutation(n)
        for s in range(0, n - B + 1, B):
            idx = order[s:s + B]
            us, its = u[idx], i[idx]
            Pu, Qi = P[us], Q[its]
            if mode == "inbatch":
                L = Pu @ Qi.T + bq[its][None, :]
                # Negatives: the step's other items, unless the row's user has seen them.
                valid = unseen(seen_keys, us[:, None] * ni + its[None, :])
                np.fill_diagonal(valid, False)
                Y = np.eye(B)
                G = sigmoid(L) - Y
                G = np.where(valid | (Y > 0), G, 0.0)
                dP = G @ Qi + l2 * Pu
                # l2 once an occurrence, positive or negative, as the sampled mode applies it.
                dQ = G.T @ Pu + l2 * (1 + valid.sum(0))[:, None] * Qi
                db = G.sum(0)
                np.add.at(P, us, -lr * dP)
                np.add.at(Q, its, -lr * dQ)
                np.add.at(bq, its, -lr * db)
            else:
                neg = np.searchsorted(cdf, rng.random((B, N)))
                neg = np.minimum(neg, ni - 1)
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
    ap.add_argument("--l2", type=float, default=0.01)
    ap.add_argument("--seeds", default="1,2")
    a = ap.parse_args()
    u, i, seen, items_users, held = indexed(a.train, a.test)
    nu, ni = len(seen), len(items_users)
    cnt = np.bincount(i, minlength=ni).astype(np.float64)
    for mode, B, N, E in (("sampled", 8, 7, 1.0), ("inbatch", 8, 7, 1.0), ("sampled", 8, 4, 0.75)):
        for seed in (int(s) for s in a.seeds.split(",")):
            t = time.time()
            P, Q, bq = train(u, i, nu, ni, mode, a.k, a.epochs, a.lr, a.l2, B, N, E, seed)
            S = P @ Q.T + bq[None, :]
            hr, nd, _ = figures(ranks(S, seen, held), 10)
            hc, ndc, _ = figures(ranks(S + E * np.log(np.maximum(cnt, 1))[None, :], seen, held), 10)
            print("%-8s B %d N %d E %.2f seed %d: HR@10 %.4f NDCG@10 %.4f | corrected %.4f %.4f (%.0f s)"
                  % (mode, B, N, E, seed, hr, nd, hc, ndc, time.time() - t), flush=True)


if __name__ == "__main__":
    main()
