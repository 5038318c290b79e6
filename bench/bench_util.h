/* Helpers shared by the benchmarks: a monotonic clock, the median of
 * repeated measurements, and the figures' JSON lines for `lacuna report`. */
#ifndef LACUNA_BENCH_UTIL_H
#define LACUNA_BENCH_UTIL_H

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of n values (sorts them in place); NaN for none. */
static inline double median(double *v, int n)
{
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Figures for `lacuna report`: one JSON line per figure (bench/README.md)
 * appended to the file a benchmark's --figures names. The machine is
 * $LACUNA_BENCH_MACHINE, else the CPU's model name and thread count; the
 * date is today's, UTC. */
typedef struct {
    FILE *fp;
    char machine[256];
    char date[32];
} bench_figures;

static inline void bench_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", (unsigned char)*s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

/* Opens path for appending (NULL: no figures); 0, or -1 after a message. */
static inline int bench_figures_open(bench_figures *bf, const char *path, int threads)
{
    memset(bf, 0, sizeof *bf);
    if (!path) return 0;
    if (!(bf->fp = fopen(path, "a"))) {
        fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    const char *env = getenv("LACUNA_BENCH_MACHINE");
    char model[200] = "unknown CPU", line[512];
    FILE *info = fopen("/proc/cpuinfo", "r");
    while (info && fgets(line, sizeof line, info))
        if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
            const char *v = strchr(line, ':') + 1;
            while (*v == ' ' || *v == '\t') v++;
            snprintf(model, sizeof model, "%.*s", (int)strcspn(v, "\n"), v);
            break;
        }
    if (info) fclose(info);
    if (env && *env) snprintf(bf->machine, sizeof bf->machine, "%s", env);
    else snprintf(bf->machine, sizeof bf->machine, "%s, %d threads", model, threads);
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(bf->date, sizeof bf->date, "%Y-%m-%d", &tm);
    return 0;
}

/* One figure; floor and peer_value NaN (peer NULL) when there is none. */
static inline void bench_figure(bench_figures *bf, const char *capability, const char *name, double value,
                                const char *unit, double floor, const char *peer, double peer_value)
{
    if (!bf->fp || !isfinite(value)) return;
    FILE *f = bf->fp;
    fputs("{\"capability\":", f);
    bench_json_string(f, capability);
    fputs(",\"case\":", f);
    bench_json_string(f, name);
    fprintf(f, ",\"value\":%.6g,\"unit\":", value);
    bench_json_string(f, unit);
    if (isfinite(floor)) fprintf(f, ",\"floor\":%.6g", floor);
    if (peer && isfinite(peer_value)) {
        fputs(",\"peer\":", f);
        bench_json_string(f, peer);
        fprintf(f, ",\"peer_value\":%.6g", peer_value);
    }
    fputs(",\"machine\":", f);
    bench_json_string(f, bf->machine);
    fputs(",\"date\":", f);
    bench_json_string(f, bf->date);
    fputs("}\n", f);
    fflush(f);
}

static inline void bench_figures_close(bench_figures *bf)
{
    if (bf->fp) fclose(bf->fp);
    bf->fp = NULL;
}

#endif
