/* map_bench: times lac_map (T[R[i]] op= w[i] * S[i]) through the public API over
 * the report's table of sizes, and prints for each case the median time, the
 * floor (bytes that must move over the copy bandwidth measured in the same run),
 * GB/s, the floor ratio and, on the CPU, the ratios to two peers timed in the
 * same run: a serial loop (`for i: T[R[i]] += S[i]`) and numpy
 * (`np.bincount(R, weights=S, minlength=n)`, or `np.minimum.at`/`np.maximum.at`,
 * through /usr/bin/python3 on the same data).
 *
 * --mode takes a list (e.g. atomic,deterministic,plan): every mode runs on the
 * same data, interleaved run by run so that a busy machine slows them alike
 * (each round starting one mode later: a fixed order favoured the first mode
 * by a few percent), and each is also given as a ratio to the plain one-shot
 * call (atomic) and as the number of rounds in which it took at most the
 * one-shot call's time. With
 * --check a plan's T is also compared byte for byte with the deterministic
 * one-shot call's.
 *
 *   map_bench [-m 1M,4M,20M,40M,400M] [-n 10k,20k,100k,500k,1M]
 *             [--dist uniform,zipf] [-w 2] [-r 10] [--op sum] [--dtype float32]
 *             [--index int32|int64] [--cols b] [--weights]
 *             [--mode atomic,plan,plan-fast,deterministic,async] [--device cpu|cuda|cuda:N,M,...|auto]
 *             [--threads N] [--host-memory] [--check] [--json] [--no-serial] [--no-numpy]
 *
 * --device cuda uploads S, R (and w) to device arrays once and times lac_map on
 * them (lac_ctx_synchronize included); its floor uses the device-to-device
 * lac_memcpy bandwidth. --host-memory on a CUDA context keeps the arrays in
 * pinned host memory (lac_host_alloc_pinned) so that the backend streams them;
 * the floor then uses the host-to-device bandwidth. --json prints one JSON line
 * per case on stdout (the human table then goes to stderr).
 *
 * Data are fresh random values each run (S uniform in [-1, 1), R uniform or
 * Zipf(1.1) over the targets, hot targets scattered by a random permutation). */
#include "bench_util.h"
#include "core/random.h"
#include "lacuna/lacuna.h"
#ifdef LACUNA_BENCH_CUDA
#include "lacuna/lacuna_cuda.h"
#endif

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_LIST 16
#define MAX_MODES 5
#define PYTHON "/usr/bin/python3"
#define ZIPF_EXPONENT 1.1

typedef enum { MODE_ATOMIC, MODE_PLAN, MODE_DETERMINISTIC, MODE_PLAN_FAST, MODE_ASYNC } bench_mode;
typedef enum { DIST_UNIFORM, DIST_ZIPF } bench_dist;

typedef struct {
    int64_t sizes_m[MAX_LIST];
    int num_m;
    int64_t sizes_n[MAX_LIST];
    int num_n;
    bench_dist dists[2];
    int num_dists;
    int warmup, repeats;
    lac_map_op op;
    lac_dtype dtype, index_dtype;
    int64_t cols;
    bool weights;
    bench_mode modes[MAX_MODES];
    int num_modes;
    const char *device;
    int threads;
    bool host_memory;
    bool check;
    bool json;
    const char *figures;   /* --figures FILE: JSON lines for `lacuna report` */
    bool serial;
    bool numpy;
    uint64_t seed;
} bench_options;

typedef struct {
    int64_t m, n;
    bench_dist dist;
    bench_mode mode;
    bool skipped;
    char why[160];
    double median_ms, gbps, floor_ms, floor_ratio;
    double serial_ms, speedup;  /* NAN when not measured */
    double numpy_ms, numpy_speedup;
    double oneshot_ratio;       /* median / the one-shot (atomic) mode's; NAN without one */
    int rounds_under;           /* rounds in which this mode took at most the one-shot's time; -1 not compared */
    double relerr;              /* NAN when not checked */
    double plan_build_ms;       /* NAN unless mode plan */
    int same_bits;              /* plan vs deterministic T under --check: 1 same, 0 not, -1 not compared */
} bench_result;

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */
static double uniform01(uint64_t *state) { return (double)(lac_splitmix64(state) >> 11) * (1.0 / 9007199254740992.0); }

/* "40M" -> 40000000, "10k" -> 10000, "1G" -> 1e9, "123" -> 123. */
static bool parse_size(const char *text, int64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno || v < 0) return false;
    double scale = 1;
    if (*end == 'k' || *end == 'K') scale = 1e3, end++;
    else if (*end == 'm' || *end == 'M') scale = 1e6, end++;
    else if (*end == 'g' || *end == 'G') scale = 1e9, end++;
    if (*end) return false;
    *out = (int64_t)llround(v * scale);
    return true;
}

static bool parse_size_list(const char *text, int64_t *out, int *count)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", text);
    *count = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (*count == MAX_LIST || !parse_size(tok, &out[*count])) return false;
        (*count)++;
    }
    return *count > 0;
}

static void format_size(int64_t v, char *buf, size_t len)
{
    if (v >= 1000000000 && v % 1000000000 == 0) snprintf(buf, len, "%lldG", (long long)(v / 1000000000));
    else if (v >= 1000000 && v % 1000000 == 0) snprintf(buf, len, "%lldM", (long long)(v / 1000000));
    else if (v >= 1000 && v % 1000 == 0) snprintf(buf, len, "%lldk", (long long)(v / 1000));
    else snprintf(buf, len, "%lld", (long long)v);
}

static const char *mode_name(bench_mode m)
{
    return m == MODE_PLAN ? "plan" : m == MODE_DETERMINISTIC ? "deterministic" : m == MODE_PLAN_FAST ? "plan-fast"
           : m == MODE_ASYNC ? "async" : "atomic";
}

static const char *dist_name(bench_dist d) { return d == DIST_ZIPF ? "zipf" : "uniform"; }

static void usage(FILE *out)
{
    fprintf(out,
            "usage: map_bench [options]\n"
            "  -m LIST          source sizes, e.g. 40M or 1M,4M,20M,40M,400M (default)\n"
            "  -n LIST          target sizes, e.g. 500k or 10k,20k,100k,500k,1M (default)\n"
            "  --dist LIST      uniform, zipf or uniform,zipf (default; Zipf exponent 1.1)\n"
            "  -w N             warm-up runs (default 2)\n"
            "  -r N             timed runs; the median is reported (default 10)\n"
            "  --op OP          sum|mean|min|max|count (default sum)\n"
            "  --dtype T        float32|float64 values (default float32)\n"
            "  --index T        int32|int64 bridge (default int32)\n"
            "  --cols B         source columns sharing the bridge (default 1)\n"
            "  --weights        also pass a weight per source row\n"
            "  --mode LIST      atomic (plain lac_map), plan (lac_map_plan_execute; the\n"
            "                   build is timed apart), plan-fast (a plan with its determinism\n"
            "                   switched off), deterministic,\n"
            "                   async (CUDA: lac_map_cuda_async calls queued back to back on\n"
            "                   a stream, one synchronisation; the time per call), or a list\n"
            "                   of them run side by side on the same data (default atomic)\n"
            "  --device D       cpu|cuda|cuda:N,M,...|auto (default cpu)\n"
            "  --threads N      CPU threads (default: OpenMP's)\n"
            "  --host-memory    CUDA: keep S, R, w, T in pinned host memory (streamed)\n"
            "  --check          compare with a float64 serial reference (relerr)\n"
            "  --json           one JSON line per case on stdout; the table on stderr\n"
            "  --figures FILE   append a JSON line per figure to FILE (for lacuna report)\n"
            "  --no-serial      skip the serial loop peer (CPU)\n"
            "  --no-numpy       skip the numpy peer (CPU; needs " PYTHON " with numpy)\n"
            "  --seed N         random seed (default: from the clock)\n");
}

