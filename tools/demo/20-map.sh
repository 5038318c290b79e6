# map: T[R[i]] op= w[i] * S[i] on shipped data.
#  1. the worked example of data/map-example (readings -> rooms, weighted mean);
#  2. per-vertex statistics of the ego-Facebook graph: the bridge is the list of
#     edge endpoints made from data/ego-facebook at demo time, so counting gives
#     the degrees, and mapping each endpoint's neighbour degree gives the mean
#     and largest degree of a person's friends (the friendship paradox).
set -euo pipefail
ex="$DATA/map-example"
edges="$DATA/ego-facebook/facebook_combined.txt"

echo "-- weighted mean reading per room (room 1 has no sensor: --empty nan)"
"$LACUNA" map --source "$ex/readings.npy" --bridge "$ex/rooms.npy" --weights "$ex/reliability.npy" \
  --op mean --empty nan --quiet

# Row 2e of the bridge is edge e's first endpoint, row 2e+1 its second, so each
# undirected edge counts once for each of its two vertices.
awk '{print $1; print $2}' "$edges" > "$WORK/endpoints.txt"
awk '{print 1; print 1}' "$edges" > "$WORK/ones.txt"
rows=$(wc -l < "$WORK/endpoints.txt")
echo
echo "-- ego-Facebook: $(wc -l < "$edges") edges, bridge of $rows endpoints"
"$LACUNA" map --source "$WORK/ones.txt" --bridge "$WORK/endpoints.txt" --op count --out "$WORK/degree.txt" --quiet

# Each endpoint row gets the degree of the vertex at the edge's other end.
awk 'NR == FNR { deg[FNR - 1] = $1; next } { print deg[$2]; print deg[$1] }' "$WORK/degree.txt" "$edges" \
  > "$WORK/neighbour_degree.txt"
"$LACUNA" map --source "$WORK/neighbour_degree.txt" --bridge "$WORK/endpoints.txt" --op mean \
  --out "$WORK/mean_friend_degree.txt" --quiet
"$LACUNA" map --source "$WORK/neighbour_degree.txt" --bridge "$WORK/endpoints.txt" --op max \
  --out "$WORK/max_friend_degree.txt" --quiet

paste "$WORK/degree.txt" "$WORK/mean_friend_degree.txt" "$WORK/max_friend_degree.txt" | awk '
  { n++; deg += $1; friends += $2; if ($2 > $1) fewer++
    if ($1 > top) { top = $1; who = NR - 1; topmean = $2 } }
  END {
    printf "vertices %d, degrees sum to %d (= 2 x edges)\n", n, deg
    printf "mean degree %.2f; mean degree of a person'\''s friends, averaged over people: %.2f\n", deg / n, friends / n
    printf "friendship paradox: %d of %d people (%.1f%%) have fewer friends than their friends have on average\n", fewer, n, 100 * fewer / n
    printf "best connected: vertex %d with %d friends, whose friends have %.1f on average\n", who, top, topmean }'
echo "degree, mean and largest friend degree of vertices 0-4:"
paste "$WORK/degree.txt" "$WORK/mean_friend_degree.txt" "$WORK/max_friend_degree.txt" |
  awk 'NR <= 5 { printf "  vertex %d: degree %d, friends'\'' mean %.2f, max %d\n", NR - 1, $1, $2, $3 }'

echo
echo "-- one plan (the bridge checked once), two sources; deterministic, timed (JSON):"
"$LACUNA" map --plan --bridge "$WORK/endpoints.txt" --source "$WORK/ones.txt" --source "$WORK/neighbour_degree.txt" \
  --out "$WORK/plan_degree.npy" --out "$WORK/plan_friend_degree_sum.npy" --repeat 5 --json --quiet
