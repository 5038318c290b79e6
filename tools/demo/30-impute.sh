# impute: the paper's experiment in small on the shipped ego-Facebook graph.
#  1. gen: a 4039 x 20 x 20 graph-tensor with rank-2 spectral slices, 80% of the
#     vertices observed (the others' slices are NaN); the graph Fourier basis
#     (eigendecomposition of the 4039 x 4039 Laplacian) is computed and cached;
#  2. run: fills the missing slices from the id list, with the basis from the
#     cache, and prints the error against the truth and the time.
set -euo pipefail
export LACUNA_CACHE_DIR="$WORK/cache"
graph="$DATA/ego-facebook/facebook_combined.txt"

echo "-- gen: 4039 x 20 x 20, rank 2, 80% of the vertices observed"
"$LACUNA" impute gen --graph "$graph" --m 20 --n 20 --rank 2 --observed-ratio 0.8 --seed 7 \
  --out "$WORK/x.npy" --truth "$WORK/z.npy" --observed "$WORK/observed.txt"

echo
echo "-- run: impute the missing 20% (JSON summary on stdout)"
"$LACUNA" impute run --graph "$graph" --tensor "$WORK/x.npy" --observed "$WORK/observed.txt" \
  --truth "$WORK/z.npy" --out "$WORK/y.npy" --log "$WORK/iterations.txt" --json
echo "per-iteration log: $(wc -l < "$WORK/iterations.txt") lines (iteration step lambda change rank seconds rmse_all rmse_missing)"
