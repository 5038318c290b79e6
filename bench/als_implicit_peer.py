#!/usr/bin/env python3
"""Implicit-feedback ALS (Hu, Koren & Volinsky 2008) in numpy: the peer of
`lacuna mf train --implicit` in bench/mf_implicit_als.sh. The `implicit`
package is not installable here, so this implements its algorithm with its
defaults (factors k, regularization 0.01, alpha 1, 15 iterations, confidence
1 + alpha r), each row solved exactly (Cholesky) where implicit takes three
conjugate-gradient steps. Ranking as `lacuna mf evaluate --negatives 0`:
each user's held-out item against every item it did not interact with in
training (ties: lower index first); HR@n and NDCG@n over users.

  als_implicit_peer.py split ALL TRAIN TEST [--min R] [--seed S]
      interactions = ratings >= R (default 4); one per user (with >= 2)
      held out at random; triples out
  als_implicit_peer.py als TRAIN TEST [-k 32] [--iterations 15] [--seed S] [-n 10]
      prints JSON: hr, ndcg (ALS) and pop_hr, pop_ndcg (most-popular), seconds
  als_implicit_peer.py popular TRAIN TEST [--negatives 99] [--seed S] [-n 10]
      most-popular (items by training interactions) on `lacuna mf evaluate`'s
      protocols: each user's held-out item against M items it did not
      interact with, drawn uniformly (ties with the held item in a random
      order), or with --negatives 0
      every such item (ties: lower index first); prints JSON hr, ndcg, users
"""
import argparse
import json
import sys
import time

import numpy as np


def read(path):
    a = np.loadtxt(path, dtype=np.float64, ndmin=2)
    return a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2]


def split(args):
    u, i, r = read(args.all)
    keep = r >= args.min
    u, i = u[keep], i[keep]
    rng = np.random.default_rng(args.seed)
    order = np.lexsort((i, u))
    u, i = u[order], i[order]
    starts = np.flatnonzero(np.r_[True, u[1:] != u[:-1]])
    ends = np.r_[starts[1:], len(u)]
    test = np.zeros(len(u), bool)
    for s, e in zip(starts, ends):
        if e - s >= 2:
            test[s + rng.integers(e - s)] = True
    for path, m in ((args.train, ~test), (args.test, test)):
        with open(path, "w") as f:
            for a, b in zip(u[m], i[m]):
                f.write(f"{a} {b} 1\n")


def solve_rows(fixed, rows, k, reg, alpha):
    """Each row's factors given the other side's: (F'F + reg I + alpha F_r'F_r) x = (1 + alpha) F_r' 1."""
    gram = fixed.T @ fixed + reg * np.eye(k)
    out = np.zeros((len(rows), k))
    for x, idx in enumerate(rows):
        if len(idx) == 0:
            continue
        fr = fixed[idx]
        a = gram + alpha * (fr.T @ fr)
        b = (1.0 + alpha) * fr.sum(axis=0)
        c = np.linalg.cholesky(a)
        out[x] = np.linalg.solve(c.T, np.linalg.solve(c, b))
    return out


def ranks(scores, seen, held):
    """Rank of each user's held item among the items it did not see (ties: lower index first)."""
    r = np.full(len(held), -1)
    for x, h in enumerate(held):
        if h < 0:
            continue
        s = scores[x].copy()
        s[seen[x]] = -np.inf
        sh = s[h]
        r[x] = np.count_nonzero(s > sh) + np.count_nonzero(s[:h] == sh)
    return r


def figures(r, n):
    m = r >= 0
    hit = (r[m] < n)
    ndcg = np.where(hit, 1.0 / np.log2(r[m] + 2.0), 0.0)
    return float(hit.mean()), float(ndcg.mean()), int(m.sum())