static int parse_options(int argc, char **argv, bench_options *o)
{
    memset(o, 0, sizeof *o);
    parse_size_list("1M,4M,20M,40M,400M", o->sizes_m, &o->num_m);
    parse_size_list("10k,20k,100k,500k,1M", o->sizes_n, &o->num_n);
    o->dists[0] = DIST_UNIFORM;
    o->dists[1] = DIST_ZIPF;
    o->num_dists = 2;
    o->warmup = 2;
    o->repeats = 10;
    o->op = LAC_MAP_SUM;
    o->dtype = LAC_FLOAT32;
    o->index_dtype = LAC_INT32;
    o->cols = 1;
    o->modes[0] = MODE_ATOMIC;
    o->num_modes = 1;
    o->device = "cpu";
    o->serial = true;
    o->numpy = true;
    o->seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE()                                                   \
    do {                                                               \
        if (!v) {                                                      \
            fprintf(stderr, "map_bench: %s needs a value\n", a);       \
            return 2;                                                  \
        }                                                              \
        i++;                                                           \
    } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "-m")) {
            NEED_VALUE();
            if (!parse_size_list(v, o->sizes_m, &o->num_m)) return fprintf(stderr, "map_bench: bad -m '%s'\n", v), 2;
        } else if (!strcmp(a, "-n")) {
            NEED_VALUE();
            if (!parse_size_list(v, o->sizes_n, &o->num_n)) return fprintf(stderr, "map_bench: bad -n '%s'\n", v), 2;
        } else if (!strcmp(a, "--dist")) {
            NEED_VALUE();
            if (!strcmp(v, "uniform")) o->dists[0] = DIST_UNIFORM, o->num_dists = 1;
            else if (!strcmp(v, "zipf")) o->dists[0] = DIST_ZIPF, o->num_dists = 1;
            else if (!strcmp(v, "uniform,zipf") || !strcmp(v, "both")) o->num_dists = 2;
            else return fprintf(stderr, "map_bench: bad --dist '%s' (uniform, zipf, uniform,zipf)\n", v), 2;
        } else if (!strcmp(a, "-w")) {
            NEED_VALUE();
            o->warmup = atoi(v);
            if (o->warmup < 0) return fprintf(stderr, "map_bench: bad -w\n"), 2;
        } else if (!strcmp(a, "-r")) {
            NEED_VALUE();
            o->repeats = atoi(v);
            if (o->repeats < 1) return fprintf(stderr, "map_bench: bad -r\n"), 2;
        } else if (!strcmp(a, "--op")) {
            NEED_VALUE();
            if (lac_map_op_parse(v, &o->op) != LAC_SUCCESS) return fprintf(stderr, "map_bench: bad --op '%s'\n", v), 2;
        } else if (!strcmp(a, "--dtype")) {
            NEED_VALUE();
            if (!strcmp(v, "float32")) o->dtype = LAC_FLOAT32;
            else if (!strcmp(v, "float64")) o->dtype = LAC_FLOAT64;
            else return fprintf(stderr, "map_bench: bad --dtype '%s'\n", v), 2;
        } else if (!strcmp(a, "--index")) {
            NEED_VALUE();
            if (!strcmp(v, "int32")) o->index_dtype = LAC_INT32;
            else if (!strcmp(v, "int64")) o->index_dtype = LAC_INT64;
            else return fprintf(stderr, "map_bench: bad --index '%s'\n", v), 2;
        } else if (!strcmp(a, "--cols")) {
            NEED_VALUE();
            if (!parse_size(v, &o->cols) || o->cols < 1) return fprintf(stderr, "map_bench: bad --cols\n"), 2;
        } else if (!strcmp(a, "--weights")) {
            o->weights = true;
        } else if (!strcmp(a, "--mode")) {
            NEED_VALUE();
            char buf[128];
            snprintf(buf, sizeof buf, "%s", v);
            o->num_modes = 0;
            for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
                bench_mode mode;
                if (!strcmp(tok, "atomic")) mode = MODE_ATOMIC;
                else if (!strcmp(tok, "plan")) mode = MODE_PLAN;
                else if (!strcmp(tok, "deterministic")) mode = MODE_DETERMINISTIC;
                else if (!strcmp(tok, "plan-fast")) mode = MODE_PLAN_FAST;
                else if (!strcmp(tok, "async")) mode = MODE_ASYNC;
                else return fprintf(stderr, "map_bench: bad --mode '%s'\n", v), 2;
                for (int k = 0; k < o->num_modes; k++)
                    if (o->modes[k] == mode) return fprintf(stderr, "map_bench: --mode '%s' repeats a mode\n", v), 2;
                o->modes[o->num_modes++] = mode;
            }
            if (o->num_modes == 0) return fprintf(stderr, "map_bench: bad --mode '%s'\n", v), 2;
        } else if (!strcmp(a, "--device")) {
            NEED_VALUE();
            o->device = v;
        } else if (!strcmp(a, "--threads")) {
            NEED_VALUE();
            o->threads = atoi(v);
            if (o->threads < 0) return fprintf(stderr, "map_bench: bad --threads\n"), 2;
        } else if (!strcmp(a, "--host-memory")) {
            o->host_memory = true;
        } else if (!strcmp(a, "--check")) {
            o->check = true;
        } else if (!strcmp(a, "--json")) {
            o->json = true;
        } else if (!strcmp(a, "--figures")) {
            NEED_VALUE();
            o->figures = v;
        } else if (!strcmp(a, "--no-serial")) {
            o->serial = false;
        } else if (!strcmp(a, "--no-numpy")) {
            o->numpy = false;
        } else if (!strcmp(a, "--seed")) {
            NEED_VALUE();
            o->seed = strtoull(v, NULL, 10);
        } else {
            fprintf(stderr, "map_bench: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
#undef NEED_VALUE
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Data                                                                      */
/* ------------------------------------------------------------------------ */
/* Walker/Vose alias table: O(1) draws from Zipf(s) over n ranks. */
typedef struct {
    double *prob;
    int64_t *alias;
    int64_t *target_of_rank;   /* random permutation: hot ranks land anywhere */
    int64_t n;
} zipf_table;

static bool zipf_build(zipf_table *z, int64_t n, double s, uint64_t seed)
{
    z->n = n;
    z->prob = malloc((size_t)n * sizeof *z->prob);
    z->alias = malloc((size_t)n * sizeof *z->alias);
    z->target_of_rank = malloc((size_t)n * sizeof *z->target_of_rank);
    int64_t *small = malloc((size_t)n * sizeof *small), *large = malloc((size_t)n * sizeof *large);
    if (!z->prob || !z->alias || !z->target_of_rank || !small || !large) {
        free(small), free(large);
        return false;
    }
    double total = 0;
    for (int64_t k = 0; k < n; k++) total += pow((double)(k + 1), -s);
    int64_t ns = 0, nl = 0;
    for (int64_t k = 0; k < n; k++) {
        z->prob[k] = pow((double)(k + 1), -s) / total * (double)n;
        z->alias[k] = k;
        if (z->prob[k] < 1.0) small[ns++] = k;
        else large[nl++] = k;
    }
    while (ns && nl) {
        int64_t lo = small[--ns], hi = large[nl - 1];
        z->alias[lo] = hi;
        z->prob[hi] -= 1.0 - z->prob[lo];
        if (z->prob[hi] < 1.0) {
            nl--;
            small[ns++] = hi;
        }
    }
    while (nl) z->prob[large[--nl]] = 1.0;
    while (ns) z->prob[small[--ns]] = 1.0;
    free(small);
    free(large);
    uint64_t st = seed;
    for (int64_t k = 0; k < n; k++) z->target_of_rank[k] = k;
    for (int64_t k = n - 1; k > 0; k--) {
        int64_t j = (int64_t)(lac_splitmix64(&st) % (uint64_t)(k + 1));
        int64_t t = z->target_of_rank[k];
        z->target_of_rank[k] = z->target_of_rank[j];
        z->target_of_rank[j] = t;
    }
    return true;
}

static void zipf_free(zipf_table *z)
{
    free(z->prob);
    free(z->alias);
    free(z->target_of_rank);
    memset(z, 0, sizeof *z);
}

/* Fills S (m x cols), R and w in parallel; each block of rows has its own
 * random stream so the data do not depend on the thread count. */
static void fill_data(void *S, lac_dtype dt, int64_t m, int64_t cols, void *R, lac_dtype it, int64_t n, void *w,
                      bench_dist dist, const zipf_table *z, uint64_t seed)
{
    const int64_t block = 1 << 16;
    int64_t blocks = (m + block - 1) / block;
#pragma omp parallel for schedule(static)
    for (int64_t bk = 0; bk < blocks; bk++) {
        uint64_t st = seed ^ (0xA24BAED4963EE407ull * (uint64_t)(bk + 1));
        int64_t hi = (bk + 1) * block < m ? (bk + 1) * block : m;
        for (int64_t i = bk * block; i < hi; i++) {
            int64_t r;
            if (dist == DIST_ZIPF) {
                int64_t k = (int64_t)(uniform01(&st) * (double)n);
                if (k >= n) k = n - 1;
                int64_t rank = uniform01(&st) < z->prob[k] ? k : z->alias[k];
                r = z->target_of_rank[rank];
            } else {
                r = (int64_t)(((lac_splitmix64(&st) >> 32) * (uint64_t)n) >> 32);
            }
            if (it == LAC_INT32) ((int32_t *)R)[i] = (int32_t)r;
            else ((int64_t *)R)[i] = r;
            for (int64_t c = 0; c < cols; c++) {
                double x = 2.0 * uniform01(&st) - 1.0;
                if (dt == LAC_FLOAT32) ((float *)S)[i * cols + c] = (float)x;
                else ((double *)S)[i * cols + c] = x;
            }
            if (w) {
                double x = 0.5 + uniform01(&st);
                if (dt == LAC_FLOAT32) ((float *)w)[i] = (float)x;
                else ((double *)w)[i] = x;
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Peers and reference                                                       */
/* ------------------------------------------------------------------------ */
static inline int64_t index_at(const void *R, lac_dtype it, int64_t i)
{
    return it == LAC_INT32 ? (int64_t)((const int32_t *)R)[i] : ((const int64_t *)R)[i];
}

static inline double value_at(const void *p, lac_dtype dt, int64_t k)
{
    return dt == LAC_FLOAT32 ? (double)((const float *)p)[k] : ((const double *)p)[k];
}

/* The serial loop a user would otherwise write: for i: T[R[i]] += S[i], in the
 * data's own types (the headline case has its own tight loop so that the peer
 * is not handicapped by generality). Other ops: the analogous loop. */
#define SERIAL_SUM_LOOP(VT, IT)                                                   \
    do {                                                                          \
        VT *t_ = (VT *)T;                                                         \
        const VT *s_ = (const VT *)S;                                             \
        const IT *r_ = (const IT *)R;                                             \
        memset(t_, 0, (size_t)n * sizeof(VT));                                    \
        for (int64_t i = 0; i < m; i++) t_[r_[i]] += s_[i];                       \
    } while (0)

static void serial_peer(const void *S, lac_dtype dt, int64_t m, int64_t cols, const void *R, lac_dtype it,
                        const void *w, lac_map_op op, int64_t n, void *T, double *counts)
{
    if (op == LAC_MAP_SUM && cols == 1 && !w) {
        if (dt == LAC_FLOAT32 && it == LAC_INT32) SERIAL_SUM_LOOP(float, int32_t);
        else if (dt == LAC_FLOAT32) SERIAL_SUM_LOOP(float, int64_t);
        else if (it == LAC_INT32) SERIAL_SUM_LOOP(double, int32_t);
        else SERIAL_SUM_LOOP(double, int64_t);
        return;
    }
    /* General peer in double, written back in the value type. */
    int64_t nt = n * cols;
    double *acc = (double *)counts;   /* caller gives 2 * n * cols doubles */
    double *cnt = acc + nt;
    double init = op == LAC_MAP_MIN ? INFINITY : op == LAC_MAP_MAX ? -INFINITY : 0.0;
    for (int64_t k = 0; k < nt; k++) acc[k] = init, cnt[k] = 0;
    for (int64_t i = 0; i < m; i++) {
        int64_t r = index_at(R, it, i);
        double wi = w ? value_at(w, dt, i) : 1.0;
        for (int64_t c = 0; c < cols; c++) {
            double x = wi * value_at(S, dt, i * cols + c);
            int64_t k = r * cols + c;
            switch (op) {
            case LAC_MAP_MIN: if (x < acc[k]) acc[k] = x; break;
            case LAC_MAP_MAX: if (x > acc[k]) acc[k] = x; break;
            case LAC_MAP_COUNT: acc[k] += wi; break;
            default: acc[k] += x; break;
            }
            cnt[k] += wi;
        }
    }
    for (int64_t k = 0; k < nt; k++) {
        double v = acc[k];
        if (op == LAC_MAP_MEAN) v = cnt[k] != 0 ? acc[k] / cnt[k] : 0.0;
        else if ((op == LAC_MAP_MIN || op == LAC_MAP_MAX) && cnt[k] == 0) v = 0.0;
        if (dt == LAC_FLOAT32) ((float *)T)[k] = (float)v;
        else ((double *)T)[k] = v;
    }
}

/* float64 reference with lac_map's semantics (empty targets get 0). */
static void reference_map(const void *S, lac_dtype dt, int64_t m, int64_t cols, const void *R, lac_dtype it,
                          const void *w, lac_map_op op, int64_t n, double *ref)
{
    int64_t nt = n * cols;
    double *cnt = calloc((size_t)nt, sizeof *cnt);
    double init = op == LAC_MAP_MIN ? INFINITY : op == LAC_MAP_MAX ? -INFINITY : 0.0;
    for (int64_t k = 0; k < nt; k++) ref[k] = init;
    for (int64_t i = 0; i < m; i++) {
        int64_t r = index_at(R, it, i);
        double wi = w ? value_at(w, dt, i) : 1.0;
        for (int64_t c = 0; c < cols; c++) {
            double x = wi * value_at(S, dt, i * cols + c);
            int64_t k = r * cols + c;
            if (op == LAC_MAP_MIN) ref[k] = x < ref[k] ? x : ref[k];
            else if (op == LAC_MAP_MAX) ref[k] = x > ref[k] ? x : ref[k];
            else if (op == LAC_MAP_COUNT) ref[k] += wi;
            else ref[k] += x;
            if (cnt) cnt[k] += wi;
        }
    }
    for (int64_t k = 0; k < nt; k++) {
        if (op == LAC_MAP_MEAN) ref[k] = cnt[k] != 0 ? ref[k] / cnt[k] : 0.0;
        else if ((op == LAC_MAP_MIN || op == LAC_MAP_MAX) && cnt[k] == 0) ref[k] = 0.0;
    }
    free(cnt);
}

/* max |T - ref| / max |ref| */
static double relative_error(const void *T, lac_dtype dt, const double *ref, int64_t count)
{
    double err = 0, scale = 0;
    for (int64_t k = 0; k < count; k++) {
        double d = fabs(value_at(T, dt, k) - ref[k]);
        if (!(d <= err)) err = d;   /* NaN counts as the worst */
        if (fabs(ref[k]) > scale) scale = fabs(ref[k]);
    }
    return scale > 0 ? err / scale : err;
}

/* The numpy peer: what a numpy user writes for the same map, on the same data
 * (written to files that numpy maps back), single-threaded as numpy is. Sums,
 * means and counts are np.bincount (float64, the fastest numpy has; np.add.at
 * is several times slower), one call a column; MIN/MAX are np.minimum.at /
 * np.maximum.at. The median of `repeats` runs after one warm-up, in ms; NAN
 * when python or numpy is missing. */
static const char numpy_script[] =
    "import sys, time, numpy as np\n"
    "d, m, n, cols, vt, it, wt, op, reps = sys.argv[1:10]\n"
    "m, n, cols, reps = int(m), int(n), int(cols), int(reps)\n"
    "S = np.fromfile(d + '/S', dtype=vt).reshape(m, cols)\n"
    "R = np.fromfile(d + '/R', dtype=it)\n"
    "w = np.fromfile(d + '/w', dtype=vt) if wt == '1' else None\n"
    "def run():\n"
    "    T = np.empty((n, cols), dtype=vt)\n"
    "    for c in range(cols):\n"
    "        x = S[:, c] if w is None else w * S[:, c]\n"
    "        if op == 'min' or op == 'max':\n"
    "            t = np.full(n, np.inf if op == 'min' else -np.inf, dtype=vt)\n"
    "            (np.minimum if op == 'min' else np.maximum).at(t, R, x)\n"
    "        elif op == 'count':\n"
    "            t = np.bincount(R, weights=w, minlength=n)\n"
    "        else:\n"
    "            t = np.bincount(R, weights=x, minlength=n)\n"
    "            if op == 'mean':\n"
    "                with np.errstate(invalid='ignore', divide='ignore'):\n"
    "                    t = t / np.bincount(R, weights=w, minlength=n)\n"
    "        T[:, c] = t\n"
    "    return T\n"
    "run()\n"
    "times = []\n"
    "for _ in range(reps):\n"
    "    t0 = time.perf_counter(); run(); times.append(time.perf_counter() - t0)\n"
    "times.sort()\n"
    "print('numpy_ms', 1e3 * times[len(times) // 2], np.__version__)\n";

static bool write_file(const char *path, const void *data, size_t bytes)
{
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, bytes, f) == bytes;
    return fclose(f) == 0 && ok;
}

static double numpy_peer(const void *S, lac_dtype dt, int64_t m, int64_t cols, const void *R, lac_dtype it,
                         const void *w, lac_map_op op, int64_t n, int repeats, char *version, size_t version_len)
{
    char dir[] = "/dev/shm/map_bench_XXXXXX", path[64], cmd[512];
    if (!mkdtemp(dir)) {
        snprintf(dir, sizeof dir, "%s", "/tmp/map_bench_XXXXXX");
        if (!mkdtemp(dir)) return NAN;
    }
    size_t vs = lac_dtype_size(dt);
    double ms = NAN;
    bool ok = true;
    snprintf(path, sizeof path, "%s/S", dir);
    ok = ok && write_file(path, S, (size_t)(m * cols) * vs);
    snprintf(path, sizeof path, "%s/R", dir);
    ok = ok && write_file(path, R, (size_t)m * lac_dtype_size(it));
    snprintf(path, sizeof path, "%s/w", dir);
    if (w) ok = ok && write_file(path, w, (size_t)m * vs);
    snprintf(path, sizeof path, "%s/peer.py", dir);
    ok = ok && write_file(path, numpy_script, sizeof numpy_script - 1);
    if (ok) {
        snprintf(cmd, sizeof cmd, PYTHON " %s/peer.py %s %lld %lld %lld %s %s %d %s %d 2>/dev/null", dir, dir,
                 (long long)m, (long long)n, (long long)cols, dt == LAC_FLOAT32 ? "float32" : "float64",
                 it == LAC_INT32 ? "int32" : "int64", w ? 1 : 0, lac_map_op_name(op), repeats);
        FILE *pipe = popen(cmd, "r");
        if (pipe) {
            char line[256], ver[64];
            double v;
            while (fgets(line, sizeof line, pipe))
                if (sscanf(line, "numpy_ms %lf %63s", &v, ver) == 2) {
                    ms = v;
                    snprintf(version, version_len, "%s", ver);
                }
            pclose(pipe);
        }
    }
    const char *names[] = {"S", "R", "w", "peer.py"};
    for (int k = 0; k < 4; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        unlink(path);
    }
    rmdir(dir);
    return ms;
}

/* ------------------------------------------------------------------------ */
/* Bandwidth                                                                 */
/* ------------------------------------------------------------------------ */
/* Host copy bandwidth with the same threads as the map: read + write bytes over
 * the best of a few parallel memcpy runs. */
static double host_copy_bandwidth(int threads, size_t bytes)
{
    char *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b) {
        free(a), free(b);
        return NAN;
    }
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t k = 0; k < (int64_t)bytes; k += 4096) {
        a[k] = (char)k;
        b[k] = 0;
    }
    double best = INFINITY;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_s();
#pragma omp parallel num_threads(threads)
        {
            int nt = omp_get_num_threads(), id = omp_get_thread_num();
            size_t lo = bytes / (size_t)nt * (size_t)id;
            size_t hi = id == nt - 1 ? bytes : bytes / (size_t)nt * (size_t)(id + 1);
            memcpy(b + lo, a + lo, hi - lo);
        }
        double t = now_s() - t0;
        if (t < best) best = t;
    }
    free(a);
    free(b);
    return 2.0 * (double)bytes / best;
}

/* Device bandwidth through lac_memcpy: device-to-device (read + write bytes) or
 * pinned host-to-device (bytes once). */
static double device_copy_bandwidth(lac_ctx_t ctx, size_t bytes, bool host_to_device)
{
    void *dst = NULL, *src = NULL;
    double bw = NAN;
    if (lac_device_alloc(ctx, bytes, &dst) != LAC_SUCCESS) goto done;
    if (host_to_device) {
        if (lac_host_alloc_pinned(ctx, bytes, &src) != LAC_SUCCESS) goto done;
        memset(src, 1, bytes);
    } else if (lac_device_alloc(ctx, bytes, &src) != LAC_SUCCESS) {
        goto done;
    }
    lac_memory sm = host_to_device ? LAC_MEM_HOST : LAC_MEM_DEVICE;
    double best = INFINITY;
    for (int rep = 0; rep < 6; rep++) {
        double t0 = now_s();
        if (lac_memcpy(ctx, dst, LAC_MEM_DEVICE, src, sm, bytes) != LAC_SUCCESS) goto done;
        lac_ctx_synchronize(ctx);
        double t = now_s() - t0;
        if (rep > 0 && t < best) best = t;   /* the first run warms up */
    }
    bw = (host_to_device ? 1.0 : 2.0) * (double)bytes / best;
done:
    if (dst) lac_device_free(ctx, dst);
    if (src) {
        if (host_to_device) lac_host_free_pinned(ctx, src);
        else lac_device_free(ctx, src);
    }
    return bw;
}

/* ------------------------------------------------------------------------ */
/* One case                                                                  */
/* ------------------------------------------------------------------------ */
typedef struct {
    void *S, *R, *w, *T;         /* host copies (S, R, w generated here) */
    void *dS, *dR, *dw, *dT;     /* what lac_map sees: device or pinned, or == host */
    bool on_device, pinned;
} case_buffers;

static void free_buffers(lac_ctx_t ctx, case_buffers *b)
{
    if (b->on_device) {
        if (b->dS) lac_device_free(ctx, b->dS);
        if (b->dR) lac_device_free(ctx, b->dR);
        if (b->dw) lac_device_free(ctx, b->dw);
        if (b->dT) lac_device_free(ctx, b->dT);
    }
    if (b->pinned) {
        if (b->S) lac_host_free_pinned(ctx, b->S);
        if (b->R) lac_host_free_pinned(ctx, b->R);
        if (b->w) lac_host_free_pinned(ctx, b->w);
        if (b->T) lac_host_free_pinned(ctx, b->T);
    } else {
        free(b->S), free(b->R), free(b->w), free(b->T);
    }
    memset(b, 0, sizeof *b);
}

static void *host_buffer(lac_ctx_t ctx, bool pinned, size_t bytes)
{
    if (bytes == 0) bytes = 1;
    if (!pinned) return malloc(bytes);
    void *p = NULL;
    return lac_host_alloc_pinned(ctx, bytes, &p) == LAC_SUCCESS ? p : NULL;
}

static void skip_all(bench_result *rs, int count, const char *why)
{
    for (int k = 0; k < count; k++) {
        rs[k].skipped = true;
        snprintf(rs[k].why, sizeof rs[k].why, "%s", why);
    }
}

/* What one call of any mode needs. */
typedef struct {
    lac_ctx_t ctx;
    lac_map_plan_t plan;
    const lac_array *S, *R, *W;
    lac_array *T;
    void *stream;   /* cudaStream_t of the async mode */
} bench_call;

/* One call of a mode; wait: synchronise (the async mode's report too). */
static lac_status call_mode(const bench_call *c, bench_mode mode, const lac_map_params *p, bool wait)
{
    lac_status st;
    if (mode == MODE_PLAN || mode == MODE_PLAN_FAST) {   /* one plan serves both: its option set per call */
        lac_map_plan_set_deterministic(c->plan, mode == MODE_PLAN);
        st = lac_map_plan_execute(c->ctx, c->plan, p, c->S, c->W, c->T);
    } else if (mode == MODE_ASYNC) {
#ifdef LACUNA_BENCH_CUDA
        st = lac_map_cuda_async(c->ctx, p, c->S, c->R, c->W, c->T, (cudaStream_t)c->stream);
        if (st == LAC_SUCCESS && wait) st = lac_map_cuda_synchronize(c->ctx, (cudaStream_t)c->stream);
        return st;
#else
        return LAC_ERR_UNSUPPORTED;
#endif
    } else {
        st = lac_map(c->ctx, p, c->S, c->R, c->W, c->T);
    }
    if (st == LAC_SUCCESS && wait) st = lac_ctx_synchronize(c->ctx);
    return st;
}

/* One case (m, n, dist) in every mode of o->modes: rs[k] for o->modes[k]. */
static void run_case(lac_ctx_t ctx, const bench_options *o, double bandwidth, bench_result *rs, char *numpy_version,
                     size_t numpy_version_len)
{
    const int modes = o->num_modes;
    int64_t m = rs[0].m, n = rs[0].n, cols = o->cols;
    size_t vs = lac_dtype_size(o->dtype), is = lac_dtype_size(o->index_dtype);
    bool cuda = lac_ctx_backend(ctx) == LAC_BACKEND_CUDA;
    bool device_arrays = cuda && !o->host_memory;
    char why[160];
    for (int k = 0; k < modes; k++) {
        bench_result *res = &rs[k];
        res->serial_ms = res->speedup = res->relerr = res->plan_build_ms = NAN;
        res->numpy_ms = res->numpy_speedup = res->oneshot_ratio = NAN;
        res->same_bits = -1;
        res->rounds_under = -1;
    }

    if (o->index_dtype == LAC_INT32 && n > INT32_MAX) {
        skip_all(rs, modes, "n does not fit int32 indices");
        return;
    }
    size_t bytes_S = (size_t)m * (size_t)cols * vs, bytes_R = (size_t)m * is, bytes_w = o->weights ? (size_t)m * vs : 0;
    size_t bytes_T = (size_t)n * (size_t)cols * vs;
    double host_need = (double)(bytes_S + bytes_R + bytes_w + 2 * bytes_T);
    if (o->serial && !cuda) host_need += (double)bytes_T + 16.0 * (double)n * (double)cols;
    if (o->check) host_need += 16.0 * (double)n * (double)cols + (double)bytes_T;
    double phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (host_need > 0.8 * phys) {
        snprintf(why, sizeof why, "needs %.1f GB of host memory, the machine has %.1f GB", host_need / 1e9, phys / 1e9);
        skip_all(rs, modes, why);
        return;
    }

    case_buffers b;
    memset(&b, 0, sizeof b);
    b.pinned = cuda && o->host_memory;
    b.S = host_buffer(ctx, b.pinned, bytes_S);
    b.R = host_buffer(ctx, b.pinned, bytes_R);
    b.w = o->weights ? host_buffer(ctx, b.pinned, bytes_w) : NULL;
    b.T = host_buffer(ctx, b.pinned, bytes_T);
    void *peer_T = NULL, *peer_scratch = NULL, *det_T = NULL;
    double *ref = NULL, *times = NULL;
    lac_map_plan_t plan = NULL;
    if (!b.S || !b.R || (o->weights && !b.w) || !b.T) {
        skip_all(rs, modes, "host allocation failed");
        goto done;
    }
    zipf_table z;
    memset(&z, 0, sizeof z);
    if (rs[0].dist == DIST_ZIPF && !zipf_build(&z, n, ZIPF_EXPONENT, o->seed + 17)) {
        skip_all(rs, modes, "zipf table allocation failed");
        goto done;
    }
    fill_data(b.S, o->dtype, m, cols, b.R, o->index_dtype, n, b.w, rs[0].dist, &z,
              o->seed * 0x9E3779B97F4A7C15ull + (uint64_t)m * 31 + (uint64_t)n);
    zipf_free(&z);

    if (device_arrays) {
        b.on_device = true;
        if (lac_device_alloc(ctx, bytes_S ? bytes_S : 1, &b.dS) || lac_device_alloc(ctx, bytes_R ? bytes_R : 1, &b.dR) ||
            (o->weights && lac_device_alloc(ctx, bytes_w ? bytes_w : 1, &b.dw)) ||
            lac_device_alloc(ctx, bytes_T ? bytes_T : 1, &b.dT)) {
            snprintf(why, sizeof why, "device allocation failed: %s", lac_last_error(ctx));
            skip_all(rs, modes, why);
            goto done;
        }
        if (lac_memcpy(ctx, b.dS, LAC_MEM_DEVICE, b.S, LAC_MEM_HOST, bytes_S) ||
            lac_memcpy(ctx, b.dR, LAC_MEM_DEVICE, b.R, LAC_MEM_HOST, bytes_R) ||
            (o->weights && lac_memcpy(ctx, b.dw, LAC_MEM_DEVICE, b.w, LAC_MEM_HOST, bytes_w))) {
            snprintf(why, sizeof why, "upload failed: %s", lac_last_error(ctx));
            skip_all(rs, modes, why);
            goto done;
        }
    } else {
        b.dS = b.S, b.dR = b.R, b.dw = b.w, b.dT = b.T;
    }

    lac_memory mem = device_arrays ? LAC_MEM_DEVICE : LAC_MEM_HOST;
    lac_array S = cols > 1 ? lac_array_matrix(b.dS, o->dtype, m, cols) : lac_array_vector(b.dS, o->dtype, m);
    lac_array R = lac_array_vector(b.dR, o->index_dtype, m);
    lac_array W = lac_array_vector(b.dw, o->dtype, m);
    lac_array T = cols > 1 ? lac_array_matrix(b.dT, o->dtype, n, cols) : lac_array_vector(b.dT, o->dtype, n);
    S.memory = R.memory = W.memory = T.memory = mem;

    for (int k = 0; k < modes && !plan; k++) {
        if (o->modes[k] != MODE_PLAN && o->modes[k] != MODE_PLAN_FAST) continue;
        double t0 = now_s();
        lac_status st = lac_map_plan_create(ctx, &R, n, &plan);
        if (st == LAC_SUCCESS) st = lac_ctx_synchronize(ctx);
        if (st != LAC_SUCCESS) {
            snprintf(why, sizeof why, "plan: %s: %s", lac_status_string(st), lac_last_error(ctx));
            skip_all(rs, modes, why);
            goto done;
        }
        rs[k].plan_build_ms = 1e3 * (now_s() - t0);
    }

    lac_map_params params[MAX_MODES];
    for (int k = 0; k < modes; k++) {
        params[k] = lac_map_params_default();
        params[k].op = o->op;
        params[k].deterministic = o->modes[k] == MODE_DETERMINISTIC;
    }
    bench_call call = {ctx, plan, &S, &R, o->weights ? &W : NULL, &T, NULL};
#ifdef LACUNA_BENCH_CUDA
    cudaStream_t stream = NULL;
    for (int k = 0; k < modes && !stream; k++)
        if (o->modes[k] == MODE_ASYNC && cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
            skip_all(rs, modes, "async: no CUDA stream");
            goto done;
        }
    call.stream = stream;
#endif
    times = malloc((size_t)(o->repeats * modes) * sizeof *times);
    if (!times) goto done;
    /* async: the calls queued back to back, one synchronisation; the time per
     * call (a caller's loop, where each launch overlaps the work before it). */
    for (int k = 0; k < modes; k++) {
        if (o->modes[k] != MODE_ASYNC) continue;
        lac_status st = LAC_SUCCESS;
        for (int rep = 0; rep <= o->warmup && st == LAC_SUCCESS; rep++) st = call_mode(&call, MODE_ASYNC, &params[k], false);
        if (st == LAC_SUCCESS) st = call_mode(&call, MODE_ASYNC, &params[k], true);
        double t0 = now_s();
        for (int rep = 0; rep < o->repeats && st == LAC_SUCCESS; rep++) st = call_mode(&call, MODE_ASYNC, &params[k], false);
        if (st == LAC_SUCCESS) st = call_mode(&call, MODE_ASYNC, &params[k], true);
        const double per = 1e3 * (now_s() - t0) / o->repeats;
        if (st != LAC_SUCCESS) {
            snprintf(why, sizeof why, "async: %s: %s", lac_status_string(st), lac_last_error(ctx));
            skip_all(rs, modes, why);
            goto done;
        }
        for (int rep = 0; rep < o->repeats; rep++) times[k * o->repeats + rep] = per;
    }
    /* Interleaved: run r of every mode, then run r + 1, each round starting
     * one mode later, so that no mode always follows the same one. */
    for (int rep = -o->warmup; rep < o->repeats; rep++)
        for (int step = 0; step < modes; step++) {
            const int k = (int)(((int64_t)rep + o->warmup + step) % modes);
            if (o->modes[k] == MODE_ASYNC) continue;
            double t0 = now_s();
            lac_status st = call_mode(&call, o->modes[k], &params[k], true);
            double t = now_s() - t0;
            if (st != LAC_SUCCESS) {
                snprintf(why, sizeof why, "%s: %s", lac_status_string(st), lac_last_error(ctx));
                skip_all(rs, modes, why);
                goto done;
            }
            if (rep >= 0) times[k * o->repeats + rep] = 1e3 * t;
        }

    /* Bytes that must move: S and R read once (S not at all for an unweighted
     * count), w read once, T written once. */
    double moved = (double)(bytes_R + bytes_w + bytes_T);
    if (!(o->op == LAC_MAP_COUNT)) moved += (double)bytes_S;
    int oneshot = -1;
    for (int k = 0; k < modes; k++) {
        bench_result *res = &rs[k];
        res->median_ms = median(times + k * o->repeats, o->repeats);
        res->gbps = moved / (res->median_ms * 1e-3) / 1e9;
        res->floor_ms = moved / bandwidth * 1e3;
        res->floor_ratio = res->median_ms / res->floor_ms;
        if (o->modes[k] == MODE_ATOMIC) oneshot = k;
    }
    for (int k = 0; k < modes && oneshot >= 0; k++) {
        rs[k].oneshot_ratio = rs[k].median_ms / rs[oneshot].median_ms;
        if (k == oneshot || o->modes[k] == MODE_ASYNC) continue;
        rs[k].rounds_under = 0;
        for (int rep = 0; rep < o->repeats; rep++)
            rs[k].rounds_under += times[k * o->repeats + rep] <= times[oneshot * o->repeats + rep];
    }

    if (o->check) {
        ref = malloc((size_t)(n * cols) * sizeof *ref);
        det_T = malloc(bytes_T ? bytes_T : 1);
        if (ref && det_T) {
            reference_map(b.S, o->dtype, m, cols, b.R, o->index_dtype, b.w, o->op, n, ref);
            bool have_det = false;
            for (int pass = 0; pass < 2; pass++)   /* the deterministic modes first */
                for (int k = 0; k < modes; k++) {
                    if ((o->modes[k] == MODE_PLAN || o->modes[k] == MODE_PLAN_FAST) != (pass == 1)) continue;
                    if (call_mode(&call, o->modes[k], &params[k], true) != LAC_SUCCESS) goto done;
                    if (device_arrays && lac_memcpy(ctx, b.T, LAC_MEM_HOST, b.dT, LAC_MEM_DEVICE, bytes_T) != LAC_SUCCESS)
                        goto done;
                    rs[k].relerr = relative_error(b.T, o->dtype, ref, n * cols);
                    if (o->modes[k] == MODE_DETERMINISTIC) {
                        memcpy(det_T, b.T, bytes_T);
                        have_det = true;
                    }
                    if ((o->modes[k] == MODE_PLAN || o->modes[k] == MODE_PLAN_FAST) && have_det)
                        rs[k].same_bits = memcmp(det_T, b.T, bytes_T) == 0;
                }
        }
    }
#ifdef LACUNA_BENCH_CUDA
    if (stream) cudaStreamDestroy(stream);
#endif

    double serial_ms = NAN, numpy_ms = NAN;
    if (o->serial && !cuda) {
        peer_T = malloc(bytes_T ? bytes_T : 1);
        peer_scratch = malloc((size_t)(2 * n * cols) * sizeof(double) + 1);
        if (peer_T && peer_scratch) {
            for (int rep = -1; rep < o->repeats; rep++) {
                double t0 = now_s();
                serial_peer(b.S, o->dtype, m, cols, b.R, o->index_dtype, b.w, o->op, n, peer_T, peer_scratch);
                double t = now_s() - t0;
                if (rep >= 0) times[rep] = 1e3 * t;
            }
            serial_ms = median(times, o->repeats);
        }
    }
    if (o->numpy && !cuda)
        numpy_ms = numpy_peer(b.S, o->dtype, m, cols, b.R, o->index_dtype, b.w, o->op, n,
                              o->repeats < 5 ? o->repeats : 5, numpy_version, numpy_version_len);
    for (int k = 0; k < modes; k++) {
        rs[k].serial_ms = serial_ms;
        rs[k].speedup = serial_ms / rs[k].median_ms;
        rs[k].numpy_ms = numpy_ms;
        rs[k].numpy_speedup = numpy_ms / rs[k].median_ms;
    }
done:
    lac_map_plan_destroy(&plan);
    free(times);
    free(ref);
    free(det_T);
    free(peer_T);
    free(peer_scratch);
    free_buffers(ctx, &b);
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */
/* ------------------------------------------------------------------------ */
static void json_number(FILE *f, const char *key, double v, bool last)
{
    if (isfinite(v)) fprintf(f, "\"%s\":%.6g%s", key, v, last ? "" : ",");
    else fprintf(f, "\"%s\":null%s", key, last ? "" : ",");
}

static void print_json(const bench_options *o, const char *device, int threads, double bandwidth,
                       const bench_result *r)
{
    printf("{\"m\":%lld,\"n\":%lld,\"dist\":\"%s\",\"op\":\"%s\",\"dtype\":\"%s\",\"index\":\"%s\",\"cols\":%lld,"
           "\"weights\":%s,\"device\":\"%s\",\"mode\":\"%s\",\"threads\":%d,\"host_memory\":%s,",
           (long long)r->m, (long long)r->n, dist_name(r->dist), lac_map_op_name(o->op), lac_dtype_name(o->dtype),
           lac_dtype_name(o->index_dtype), (long long)o->cols, o->weights ? "true" : "false", device,
           mode_name(r->mode), threads, o->host_memory ? "true" : "false");
    if (r->skipped) {
        printf("\"skipped\":\"%s\"}\n", r->why);
        return;
    }
    json_number(stdout, "median_ms", r->median_ms, false);
    json_number(stdout, "gbps", r->gbps, false);
    json_number(stdout, "floor_ms", r->floor_ms, false);
    json_number(stdout, "floor_ratio", r->floor_ratio, false);
    json_number(stdout, "bandwidth_gbps", bandwidth / 1e9, false);
    json_number(stdout, "serial_ms", r->serial_ms, false);
    json_number(stdout, "speedup_vs_serial", r->speedup, false);
    json_number(stdout, "numpy_ms", r->numpy_ms, false);
    json_number(stdout, "speedup_vs_numpy", r->numpy_speedup, false);
    json_number(stdout, "vs_one_shot", r->oneshot_ratio, false);
    if (r->rounds_under >= 0) printf("\"rounds_at_or_under_one_shot\":%d,", r->rounds_under);
    if (r->same_bits >= 0) printf("\"plan_bits_equal_deterministic\":%s,", r->same_bits ? "true" : "false");
    json_number(stdout, "plan_build_ms", r->plan_build_ms, false);
    json_number(stdout, "relerr", r->relerr, true);
    printf("}\n");
    fflush(stdout);
}

/* The case's time against its floor and the serial loop. */
static void print_figure(bench_figures *bf, const bench_options *o, const char *device, const bench_result *r)
{
    char ms[32], ns[32], name[256];
    format_size(r->m, ms, sizeof ms);
    format_size(r->n, ns, sizeof ns);
    char shape[96] = "";
    if (o->index_dtype != LAC_INT32) snprintf(shape + strlen(shape), sizeof shape - strlen(shape), ", %s bridge",
                                              lac_dtype_name(o->index_dtype));
    if (o->cols > 1) snprintf(shape + strlen(shape), sizeof shape - strlen(shape), ", %lld columns", (long long)o->cols);
    if (o->weights) snprintf(shape + strlen(shape), sizeof shape - strlen(shape), ", weighted");
    snprintf(name, sizeof name, "%s m=%s n=%s %s, %s %s%s%s%s", device, ms, ns, dist_name(r->dist),
             lac_dtype_name(o->dtype), lac_map_op_name(o->op), shape, r->mode == MODE_ATOMIC ? "" : ", ",
             r->mode == MODE_ATOMIC ? "" : mode_name(r->mode));
    bench_figure(bf, "map", name, r->median_ms, "ms", r->floor_ms, "serial loop", r->serial_ms);
}

static void print_table(FILE *f, const bench_options *o, const char *device, int threads, double bandwidth,
                        const bench_result *rs, int count, const char *numpy_version)
{
    char modes[64] = "";
    for (int k = 0; k < o->num_modes; k++)
        snprintf(modes + strlen(modes), sizeof modes - strlen(modes), "%s%s", k ? "," : "", mode_name(o->modes[k]));
    fprintf(f, "\nmap_bench: op %s, %s values, %s bridge, %lld column(s)%s, mode %s, device %s, %d thread(s)\n",
            lac_map_op_name(o->op), lac_dtype_name(o->dtype), lac_dtype_name(o->index_dtype), (long long)o->cols,
            o->weights ? ", weights" : "", modes, device, threads);
    fprintf(f, "copy bandwidth %.1f GB/s (%s); floor = bytes that must move / bandwidth; median of %d runs%s\n",
            bandwidth / 1e9,
            strcmp(device, "cpu") == 0 ? "parallel memcpy, read + write"
            : o->host_memory           ? "pinned host to device"
                                       : "device to device, read + write",
            o->repeats, o->num_modes > 1 ? " (modes interleaved)" : "");
    if (numpy_version[0]) fprintf(f, "peers: serial loop (this process), numpy %s (np.bincount / np.minimum.at, 1 thread)\n", numpy_version);
    fprintf(f, "%8s %8s %-8s %-13s %10s %7s %9s %7s %8s %10s %7s %9s %7s %9s\n", "m", "n", "dist", "mode", "median_ms",
            "GB/s", "floor_ms", "xfloor", "x1shot", "serial_ms", "xserial", "numpy_ms", "xnumpy", "relerr");
    for (int k = 0; k < count; k++) {
        const bench_result *r = &rs[k];
        char ms[24], ns[24];
        format_size(r->m, ms, sizeof ms);
        format_size(r->n, ns, sizeof ns);
        if (r->skipped) {
            fprintf(f, "%8s %8s %-8s %-13s skipped: %s\n", ms, ns, dist_name(r->dist), mode_name(r->mode), r->why);
            continue;
        }
        fprintf(f, "%8s %8s %-8s %-13s %10.3f %7.1f %9.3f %7.2f", ms, ns, dist_name(r->dist), mode_name(r->mode),
                r->median_ms, r->gbps, r->floor_ms, r->floor_ratio);
        if (isfinite(r->oneshot_ratio)) fprintf(f, " %8.3f", r->oneshot_ratio);
        else fprintf(f, " %8s", "-");
        if (isfinite(r->serial_ms)) fprintf(f, " %10.3f %7.2f", r->serial_ms, r->speedup);
        else fprintf(f, " %10s %7s", "-", "-");
        if (isfinite(r->numpy_ms)) fprintf(f, " %9.1f %7.2f", r->numpy_ms, r->numpy_speedup);
        else fprintf(f, " %9s %7s", "-", "-");
        if (isfinite(r->relerr)) fprintf(f, " %9.2e", r->relerr);
        else fprintf(f, " %9s", "-");
        if (r->rounds_under >= 0) fprintf(f, "  <= one-shot in %d/%d rounds", r->rounds_under, o->repeats);
        if (isfinite(r->plan_build_ms)) fprintf(f, "  (build %.1f ms)", r->plan_build_ms);
        if (r->same_bits >= 0) fprintf(f, "  %s", r->same_bits ? "bits == deterministic" : "BITS DIFFER from deterministic");
        fprintf(f, "\n");
    }
}

int main(int argc, char **argv)
{
    bench_options o;
    int rc = parse_options(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;

    lac_ctx_params cp = lac_ctx_params_default();
    cp.threads = o.threads;
    if (!strcmp(o.device, "cpu")) cp.backend = LAC_BACKEND_CPU;
    else if (!strcmp(o.device, "cuda")) cp.backend = LAC_BACKEND_CUDA;
    else if (!strcmp(o.device, "auto")) cp.backend = LAC_BACKEND_AUTO;
    else if (!strncmp(o.device, "cuda:", 5)) {
        /* cuda:N,M,...: a context of several devices (one may repeat) */
        cp.backend = LAC_BACKEND_CUDA;
        for (const char *at = o.device + 5;;) {
            char *end;
            long id = strtol(at, &end, 10);
            if (end == at || id < 0 || (*end && *end != ',') || cp.num_devices == LAC_MAX_DEVICES)
                return fprintf(stderr, "map_bench: bad --device '%s' (cuda:N,M,...)\n", o.device), 2;
            cp.device_ids[cp.num_devices++] = (int)id;
            if (!*end) break;
            at = end + 1;
        }
    } else return fprintf(stderr, "map_bench: bad --device '%s' (cpu, cuda, cuda:N,M,..., auto)\n", o.device), 2;
    lac_ctx_t ctx = NULL;
    lac_status st = lac_ctx_create(&cp, &ctx);
    if (st != LAC_SUCCESS) {
        fprintf(stderr, "map_bench: %s: %s\n", lac_status_string(st), lac_last_error(NULL));
        return 1;
    }
    bool cuda = lac_ctx_backend(ctx) == LAC_BACKEND_CUDA;
    const char *device = cuda ? (!strncmp(o.device, "cuda:", 5) ? o.device : "cuda") : "cpu";
    int threads = lac_ctx_threads(ctx);
    if (o.host_memory && !cuda) fprintf(stderr, "map_bench: --host-memory only matters on a CUDA context; ignored\n");

    /* Bandwidth, measured once for the run on a buffer well beyond the caches. */
    double bandwidth;
    if (cuda) bandwidth = device_copy_bandwidth(ctx, (size_t)1 << 30, o.host_memory);
    else bandwidth = host_copy_bandwidth(threads, (size_t)1 << 29);
    if (!isfinite(bandwidth) || bandwidth <= 0) {
        fprintf(stderr, "map_bench: could not measure the copy bandwidth\n");
        lac_ctx_destroy(&ctx);
        return 1;
    }

    bench_figures figures;
    if (bench_figures_open(&figures, o.figures, threads) < 0) {
        lac_ctx_destroy(&ctx);
        return 1;
    }
    int cases = o.num_m * o.num_n * o.num_dists, rows = cases * o.num_modes;
    bench_result *results = calloc((size_t)rows, sizeof *results);
    if (!results) return 1;
    char numpy_version[64] = "";
    int k = 0;
    for (int im = 0; im < o.num_m; im++)
        for (int in = 0; in < o.num_n; in++)
            for (int id = 0; id < o.num_dists; id++, k += o.num_modes) {
                bench_result *rs = &results[k];
                for (int j = 0; j < o.num_modes; j++) {
                    rs[j].m = o.sizes_m[im];
                    rs[j].n = o.sizes_n[in];
                    rs[j].dist = o.dists[id];
                    rs[j].mode = o.modes[j];
                }
                if (!o.json) {
                    fprintf(stderr, "\rrunning m=%lld n=%lld %s ...", (long long)rs->m, (long long)rs->n, dist_name(rs->dist));
                    fflush(stderr);
                }
                run_case(ctx, &o, bandwidth, rs, numpy_version, sizeof numpy_version);
                for (int j = 0; j < o.num_modes; j++) {
                    if (o.json) print_json(&o, device, threads, bandwidth, &rs[j]);
                    if (!rs[j].skipped) print_figure(&figures, &o, device, &rs[j]);
                }
            }
    bench_figures_close(&figures);
    if (!o.json) fprintf(stderr, "\r\033[K");
    print_table(o.json ? stderr : stdout, &o, device, threads, bandwidth, results, rows, numpy_version);
    free(results);
    lac_ctx_destroy(&ctx);
    return 0;
}
