#!/usr/bin/env bash
# bench/device.sh: everything the GPU machine checks and measures, in one go.
# Builds Lacuna with CUDA (Release), runs the CUDA tests (ctest -L cuda), runs
# each capability's GPU benchmarks beside the peers a user would otherwise pick,
# writes the long logs under $OUT and prints a short table last.
#
#   OUT=/some/dir bash bench/device.sh                 # everything
#   DEVICE_SECTIONS="build test" bash bench/device.sh  # a subset, in this order
#
# Every benchmark also appends a JSON line per figure to $OUT/figures.jsonl,
# and `lacuna report` makes $OUT/report.html of them at the end.
#
# Sections: build, test, sanitize (the CUDA tests under compute-sanitizer),
# map, mf, impute (more capabilities add a function section_X and
# their name to DEVICE_SECTIONS_ALL); named only, never by default: mfranks
# (mf over GPU ranks), multi (several GPUs) and ranks (every capability over
# CPU ranks, bench/mpi_scaling.sh). Knobs for the map section:
#   MAP_SWEEP=quick|full   quick: the 40M table only (default full)
#   MAP_EXPLORE=1          also time forced reduction strategies (tuning)
#   MAP_OOC_M=4G           rows of the out-of-core (pinned host memory) case; 0 skips it
#   MAP_PEERS=0            skip the peers; MAP_PLAN=0 skips the planned sweep
#   MAP_MULTI=0,0          also time the map on --device cuda:0,0 (the given ids) beside
#                          cuda:0, host and device arrays (several GPUs in one process;
#                          on one device this measures the split's overhead); MAP_MULTI_M rows
#   DEVICE_TEST_FILTER=re  sections test and sanitize run only the CUDA tests whose names match
#   DEVICE_TEST_VERBOSE=1  section test prints every test's output (ctest -V), passing ones too
#   DEVICE_BUILD_TARGETS="lacuna map_bench ..."  section build makes only these targets
# Peers come from a git-ignored folder carried beside the repo (PEERS, default
# .peers/): seed_map_naive.cu (naive atomicAdd kernel); the PyTorch peer is
# bench/torch_map_peer.py. When the machine lacks OpenBLAS/LAPACKE or pkg-config,
# Debian packages carried in build-debs/*.deb are unpacked into a private prefix;
# so is Open MPI from build-debs/mpi/*.deb when the machine has no mpirun.
set -u -o pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-$PWD/build-device-out}
BUILD=${BUILD:-$PWD/build-device}
PEERS=${PEERS:-$PWD/.peers}
JOBS=${JOBS:-$(nproc)}
DEVICE_SECTIONS_ALL="build test sanitize map"
DEVICE_SECTIONS=${DEVICE_SECTIONS:-$DEVICE_SECTIONS_ALL}
MAP_SWEEP=${MAP_SWEEP:-full}
MAP_EXPLORE=${MAP_EXPLORE:-0}
MAP_OOC_M=${MAP_OOC_M:-4G}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT" "$BUILD"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
CMAKE_EXTRA=()

say() { echo "[device.sh $(date -u +%H:%M:%S)] $*" | tee -a "$SUMMARY"; }

# ---------------------------------------------------------------------------
# Machine facts and build dependencies
# ---------------------------------------------------------------------------
machine_facts() {
    {
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
        nvcc --version 2>&1 | tail -1
        cmake --version 2>&1 | head -1
        "$PYTHON" -c 'import torch; print("torch", torch.__version__)' 2>&1
        nproc
        free -g | head -2
    } >>"$SUMMARY" 2>&1
    say "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
}

