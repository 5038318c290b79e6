# Interactions with planted preferences, split leave-one-out (the shape of
# tests/mf_planted.h, NumPy's draws): items in `groups` clusters (item i in
# cluster i mod groups) with popularity 1 / (1 + rank) within; every user likes
# two clusters and takes `per` distinct items, 85 % from its clusters and the
# rest from all items, each by popularity; the last taken is held out.
#   mf_planted.py USERS ITEMS PER GROUPS SEED TRAIN TEST   (lines "user item 1")
import numpy as np, sys
users, items, per, groups, seed = (int(x) for x in sys.argv[1:6])
rng = np.random.default_rng(seed)
def weights(n): w = 1.0 / (1.0 + np.arange(n)); return w / w.sum()
cl = [np.arange(c, items, groups) for c in range(groups)]
cw = [weights(len(c)) for c in cl]; aw = weights(items)
with open(sys.argv[6], 'w') as tr, open(sys.argv[7], 'w') as te:
    for u in range(1, users + 1):
        like = rng.integers(groups, size=2); got = []; taken = set()
        for _ in range(50 * per):
            if len(got) == per: break
            if rng.random() < 0.85:
                c = like[rng.integers(2)]; i = cl[c][rng.choice(len(cl[c]), p=cw[c])]
            else:
                i = rng.choice(items, p=aw)
            if i in taken: continue
            taken.add(i); got.append(i)
        for x, i in enumerate(got):
            print(u, i + 1, 1, file=te if x == len(got) - 1 else tr)