def indexed(train, test):
    """The training interactions as dense indices (users and items in id
    order): their user and item arrays, each user's items, each item's users,
    and each user's held-out test item (-1: none, or an id unseen in training)."""
    tu, ti, _ = read(train)
    su, si, _ = read(test)
    users = np.unique(tu)
    items = np.unique(ti)
    uix = {v: x for x, v in enumerate(users)}
    iix = {v: x for x, v in enumerate(items)}
    nu, ni = len(users), len(items)
    u = np.array([uix[a] for a in tu], np.int64)
    i = np.array([iix[b] for b in ti], np.int64)
    ur = [[] for _ in range(nu)]
    ir = [[] for _ in range(ni)]
    for a, b in zip(u, i):
        ur[a].append(b)
        ir[b].append(a)
    ur = [np.array(x, np.int64) for x in ur]
    ir = [np.array(x, np.int64) for x in ir]
    held = np.full(nu, -1)
    for a, b in zip(su, si):
        if a in uix and b in iix:
            held[uix[a]] = iix[b]
    return u, i, ur, ir, held


def als(args):
    _, _, ur, ir, held = indexed(args.train, args.test)
    nu, ni = len(ur), len(ir)
    rng = np.random.default_rng(args.seed)
    X = rng.standard_normal((nu, args.k)) * 0.01
    Y = rng.standard_normal((ni, args.k)) * 0.01
    t = time.time()
    for _ in range(args.iterations):
        X = solve_rows(Y, ur, args.k, 0.01, 1.0)
        Y = solve_rows(X, ir, args.k, 0.01, 1.0)
    secs = time.time() - t
    hr, ndcg, n_users = figures(ranks(X @ Y.T, ur, held), args.n)
    pop = np.array([len(x) for x in ir], np.float64)
    phr, pndcg, _ = figures(ranks(np.tile(pop, (nu, 1)), ur, held), args.n)
    print(json.dumps({"peer": "numpy ALS (Hu-Koren-Volinsky, implicit's defaults, exact solves)", "k": args.k,
                      "iterations": args.iterations, "hr": hr, "ndcg": ndcg, "users": n_users,
                      "pop_hr": phr, "pop_ndcg": pndcg, "seconds": secs}))


def popular(args):
    tu, ti, _ = read(args.train)
    su, si, _ = read(args.test)
    users, items = np.unique(tu), np.unique(ti)
    uix = {v: x for x, v in enumerate(users)}
    iix = {v: x for x, v in enumerate(items)}
    ni = len(items)
    seen = [set() for _ in users]
    count = np.zeros(ni)
    for a, b in zip(tu, ti):
        seen[uix[a]].add(iix[b])
        count[iix[b]] += 1
    held = [(uix[a], iix[b]) for a, b in zip(su, si) if a in uix and b in iix and iix[b] not in seen[uix[a]]]
    rng = np.random.default_rng(args.seed)
    r = np.empty(len(held), np.int64)
    for x, (u, h) in enumerate(held):
        free = np.array([j for j in range(ni) if j != h and j not in seen[u]])
        if args.negatives > 0:
            free = rng.choice(free, size=min(args.negatives, len(free)), replace=False)
            c = count[free]
            r[x] = np.count_nonzero(c > count[h]) + rng.integers(0, np.count_nonzero(c == count[h]) + 1)
        else:
            r[x] = np.count_nonzero(count[free] > count[h]) + np.count_nonzero((count[free] == count[h]) & (free < h))
    hit = r < args.n
    print(json.dumps({"ranker": "most-popular", "negatives": args.negatives, "hr": float(hit.mean()),
                      "ndcg": float(np.where(hit, 1.0 / np.log2(r + 2.0), 0.0).mean()), "users": len(held)}))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="verb", required=True)
    s = sub.add_parser("split")
    s.add_argument("all")
    s.add_argument("train")
    s.add_argument("test")
    s.add_argument("--min", type=float, default=4.0)
    s.add_argument("--seed", type=int, default=1)
    a = sub.add_parser("als")
    a.add_argument("train")
    a.add_argument("test")
    a.add_argument("-k", type=int, default=32)
    a.add_argument("--iterations", type=int, default=15)
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("-n", type=int, default=10)
    q = sub.add_parser("popular")
    q.add_argument("train")
    q.add_argument("test")
    q.add_argument("--negatives", type=int, default=99)
    q.add_argument("--seed", type=int, default=1)
    q.add_argument("-n", type=int, default=10)
    args = ap.parse_args()
    {"split": split, "als": als, "popular": popular}[args.verb](args)


if __name__ == "__main__":
    sys.exit(main())
