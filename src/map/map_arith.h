/* The per-element arithmetic of map, below the front end: element loads, the
 * per-op combine with the NaN rules of lacuna.h, which targets need a
 * "touched" flag, and the final write of one target element. Shared by the
 * CPU backend (src/map/cpu/) and the rank reduction of src/dist/map_dist.c, so
 * T is finished by the same lines whether one process or many computed it. */
#ifndef LACUNA_MAP_MAP_ARITH_H
#define LACUNA_MAP_MAP_ARITH_H

#include "map/map_backend.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

static inline void lac_map_store(void *p, lac_dtype dt, int64_t k, double v)
{
    if (dt == LAC_FLOAT32) ((float *)p)[k] = (float)v;
    else ((double *)p)[k] = v;
}

/* The accumulator's start: MIN and MAX start from +/-inf, the sums from 0. */
static inline double lac_map_identity(lac_map_op op)
{
    return op == LAC_MAP_MIN ? INFINITY : op == LAC_MAP_MAX ? -INFINITY : 0.0;
}

/* MIN/MAX that propagate NaN (fmin/fmax would drop it): once the accumulator
 * is NaN it stays NaN, and a NaN x makes it NaN. */
static inline double lac_map_min(double acc, double x) { return (x < acc || isnan(x)) ? x : acc; }
static inline double lac_map_max(double acc, double x) { return (x > acc || isnan(x)) ? x : acc; }

/* acc op= x: the sums add, MIN/MAX compare; also folds partial results
 * (private merges, accumulate). */
static inline double lac_map_combine(lac_map_op op, double a, double b)
{
    if (op == LAC_MAP_MIN) return lac_map_min(a, b);
    if (op == LAC_MAP_MAX) return lac_map_max(a, b);
    return a + b;
}

/* Whether a path must keep a "touched" flag per target element to know which
 * targets nothing mapped to. Not needed when the accumulator already tells
 * (unweighted COUNT, unweighted MEAN's count) or when an untouched target's
 * accumulator is already right (SUM/COUNT with empty value +0, accumulate). */
static inline bool lac_map_needs_flags(const lac_map_call *c)
{
    const lac_map_params *p = &c->params;
    bool empty_is_zero = p->empty_value == 0.0 && !signbit(p->empty_value);
    switch (p->op) {
    case LAC_MAP_SUM: return !p->accumulate && !empty_is_zero;
    case LAC_MAP_COUNT: return c->weights && !p->accumulate && !empty_is_zero;
    case LAC_MAP_MEAN: return c->weights != NULL;
    default: return !p->accumulate;   /* MIN/MAX: an identity +/-inf may be a real value */
    }
}

/* Writes target element k from its float64 accumulator(s). touched < 0 means
 * "no flag kept": the accumulators say it (see lac_map_needs_flags). */
static inline void lac_map_finalize(const lac_map_call *c, int64_t k, double acc, double wsum, int touched)
{
    const lac_map_params *p = &c->params;
    if (p->accumulate) {
        /* SUM/COUNT add, MIN/MAX compare; an untouched target's identity
         * leaves T as it was. */
        lac_map_store(c->target, c->value_dtype, k,
                      lac_map_combine(p->op, lac_load_real(c->target, c->value_dtype, k), acc));
        return;
    }
    if (touched < 0) {
        if (p->op == LAC_MAP_MEAN) touched = wsum != 0.0;
        else if (p->op == LAC_MAP_COUNT) touched = acc != 0.0;
        else touched = 1;   /* SUM with empty value 0: acc is 0 already */
    }
    double v = !touched ? p->empty_value : p->op == LAC_MAP_MEAN ? acc / wsum : acc;
    lac_map_store(c->target, c->value_dtype, k, v);
}

/* One element (row i, column c) with source value s and weight wi (1 without
 * weights): what it adds to its target. Returns 1 when it counts, 0 when the
 * NaN policy skips it, -1 when it is a NaN under LAC_NAN_ERROR. COUNT adds the
 * weight and ignores a NaN source under LAC_NAN_PROPAGATE. */
static inline int lac_map_element(const lac_map_params *p, double s, double wi, double *x)
{
    if (p->nan_policy != LAC_NAN_PROPAGATE && (isnan(s) || isnan(wi)))
        return p->nan_policy == LAC_NAN_SKIP ? 0 : -1;
    *x = p->op == LAC_MAP_COUNT ? wi : wi * s;
    return 1;
}

/* lac_map_element for element (row i, column col) of a call: reads S unless
 * the op does not need it (COUNT under NaN propagation never looks at S). */
static inline int lac_map_element_at(const lac_map_call *c, int64_t i, int64_t col, double wi, double *x)
{
    const lac_map_params *p = &c->params;
    bool skip_source = p->op == LAC_MAP_COUNT && p->nan_policy == LAC_NAN_PROPAGATE;
    double s = skip_source ? 0.0 : lac_load_real(c->source, c->value_dtype, i * c->b + col);
    return lac_map_element(p, s, wi, x);
}

#endif
