#!/usr/bin/env bash
# mf out of the box: `lacuna mf train` with no hyper-parameters (the search
# on 10% of TRAIN held out) against the defaults as they are (--no-search,
# without and with early stopping on TEST) and against the best over a grid
# that peeks at TEST, of lacuna's options and, when LIBMF_DIR holds LIBMF's
# mf-train, of LIBMF's (-k 40, -s THREADS, best iteration of 100 on TEST).
# Data, 80/20 random split (seed 7): the MovieLens-100k shape made by
# `lacuna mf gen` (943 x 1682, 100 K ratings, whole stars, noise 0.9: the
# defaults overfit it as they do the real file), seeds 1 and 2; the same on
# a 0-100 scale; MovieTweetings 20K (0-10) when DATA_DIR has it.
#   bench/mf_auto.sh LACUNA [OUT_DIR]      env: THREADS (2), LIBMF_DIR, DATA_DIR
set -u
tool=$(readlink -f "$1")
out=${2:-$(mktemp -d)}
threads=${THREADS:-2}
data_dir=${DATA_DIR:-}   # a folder holding movietweetings-20k/ratings.dat, or nothing
mkdir -p "$out" && cd "$out" || exit 1
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), threads $threads"

sets=()
for seed in 1 2; do
  "$tool" mf gen --users 943 --items 1682 --ratings 100000 --stars whole --noise 0.9 --seed $seed ml$seed.txt 2>/dev/null
  "$tool" mf split --fraction 0.2 --seed 7 ml$seed.txt ml${seed}_train.txt ml${seed}_test.txt >/dev/null 2>&1
  sets+=(ml$seed)
done
for f in train test; do awk '{print $1, $2, ($3 - 1) * 25}' ml1_$f.txt > ml1x25_$f.txt; done
sets+=(ml1x25)
mt=${data_dir:+$data_dir/movietweetings-20k/ratings.dat}
if [ -n "$mt" ] && [ -f "$mt" ]; then
  # dense integer ids for LIBMF (IMDb ids are 7 digits)
  awk -F'::' '{ if (!($1 in u)) u[$1] = nu++; if (!($2 in i)) i[$2] = ni++; print u[$1], i[$2], $3 }' "$mt" > mt.txt
  "$tool" mf split --fraction 0.2 --seed 7 mt.txt mt_train.txt mt_test.txt >/dev/null 2>&1
  sets+=(mt)
fi

rmse() { "$tool" mf predict --json "$1" "$2" | sed 's/.*"rmse":\([0-9.]*\).*/\1/'; }
printf "%-7s %-9s %-9s %-9s %-40s %-9s %-9s %-9s\n" data defaults def+stop auto "auto chose (search s, all s)" grid libmf_k40 libmf_best
for d in "${sets[@]}"; do
  tr=${d}_train.txt te=${d}_test.txt T="--threads $threads --quiet"
  "$tool" mf train $T --no-search $tr m.bin && d0=$(rmse m.bin $te)
  "$tool" mf train $T --no-search --valid $te $tr m.bin && d1=$(rmse m.bin $te)
  t0=$(date +%s.%N)
  j=$("$tool" mf train $T --json $tr m.bin)
  t1=$(date +%s.%N)
  a=$(rmse m.bin $te)
  chose=$(echo "$j" | sed 's/.*"search":{[^}]*"k":\([0-9]*\),"l2":\([0-9.e-]*\),"alpha":\([0-9.e-]*\),"epochs":\([0-9]*\).*"seconds":\([0-9.]*\)}.*/k \1 l2 \2 a \3 t \4 (\5/')
  chose="$chose, $(echo "$t1 - $t0" | bc | cut -c1-5))"
  best=999
  for k in 10 40 100; do for al in 0.05 0.1 0.2; do for l2 in 0.01 0.02 0.04 0.08 0.16 0.32; do
    "$tool" mf train $T --no-search -k $k --alpha $al --l2 $l2 -t 100 --valid $te $tr m.bin 2>/dev/null || continue
    r=$(rmse m.bin $te)
    best=$(echo "if ($r < $best) $r else $best" | bc -l)
  done; done; done
  l40=-; lbest=-
  if [ -n "${LIBMF_DIR:-}" ] && [ -x "$LIBMF_DIR/mf-train" ]; then
    lbest=999
    for k in 10 40 100; do for r in 0.05 0.1 0.2; do for l2 in 0.01 0.02 0.05 0.1 0.2; do
      v=$("$LIBMF_DIR/mf-train" -k $k -s $threads -r $r -l2 $l2 -t 100 -p $te $tr lm.model 2>/dev/null |
          awk 'NF >= 3 && $1 ~ /^[0-9]+$/ { if (b == "" || $3 < b) b = $3 } END { print b }')
      [ -n "$v" ] || continue
      case $v in *nan*|*inf*) continue ;; esac
      lbest=$(echo "if ($v < $lbest) $v else $lbest" | bc -l)
      if [ $k = 40 ]; then
        if [ "$l40" = - ]; then l40=$v; else l40=$(echo "if ($v < $l40) $v else $l40" | bc -l); fi
      fi
    done; done; done
  fi
  printf "%-7s %-9.4f %-9.4f %-9.4f %-40s %-9.4f %-9s %-9s\n" $d $d0 $d1 $a "$chose" $best $l40 $lbest
done
