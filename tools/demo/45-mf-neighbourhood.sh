# mf: the neighbourhood model (CULSH-MF) beside plain MF.
#  1. generated ratings with planted item neighbourhoods (item j in cluster
#     j mod 40, a per-user effect on each cluster beyond the rank-10 signal);
#  2. the items' top-32 neighbours by exact GSM and by simLSH (recall against
#     the exact lists);
#  3. plain MF and the neighbourhood model with the same 8 factors, early
#     stopping on the same held-out ratings.
set -euo pipefail
cd "$WORK"
"$LACUNA" mf gen --users 3000 --items 600 --ratings 150000 --clusters 40 --seed 2 nratings.txt 2>&1
"$LACUNA" mf split --fraction 0.1 --seed 3 nratings.txt ntrain.txt ntest.txt 2>&1
echo
echo "-- neighbours: exact GSM (shrunk Pearson), then simLSH (p = 3, q = 100) and its recall"
"$LACUNA" mf neighbours --method gsm -K 32 ntrain.txt nbr_gsm.txt
"$LACUNA" mf neighbours --method simlsh -K 32 --recall ntrain.txt nbr_simlsh.txt
echo "   nbr_gsm.txt, first item: $(head -1 nbr_gsm.txt | cut -d' ' -f1-9) ..."
echo
echo "-- plain MF, k = 8"
"$LACUNA" mf train -k 8 -t 200 -v ntest.txt ntrain.txt plain.bin
echo "-- neighbourhood model, k = 8, K = 32 GSM neighbours (the paper's Table 5 rates)"
"$LACUNA" mf train --model neighbourhood --neighbours gsm -K 32 -k 8 -t 200 -v ntest.txt ntrain.txt nbr.bin
echo "-- neighbourhood model, k = 8, K = 32 simLSH neighbours"
"$LACUNA" mf train --model neighbourhood --neighbours simlsh -K 32 -k 8 -t 200 -v ntest.txt ntrain.txt nbr_lsh.bin
echo
echo "-- predict with the neighbourhood model"
"$LACUNA" mf predict nbr.bin ntest.txt