# OpenBLAS + LAPACKE + pkg-config from carried .deb files into a private
# prefix, when the machine has none (no package registry can be reached there).
ensure_cpu_deps() {
    if command -v pkg-config >/dev/null && pkg-config --exists openblas 2>/dev/null &&
        { [ -e /usr/include/lapacke.h ] || [ -e /usr/include/x86_64-linux-gnu/lapacke.h ]; }; then
        return 0
    fi
    local debs=(build-debs/*.deb)
    if [ ! -e "${debs[0]}" ]; then
        say "OpenBLAS/LAPACKE/pkg-config missing and no build-debs/*.deb carried: the build will fail"
        return 1
    fi
    local root="$PWD/build-debs/root"
    rm -rf "$root" && mkdir -p "$root/bin" "$root/pc"
    for f in "${debs[@]}"; do dpkg -x "$f" "$root"; done
    local lib="$root/usr/lib/x86_64-linux-gnu"
    sed "s#/usr/#$root/usr/#g" "$lib/openblas-pthread/pkgconfig/openblas.pc" >"$root/pc/openblas.pc"
    export PKG_CONFIG_PATH="$root/pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    export LD_LIBRARY_PATH="$lib/openblas-pthread:$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    if ! command -v pkg-config >/dev/null; then
        printf '#!/bin/sh\nexec "%s" "$@"\n' "$root/usr/bin/pkgconf" >"$root/bin/pkg-config"
        chmod +x "$root/bin/pkg-config"
        export PATH="$root/bin:$PATH"
    fi
    CMAKE_EXTRA+=("-DLAPACKE_LIB=$lib/liblapacke.so" "-DLAPACKE_INCLUDE=$root/usr/include")
    say "using carried OpenBLAS/LAPACKE from build-debs (private prefix)"
}

# Open MPI from carried .deb files (build-debs/mpi/*.deb) into a private
# prefix, when the machine has no mpirun, so that the build has src/dist and
# the CUDA tests run GPU ranks (tests/cuda/cli_mpi_cuda.sh). Open MPI finds its
# components and help files under OPAL_PREFIX. Without the .debs the build is
# one process and that test skips.
ensure_mpi() {
    command -v mpirun >/dev/null && return 0
    local debs=(build-debs/mpi/*.deb)
    [ -e "${debs[0]}" ] || { say "no mpirun and no build-debs/mpi/*.deb: built without MPI"; return 0; }
    local root="$PWD/build-debs/mpi/root"
    rm -rf "$root" && mkdir -p "$root"
    for f in "${debs[@]}"; do dpkg -x "$f" "$root"; done
    local bin="$root/usr/bin" lib="$root/usr/lib/x86_64-linux-gnu"
    # Debian names these through update-alternatives, which a private prefix lacks.
    ln -sfn mpicc.openmpi "$bin/mpicc" && ln -sfn mpirun.openmpi "$bin/mpirun" && ln -sfn mpiexec.openmpi "$bin/mpiexec"
    export OPAL_PREFIX="$root/usr" OPAL_SYSCONFDIR="$root/etc/openmpi" PATH="$bin:$PATH"
    export LD_LIBRARY_PATH="$lib/openmpi/lib:$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    CMAKE_EXTRA+=("-DMPI_C_COMPILER=$bin/mpicc")
    say "using carried Open MPI from build-debs/mpi (private prefix): $(mpirun --version 2>&1 | head -1)"
}

# ---------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------
section_build() {
    ensure_cpu_deps
    say "build: cmake Release with CUDA (sm_90), -j$JOBS"
    if ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLACUNA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        "${CMAKE_EXTRA[@]}" && cmake --build "$BUILD" -j "$JOBS" ${DEVICE_BUILD_TARGETS:+--target $DEVICE_BUILD_TARGETS}; } >"$OUT/build.log" 2>&1; then
        say "build FAILED (tail of build.log follows)"
        tail -30 "$OUT/build.log"
        return 1
    fi
    grep -q "LACUNA_HAVE_CUDA:INTERNAL=ON\|LACUNA_HAVE_CUDA" "$BUILD/CMakeCache.txt" || true
    say "build ok"
}

section_test() {
    say "test: ctest -L cuda"
    (cd "$BUILD" && ctest -L cuda ${DEVICE_TEST_FILTER:+-R "$DEVICE_TEST_FILTER"} ${DEVICE_TEST_VERBOSE:+-V} \
        --output-on-failure --timeout 500) \
        >"$OUT/test.log" 2>&1
    local rc=$?
    grep -E "tests passed|tests failed|passed, .* failed|FAIL" "$OUT/test.log" | head -20 | tee -a "$SUMMARY"
    [ $rc -eq 0 ] && say "cuda tests ok" || say "cuda tests FAILED (rc $rc; see test.log)"
}

# The CUDA tests under compute-sanitizer: every test under memcheck first,
# then racecheck (10-100x slower: each run is bounded by SANITIZE_TIMEOUT
# seconds, default 240; a run cut there is reported as such, not as a pass).
# Zero reports is the pass. Machines whose runtime refuses the tool ("Device
# not supported", seen under gVisor) say so and the section is skipped.
# Under the tools in SANITIZE_QUICK the tests run their representative subset
# (LACUNA_TEST_QUICK=1: every kernel path on fewer combinations and rows;
# the whole map test needs more than 9 minutes under racecheck).
#   SANITIZE_TOOLS="memcheck racecheck" (default)
#   SANITIZE_QUICK="racecheck" (default; "" runs every test whole)
section_sanitize() {
    if ! command -v compute-sanitizer >/dev/null; then
        say "sanitize: no compute-sanitizer on this machine: skipped"
        return 0
    fi
    : >"$OUT/sanitize.log"
    local t tool rc any=0 quick subset
    for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
        quick=0 subset=""
        case " ${SANITIZE_QUICK-racecheck} " in *" $tool "*) quick=1 subset=" (LACUNA_TEST_QUICK subset)" ;; esac
        for t in "$BUILD"/tests/cuda_test_*; do
            [ -x "$t" ] || continue
            [ -n "${DEVICE_TEST_FILTER:-}" ] && ! [[ "$(basename "$t")" =~ $DEVICE_TEST_FILTER ]] && continue
            (cd "$BUILD/tests" && LACUNA_TEST_TMPDIR="$BUILD/tests" LACUNA_SOURCE_DIR="$PWD/.." LACUNA_TEST_QUICK=$quick \
                timeout "${SANITIZE_TIMEOUT:-240}" compute-sanitizer --tool "$tool" --error-exitcode 86 \
                --leak-check no "$t") >>"$OUT/sanitize.log" 2>&1
            rc=$?
            if grep -q "Device not supported\|Unable to find injection library" "$OUT/sanitize.log"; then
                say "sanitize: compute-sanitizer cannot instrument this machine's device: skipped (see sanitize.log)"
                return 0
            fi
            case $rc in
            0) say "sanitize: $(basename "$t") under $tool$subset: 0 errors" ;;
            124) say "sanitize: $(basename "$t") under $tool$subset: cut at ${SANITIZE_TIMEOUT:-240} s (no verdict)" ;;
            *) say "sanitize: $(basename "$t") under $tool$subset FAILED (rc $rc; see sanitize.log)"; any=1 ;;
            esac
        done
    done
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitize.log" | sort | uniq -c | tee -a "$SUMMARY"
    return $any
}

# One map_bench run; extra JSON key/values (e.g. strategy) are prepended to each line.
map_bench_run() {
    local tag="$1"
    shift
    say "map_bench $* ${tag:+[$tag]}"
    local figures=()
    [ -z "$tag" ] && figures=(--figures "$FIGURES")   # forced strategies are tuning, not figures
    "$BUILD/bench/map_bench" --device cuda --json --check "${figures[@]}" "$@" 2>>"$OUT/map_bench.log" |
        if [ -n "$tag" ]; then sed "s/^{/{$tag,/"; else cat; fi >>"$OUT/map.jsonl"
}

section_map() {
    : >"$OUT/map.jsonl"
    : >"$OUT/map_bench.log"
    : >"$OUT/peers.jsonl"
    local ns="10k,20k,100k,500k,1M"
    # Fixed cost of one call (launches + the status read-back): a tiny map.
    map_bench_run "" -m 1k -n 10k --dist uniform -w 5 -r 50 --mode atomic,async
    # The issue's headline sweep: the one-shot call, queued stream-ordered
    # calls (lac_map_cuda_async) and, unless MAP_PLAN=0, a plan with its
    # determinism on and off (plan, plan-fast), side by side on the same data.
    if [ "${MAP_PLAN:-1}" != 0 ]; then
        map_bench_run "" -m 40M -n "$ns" --dist uniform,zipf -w 3 -r 20 --mode atomic,async,plan,plan-fast
    else
        map_bench_run "" -m 40M -n "$ns" --dist uniform,zipf -w 3 -r 20 --mode atomic,async
    fi
    # The paths the few-target ones replaced, same run: the general privatised
    # kernel (LACUNA_MAP_CUDA_FEW=0) and the sorted plan (LACUNA_MAP_CUDA_PLAN=sorted).
    LACUNA_MAP_CUDA_FEW=0 map_bench_run "\"strategy\":\"general-kernel\"" -m 40M -n 10k,20k --dist uniform,zipf -w 3 -r 20
    [ "${MAP_PLAN:-1}" != 0 ] && LACUNA_MAP_CUDA_PLAN=sorted map_bench_run "\"strategy\":\"sorted-plan\"" \
        -m 40M -n 10k,20k --dist uniform,zipf -w 2 -r 10 --mode plan
    if [ "$MAP_SWEEP" = full ]; then
        map_bench_run "" -m 4M,400M -n 10k,500k --dist uniform -w 2 -r 10
        map_bench_run "" -m 40M -n 10k,500k --dist uniform -w 2 -r 10 --mode atomic,deterministic
        map_bench_run "" -m 40M -n 10k,500k --dist uniform -w 2 -r 10 --index int64 --mode atomic,plan-fast
        map_bench_run "" -m 40M -n 10k,500k --dist uniform -w 2 -r 10 --dtype float64 --mode atomic,plan-fast
        map_bench_run "" -m 40M -n 10k,500k --dist uniform -w 2 -r 10 --weights --op mean --mode atomic,async
        map_bench_run "" -m 10M -n 100k --dist uniform -w 2 -r 10 --cols 4
    fi
    if [ "$MAP_EXPLORE" = 1 ]; then
        # Few targets: private copies per block and privatised blocks per SM.
        for c in 1 2 4 8; do
            for p in 1 2; do
                LACUNA_MAP_CUDA_COPIES=$c LACUNA_MAP_CUDA_PER_SM=$p \
                    map_bench_run "\"strategy\":\"copies$c-persm$p\"" -m 40M -n 10k,20k --dist uniform,zipf -w 2 -r 10
            done
        done
        # Many targets: global atomics against distributed shared memory.
        for s in global cluster2 cluster4 cluster8 cluster16; do
            LACUNA_MAP_CUDA_STRATEGY=$s map_bench_run "\"strategy\":\"$s\"" -m 40M -n 100k,500k,1M --dist uniform -w 2 -r 10
        done
        LACUNA_MAP_CUDA_STRATEGY=global map_bench_run "\"strategy\":\"global\"" -m 40M -n 500k --dist zipf -w 2 -r 5
        # The range-partitioned many-target kernel (opt-in), with its phase times.
        LACUNA_LOG=info LACUNA_MAP_CUDA_PART=profile map_bench_run "\"strategy\":\"partitioned\"" \
            -m 40M -n 100k,500k,1M --dist uniform,zipf -w 1 -r 5
    fi
    if [ -n "${MAP_MULTI:-}" ]; then
        # Several devices in one process: host arrays split by rows, device
        # arrays on the first device; the same data on cuda:0 beside it.
        local mm=${MAP_MULTI_M:-100M,400M}
        for dev in "cuda:0" "cuda:$MAP_MULTI"; do
            map_bench_run "\"strategy\":\"multi\"" -m "$mm" -n 10k,500k --dist uniform -w 1 -r 5 --host-memory --device "$dev"
            map_bench_run "\"strategy\":\"multi\"" -m 40M -n 10k,500k --dist uniform -w 2 -r 10 --device "$dev"
        done
    fi
    if [ "$MAP_OOC_M" != 0 ]; then
        map_bench_run "" -m "$MAP_OOC_M" -n 500k --dist uniform -w 1 -r 3 --host-memory
    fi

    # Peers, same machine, same run.
    if [ "${MAP_PEERS:-1}" = 0 ]; then
        say "peers skipped (MAP_PEERS=0)"
    elif [ -f "$PEERS/seed_map_naive.cu" ]; then
        say "naive atomicAdd peer (seed_map_naive.cu)"
        if nvcc -O3 -arch=sm_90 -o "$BUILD/seed_map_naive" "$PEERS/seed_map_naive.cu" >>"$OUT/map_bench.log" 2>&1; then
            "$BUILD/seed_map_naive" >>"$OUT/peers.jsonl" 2>>"$OUT/map_bench.log"
        else
            say "naive peer did not build"
        fi
    else
        say "no $PEERS/seed_map_naive.cu: naive peer skipped"
    fi
    if [ "${MAP_PEERS:-1}" != 0 ]; then
        say "PyTorch index_add_ peer"
        PYTHONUNBUFFERED=1 "$PYTHON" bench/torch_map_peer.py -m 40M -n "$ns" --dist uniform,zipf >>"$OUT/peers.jsonl" 2>>"$OUT/map_bench.log"
    fi
    if [ "$MAP_SWEEP" = full ] && [ "${MAP_PEERS:-1}" != 0 ]; then
        PYTHONUNBUFFERED=1 "$PYTHON" bench/torch_map_peer.py -m 4M,400M -n 10k,500k --dist uniform -w 2 -r 10 \
            >>"$OUT/peers.jsonl" 2>>"$OUT/map_bench.log"
    fi
    "$PYTHON" bench/compare.py "$OUT/map.jsonl" "$OUT/peers.jsonl" >"$OUT/map_table.txt"
}

# mf (added by the mf capability): CUSGD++ timed by bench/mf_bench on the
# MovieLens-10M and Netflix shapes at F = 32 and 128 (MF_EPOCHS epochs, default
# 100; the peer is Lacuna's CPU path on every host core, MF_PEER_EPOCHS
# epochs; the kernel's schedule, logged at info level, goes to mf_bench.log;
# MF_SHAPES, default "ml10m netflix", "" for none). On the ML-10M shape also an epoch of
# implicit feedback beside the explicit one (--implicit; MF_IMPLICIT_AS, e.g.
# "4:1,4:4": cross-entropy's negatives:negative_share settings to time), and
# beside it the variants of MF_INBATCH (mf_bench --inbatch's settings,
# LACUNA_MF_CUDA_INBATCH; default "-1,0:0:1:0": drawn negatives, and
# in-batch ones unweighted; the default epoch is in-batch, weighted). Its CUDA tests
# (tests/cuda/test_mf_cuda.c, test_mf_implicit_cuda.c) run in section test.
section_mf() {
    local e=${MF_EPOCHS:-100} p=${MF_PEER_EPOCHS:-2}
    : >"$OUT/mf.txt"
    for shape in ${MF_SHAPES-ml10m netflix}; do
        say "mf_bench --device cuda --shape $shape -k 32,128 --epochs $e"
        LACUNA_LOG=info "$BUILD/bench/mf_bench" --device cuda --shape "$shape" -k 32,128 --epochs "$e" --peer-epochs "$p" \
            --figures "$FIGURES" $([ "$shape" = ml10m ] && echo --implicit ${MF_IMPLICIT_AS:+--implicit-as $MF_IMPLICIT_AS} --inbatch "${MF_INBATCH:--1,0:0:1:0}") \
            >>"$OUT/mf.txt" 2>>"$OUT/mf_bench.log" || say "mf_bench $shape FAILED (see mf_bench.log)"
    done
    # MF_SPLIT (e.g. "cuda:0,0 cuda:0,0,0"): the ML-10M shape also on those
    # contexts beside cuda, MF_SPLIT_EPOCHS epochs (default 20), no peer: the
    # block rotation's cost; shares of one device bring no speed-up.
    if [ -n "${MF_SPLIT:-}" ]; then
        for dev in cuda $MF_SPLIT; do
            say "mf_bench --device $dev --shape ml10m -k 32,128 --epochs ${MF_SPLIT_EPOCHS:-20}"
            LACUNA_LOG=info "$BUILD/bench/mf_bench" --device "$dev" --shape ml10m -k 32,128 \
                --epochs "${MF_SPLIT_EPOCHS:-20}" --peer-epochs 0 >>"$OUT/mf.txt" 2>>"$OUT/mf_bench.log" \
                || say "mf_bench $dev FAILED (see mf_bench.log)"
        done
    fi
    cat "$OUT/mf.txt" | tee -a "$SUMMARY"
}
DEVICE_SECTIONS_ALL="$DEVICE_SECTIONS_ALL mf"

# nbr (the neighbourhood model, CULSH-MF): bench/nbr_bench --device cuda on
# the MovieLens-10M shape: the searches (exact GSM, then NBR_METHODS, with
# recall against GSM) and the training at k = 32 (plain MF, then the
# neighbourhood model with the neighbours of NBR_TRAIN, early stopping, at
# most NBR_EPOCHS epochs). The peer is the same run on every host core
# (--device cpu; NBR_CPU=0 skips it, NBR_CPU_TRAIN its training methods).
# PyTorch's peer (.peers/torch_mf_peer.py) trains plain MF with SparseAdam:
# not the same model, so it is not run here.
section_nbr() {
    local m=${NBR_METHODS:-simlsh,random} t=${NBR_TRAIN:-gsm,simlsh} e=${NBR_EPOCHS:-40}
    : >"$OUT/nbr.txt"
    say "nbr_bench --device cuda --methods $m --train-methods $t --epochs $e"
    LACUNA_LOG=info "$BUILD/bench/nbr_bench" --device cuda --methods "$m" --train-methods "$t" --epochs "$e" \
        --figures "$FIGURES" >>"$OUT/nbr.txt" 2>>"$OUT/nbr_bench.log" || say "nbr_bench cuda FAILED (see nbr_bench.log)"
    if [ "${NBR_CPU:-1}" != 0 ]; then
        say "nbr_bench --device cpu (peer, $(nproc) threads)"
        "$BUILD/bench/nbr_bench" --device cpu --methods "$m" --train-methods "${NBR_CPU_TRAIN:-gsm}" --epochs "$e" \
            --figures "$FIGURES" >>"$OUT/nbr.txt" 2>>"$OUT/nbr_bench.log" || say "nbr_bench cpu FAILED (see nbr_bench.log)"
    fi
    cat "$OUT/nbr.txt" | tee -a "$SUMMARY"
}
DEVICE_SECTIONS_ALL="$DEVICE_SECTIONS_ALL nbr"

# impute (added by "impute on GPUs"): bench/impute_cuda_bench (the batched SVT
# alone, one iteration by phase, the ego-Facebook protocol) and, beside it,
# bench/torch_impute_peer.py (batched SVD, gesvda, the Gram eigh route, the
# GFT GEMM, a 4039-vertex eigh). Its CUDA tests run in section test.
#   IMPUTE_SHAPES=50x50x4039,...   IMPUTE_RATIOS=0.5,0.9   IMPUTE_PEERS=0 skips PyTorch
#   IMPUTE_BENCH_ARGS="--cap 400M --stream-only"   more options for impute_cuda_bench
section_impute() {
    local shapes=${IMPUTE_SHAPES:-50x50x4039,64x64x2100,128x128x2000,512x512x300}
    : >"$OUT/impute.txt"
    say "impute_cuda_bench --shapes $shapes"
    # shellcheck disable=SC2086 # IMPUTE_BENCH_ARGS is a list of options
    "$BUILD/bench/impute_cuda_bench" --json --shapes "$shapes" --ratios "${IMPUTE_RATIOS:-0.5,0.9}" ${IMPUTE_BENCH_ARGS:-} \
        >>"$OUT/impute.txt" 2>>"$OUT/impute_bench.log" || say "impute_cuda_bench FAILED (see impute_bench.log)"
    if [ "${IMPUTE_PEERS:-1}" != 0 ]; then
        say "PyTorch peers (torch_impute_peer.py)"
        PYTHONUNBUFFERED=1 "$PYTHON" bench/torch_impute_peer.py --reps 1 --shapes "$shapes" >>"$OUT/impute.txt" \
            2>>"$OUT/impute_bench.log" || say "torch peer FAILED"
    fi
    grep -v '^{' "$OUT/impute.txt" | tee -a "$SUMMARY"
    grep '"peer"' "$OUT/impute.txt" | tee -a "$SUMMARY"
    "$PYTHON" bench/impute_table.py "$OUT/impute.txt" >"$OUT/impute_table.txt" 2>&1   # against the targets
    return 0   # no peer line (IMPUTE_PEERS=0) is no failure
}
DEVICE_SECTIONS_ALL="$DEVICE_SECTIONS_ALL impute"
printenv DEVICE_SECTIONS >/dev/null || DEVICE_SECTIONS=$DEVICE_SECTIONS_ALL

# mfranks: mf over GPU ranks on the ML-10M shape (bench/mpi_mf_cuda_rounds.sh:
# one GPU process, `mpirun -np 2` with the first epochs' user slices and with
# whole blocks, both models, epoch by epoch). Not in the default list.
#   MF_RANKS_BEFORE=DIR   also a tree at DIR (e.g. main before a change), its
#                         slices only, for the same runs side by side; section
#                         mfranksbefore, put before (e.g. "build mfranksbefore
#                         test mfranks"), builds it in DIR/build-before (target
#                         lacuna_tool) in the background, so that the sections
#                         between overlap the build and the timed runs do not
#   MF_RANKS_EPOCHS=6     MF_RANKS_MODELS="plain neighbourhood"
MF_RANKS_PID=
section_mfranksbefore() {
    local before=${MF_RANKS_BEFORE:?MF_RANKS_BEFORE names the tree}
    say "mfranks: building $before (target lacuna_tool) in the background"
    (cmake -S "$before" -B "$before/build-before" -DCMAKE_BUILD_TYPE=Release -DLACUNA_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES=90 "${CMAKE_EXTRA[@]}" && cmake --build "$before/build-before" -j "$JOBS" \
        --target lacuna_tool) >"$OUT/mfranks_before_build.log" 2>&1 &
    MF_RANKS_PID=$!
}
section_mfranks() {
    local data before=${MF_RANKS_BEFORE:-}
    data=$(mktemp -d)
    local e=${MF_RANKS_EPOCHS:-6} m=${MF_RANKS_MODELS:-plain neighbourhood}
    : >"$OUT/mfranks.txt"
    GEN_ONLY=1 bash bench/mpi_mf_cuda_rounds.sh "$BUILD/lacuna" "$data"
    if [ -n "$MF_RANKS_PID" ] && ! wait "$MF_RANKS_PID"; then
        say "mfranks: $before did not build (mfranks_before_build.log)"
        before=
    fi
    say "mfranks: bench/mpi_mf_cuda_rounds.sh on the ML-10M shape"
    EPOCHS=$e MODELS=$m bash bench/mpi_mf_cuda_rounds.sh "$BUILD/lacuna" "$data" >>"$OUT/mfranks.txt" 2>&1
    if [ -n "$before" ] && [ -x "$before/build-before/lacuna" ]; then
        echo "# the tree at $before" >>"$OUT/mfranks.txt"
        EPOCHS=$e MODELS=$m CONFIGS=slices bash bench/mpi_mf_cuda_rounds.sh "$before/build-before/lacuna" "$data" \
            >>"$OUT/mfranks.txt" 2>&1
    fi
    rm -rf "$data"
    cat "$OUT/mfranks.txt" | tee -a "$SUMMARY"
}

# ranks: every capability over CPU ranks of this host (bench/mpi_scaling.sh:
# mpirun -np 1/2/4/8 of one thread each against one process of as many
# threads), for the scaling model's CPU points (docs/scaling.md). Needs the
# CPU build's MPI (section build). Not in the default list.
#   RANKS_NPS="1 2 4 8"
section_ranks() {
    say "ranks: bench/mpi_scaling.sh over $(nproc) CPU threads, -np ${RANKS_NPS:-1 2 4 8}"
    NPS=${RANKS_NPS:-1 2 4 8} bash bench/mpi_scaling.sh "$BUILD/lacuna" >"$OUT/ranks.txt" 2>"$OUT/ranks.log" ||
        say "mpi_scaling.sh FAILED (ranks.log)"
    tee -a "$SUMMARY" <"$OUT/ranks.txt"
    return 0
}

# multi (issue "Multi-GPU runs"), on a machine of several GPUs: each
# capability on one GPU and on all of them in the same run, beside the NCCL
# all-reduce bandwidth as the ceiling for exchanges (bench/nccl_allreduce.cu;
# NCCL's NVLink multicast off, NCCL_NVLS_ENABLE=0). Not in the default list.
#   MULTI_MAP_M=1000M (rows from pinned host memory, 500k targets)
#   MULTI_IMPUTE_SHAPES=128x128x2000,512x512x2000   MULTI_MF_SHAPES="netflix"
section_multi() {
    local d all
    d=$(nvidia-smi -L | wc -l)
    all=$(seq -s, 0 $((d - 1)))
    : >"$OUT/multi.txt"
    : >"$OUT/multi.log"
    say "multi: $d GPUs (cuda:$all)"
    nvidia-smi topo -m >>"$OUT/multi.log" 2>&1
    export NCCL_NVLS_ENABLE=0
    if nvcc -O2 -arch=sm_90 -o "$BUILD/nccl_allreduce" bench/nccl_allreduce.cu -lnccl >>"$OUT/multi.log" 2>&1; then
        "$BUILD/nccl_allreduce" >>"$OUT/multi.txt" 2>>"$OUT/multi.log" || say "nccl_allreduce FAILED"
    else
        say "nccl_allreduce did not build (no NCCL here?)"
    fi
    for dev in cuda:0 "cuda:$all"; do
        say "map_bench --device $dev -m ${MULTI_MAP_M:-1000M} -n 500k --host-memory"
        "$BUILD/bench/map_bench" --device "$dev" --json --check -m "${MULTI_MAP_M:-1000M}" -n 500k --dist uniform -w 1 -r 3 \
            --host-memory >>"$OUT/multi.txt" 2>>"$OUT/multi.log" || say "map_bench $dev FAILED"
    done
    say "impute_cuda_bench --devices $all --split-only"
    "$BUILD/bench/impute_cuda_bench" --json --devices "$all" --split-only --iters 3 \
        --shapes "${MULTI_IMPUTE_SHAPES:-128x128x2000,512x512x2000}" >>"$OUT/multi.txt" 2>>"$OUT/multi.log" ||
        say "impute_cuda_bench FAILED"
    for shape in ${MULTI_MF_SHAPES:-netflix}; do
        for dev in cuda "cuda:$all"; do
            say "mf_bench --device $dev --shape $shape -k 32,128"
            "$BUILD/bench/mf_bench" --device "$dev" --shape "$shape" -k 32,128 --epochs 20 --peer-epochs 0 \
                >>"$OUT/multi.txt" 2>>"$OUT/multi.log" || say "mf_bench $dev FAILED"
        done
    done
    grep -v '^{' "$OUT/multi.txt" | tee -a "$SUMMARY"
    grep '"nccl_allreduce"' "$OUT/multi.txt" | tee -a "$SUMMARY"
    return 0
}

# ---------------------------------------------------------------------------
machine_facts
ensure_mpi   # here, not in section build: section test's GPU ranks need its environment
FIGURES="$OUT/figures.jsonl"
: >"$FIGURES"
LACUNA_BENCH_MACHINE="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $(nproc) CPU threads"
export LACUNA_BENCH_MACHINE
for s in $DEVICE_SECTIONS; do
    if ! declare -F "section_$s" >/dev/null; then
        say "unknown section '$s' (known: $DEVICE_SECTIONS_ALL)"
        continue
    fi
    if ! "section_$s"; then
        say "section $s failed; stopping"
        break
    fi
done
if [ -s "$FIGURES" ] && [ -x "$BUILD/lacuna" ]; then
    "$BUILD/lacuna" report "$FIGURES" -o "$OUT/report.html" 2>&1 | tee -a "$SUMMARY"
fi
say "done; logs in $OUT"
# The short table last, for the reply's tail.
[ -f "$OUT/map_table.txt" ] && cat "$OUT/map_table.txt"
[ -f "$OUT/impute_table.txt" ] && cat "$OUT/impute_table.txt"
cat "$SUMMARY" | grep -E "FAIL|failed|ok|passed" | tail -8
