/* Kernels of the neighbourhood model on CUDA (mf_nbr_cuda.h): the epoch,
 * bhat's copy, the validation error; and their launches.
 *
 * The epoch walks CUSGD++'s streams (mf_sgd_kernels.cu): a group of G lanes
 * owns a run of one user's ratings, u_i in its registers as float4 pieces.
 * For each rating of item row j, lane `sub` holds neighbour slots
 * k = sub + G x s (s < KW) of S^K(j): the neighbour's id and w_{j,k}, c_{j,k}
 * in registers, loaded a step ahead with v_j; it finds the neighbour in the
 * user's ratings (ascending) by a binary search whose steps are the same for
 * every lane (one row length), so the group never diverges. The dot product
 * and the three neighbour sums (explicit sum, its count, implicit sum) are
 * shuffle sums over the group. Then rule (5) for every group of parameters;
 * w_j and c_j go back to global memory through L2 (Hogwild, like v_j). The
 * residuals' baselines take bhat at the epoch's start (as on the CPU), the
 * user's current b_i. K past G x KW or rows wider than the registers hold
 * take a general path: a warp per group, u_i in global memory.
 * The masked kernel (MASK, K <= 32) searches nothing: each cell's mask and
 * the offset of its ratings come with the cell, a step ahead with v_j the
 * lane's slots' ratings (mvals at the offset plus the set bits below the
 * slot) and their bhat at the epoch's start; |R^K(i;j)| is the mask's count
 * and |N^K(i;j)| a ballot's, so both weights are known before the sums and
 * one shuffle sum takes the dot product and the weighted neighbour sums (a
 * step's time is its warp's chain of instructions: bench/RESULTS.md). */
#include "backend/cuda/mf/mf_nbr_cuda.h"

#include <math.h>

/* KW searches at once: the same steps for each (one row length), their loads
 * independent, so they overlap. slot_x < 0 is no neighbour. */
template <int KW>
static __device__ __forceinline__ void find_items(const int32_t *items, int len, const int32_t (&x)[KW], int (&pos)[KW])
{
    int base[KW];
#pragma unroll
    for (int s = 0; s < KW; s++) base[s] = 0;
    int n = len;
    while (n > 1) {
        const int half = n >> 1;
#pragma unroll
        for (int s = 0; s < KW; s++) base[s] = __ldg(items + base[s] + half) < x[s] ? base[s] + half : base[s];
        n -= half;
    }
#pragma unroll
    for (int s = 0; s < KW; s++) {
        int b = base[s];
        if (len > 0 && __ldg(items + b) < x[s]) b++;
        pos[s] = (x[s] >= 0 && b < len && __ldg(items + b) == x[s]) ? b : -1;
    }
}

/* The group's count of valid neighbour slots (nb >= 0), in every lane. */
template <int G, int KW>
static __device__ __forceinline__ int group_count(const int32_t (&nb)[KW], int lane)
{
    const unsigned lanes = G == 32 ? 0xffffffffu : ((1u << G) - 1u) << (lane & ~(G - 1));
    int n = 0;
#pragma unroll
    for (int s = 0; s < KW; s++) n += __popc(__ballot_sync(0xffffffffu, nb[s] >= 0) & lanes);
    return n;
}

/* The w_j | c_j row of item row j: its item's (replica rows), or j itself
 * (wc_row NULL: no replicas), without a dependent load. */
static __device__ __forceinline__ int64_t wc_row_of(const lac_mf_cuda_nbr_args &a, int64_t j)
{
    return a.wc_row ? (int64_t)__ldg(a.wc_row + j) : j;
}

static __device__ __forceinline__ float4 nbr_step4(float keep, float4 a, float t, float4 b)
{
    return make_float4(fmaf(keep, a.x, t * b.x), fmaf(keep, a.y, t * b.y), fmaf(keep, a.z, t * b.z),
                       fmaf(keep, a.w, t * b.w));
}

/* The cell's error e and loss term; false where the cell takes no step.
 * implicit 1: cross-entropy (lac_mf_xent_error); 2: BPR, a pair as three
 * cells of one run (mf_implicit.cu): the positive (rating c > 0) only
 * scored, held; its negative (-c), x = the held score - its own, e = -c
 * sigmoid(-x), held; the positive again (0), stepped by the held c sigmoid(-x).
 * Both scores come before either step, as on the CPU. */
static __device__ __forceinline__ bool nbr_error(int implicit, float rd, float x, float &held, float &e, float &loss)
{
    if (implicit == 2) {
        if (rd > 0.0f) {
            held = x;
            return false;
        }
        if (rd < 0.0f) {
            const float d = held - x;
            held = -rd * lac_mf_sigmoid(-d);
            loss = -rd * lac_mf_log_loss(d);
            e = -held;
        } else {
            e = held;
            loss = 0.0f;
        }
        return true;
    }
    e = implicit ? lac_mf_xent_error(rd, x) : rd - x;
    loss = implicit ? lac_mf_xent_loss(rd, x) : 0.0f;   /* explicit: the caller's e^2 */
    return true;
}

/* The end of a run: u_i and b_i back to memory, or their weighted change
 * added when other groups hold other runs of the row (as CUSGD++). */
template <int G, int V>
static __device__ __forceinline__ void nbr_finish_run(const lac_mf_cuda_epoch_args &a, int64_t user, float weight,
                                                      const float4 (&p)[V], const float4 (&p0)[V], float bu, float bu0,
                                                      int sub, int pieces)
{
    float4 *row = (float4 *)(a.P + user * a.stride);
#pragma unroll
    for (int v = 0; v < V; v++) {
        const int c = sub + G * v;
        if (c >= pieces) continue;
        if (weight < 1.0f) {
            float *f = (float *)(row + c);
            atomicAdd(f + 0, weight * (p[v].x - p0[v].x));
            atomicAdd(f + 1, weight * (p[v].y - p0[v].y));
            atomicAdd(f + 2, weight * (p[v].z - p0[v].z));
            atomicAdd(f + 3, weight * (p[v].w - p0[v].w));
        } else {
            __stcg(row + c, p[v]);
        }
    }
    if (sub == 0) {
        if (weight < 1.0f) atomicAdd(a.user_bias + user, weight * (bu - bu0));
        else a.user_bias[user] = bu;
    }
}

/* Item row j's data for lane sub: v_j pieces, bhat_j, neighbours, w, c; for
 * the masked kernel the cell's mask and its slots' ratings and bhat. */
template <int G, int V, int KW>
struct nbr_row {
    float4 q[V];
    float bj;
    int32_t nb[KW];
    float w[KW], c[KW];
    uint32_t m;
    float rv[KW], bh[KW];
    float *wc;      /* its w_j | c_j row */
};

template <int G, int V, int KW, bool MASK>
static __device__ __forceinline__ void load_item(nbr_row<G, V, KW> &r, const lac_mf_cuda_nbr_args &a, int32_t cd,
                                                 uint32_t m, uint32_t off, int sub, int pieces)
{
    const bool present = cd >= 0;
    const int64_t j = cd & LAC_MF_ITEM_MASK;
    const float4 *qj = (const float4 *)a.base.Q + j * pieces;
#pragma unroll
    for (int v = 0; v < V; v++) {
        const int c = sub + G * v;
        r.q[v] = (present && c < pieces) ? __ldcg(qj + c) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    r.bj = present ? __ldcg(a.base.item_bias + j * LAC_MF_BIAS_STRIDE) : 0.0f;
    const int K = a.K;
    const int32_t *nb = a.nbr + j * K;
    float *wc = a.WC + (present ? wc_row_of(a, j) : 0) * 2 * K;
    r.wc = wc;
#pragma unroll
    for (int s = 0; s < KW; s++) {
        const int k = sub + G * s;
        const bool in = present && k < K;
        r.nb[s] = in ? __ldg(nb + k) : -1;
        r.w[s] = in ? __ldcg(wc + k) : 0.0f;
        r.c[s] = in ? __ldcg(wc + K + k) : 0.0f;
        if (MASK) {
            const bool rated = in && ((m >> k) & 1u);
            r.rv[s] = rated ? __ldg(a.mvals + off + __popc(m & ((1u << k) - 1u))) : 0.0f;
            r.bh[s] = rated ? __ldg(a.slot_bhat + j * K + k) : 0.0f;
        }
    }
    r.m = present ? m : 0u;
}

template <int G, int V, int KW, bool MASK>
static __global__ void __launch_bounds__(32 * LAC_MF_WARPS_PER_BLOCK) nbr_epoch(lac_mf_cuda_nbr_args a)
{
    constexpr int GROUPS_PER_WARP = 32 / G;
    const int lane = threadIdx.x & 31, sub = lane & (G - 1);
    const int64_t group =
        ((int64_t)blockIdx.x * LAC_MF_WARPS_PER_BLOCK + (threadIdx.x >> 5)) * GROUPS_PER_WARP + lane / G;
    const lac_mf_cuda_epoch_args &b = a.base;
    const int pieces = b.stride >> 2, K = a.K;
    const int32_t *code = b.code + group * b.steps;
    const float *rating = b.rating + group * b.steps;
    const int64_t steps = b.steps;
    const float keep_u = 1.0f - a.gu * a.lu, keep_v = 1.0f - a.gv * a.lv;
    const float keep_b = 1.0f - a.gb * a.lb, keep_bh = 1.0f - a.gbh * a.lbh;
    const float keep_w = 1.0f - a.gw * a.lw, keep_c = 1.0f - a.gc * a.lc;

    float4 p[V], p0[V];
#pragma unroll
    for (int v = 0; v < V; v++) p[v] = p0[v] = make_float4(0.f, 0.f, 0.f, 0.f);
    float bu = 0.0f, bu0 = 0.0f, weight = 1.0f, sse = 0.0f, held = 0.0f;
    int64_t user = -1, next_run = b.group_first_run[group];
    const int32_t *items = NULL;
    const float *vals = NULL;
    int len = 0;

    const uint32_t *cmask = MASK ? a.mask + group * b.steps : NULL, *cmoff = MASK ? a.moff + group * b.steps : NULL;

    int32_t c[LAC_MF_CODE_AHEAD];
    float r[LAC_MF_CODE_AHEAD];
    uint32_t mk[LAC_MF_CODE_AHEAD], mo[LAC_MF_CODE_AHEAD];
#pragma unroll
    for (int d = 0; d < LAC_MF_CODE_AHEAD; d++) {
        c[d] = __ldg(code + d);
        r[d] = __ldg(rating + d);
        mk[d] = MASK ? __ldg(cmask + d) : 0u;
        mo[d] = MASK ? __ldg(cmoff + d) : 0u;
    }
    nbr_row<G, V, KW> cur, nxt;
    load_item<G, V, KW, MASK>(nxt, a, c[0], mk[0], mo[0], sub, pieces);

    for (int64_t t0 = 0; t0 < steps; t0 += LAC_MF_CODE_AHEAD) {
#pragma unroll
        for (int d = 0; d < LAC_MF_CODE_AHEAD; d++) {
            const int32_t cd = c[d];
            const float rd = r[d];
            cur = nxt;
            const int64_t t = t0 + d;
            /* the next step's item row, a step ahead */
            if (t + 1 < steps) {
                const int e = (d + 1) % LAC_MF_CODE_AHEAD;
                load_item<G, V, KW, MASK>(nxt, a, c[e], mk[e], mo[e], sub, pieces);
            }
            if (t + LAC_MF_CODE_AHEAD < steps) {
                c[d] = __ldg(code + t + LAC_MF_CODE_AHEAD);
                r[d] = __ldg(rating + t + LAC_MF_CODE_AHEAD);
                if (MASK) {
                    mk[d] = __ldg(cmask + t + LAC_MF_CODE_AHEAD);
                    mo[d] = __ldg(cmoff + t + LAC_MF_CODE_AHEAD);
                }
            }
            /* padding (cd < 0) still takes part in the shuffles, as no update */
            if (cd >= 0 && (cd & LAC_MF_RUN_START)) {
                if (user >= 0) nbr_finish_run<G, V>(b, user, weight, p, p0, bu, bu0, sub, pieces);
                user = b.run_user[next_run];
                weight = b.run_weight[next_run];
                next_run++;
                const float4 *pu = (const float4 *)(b.P + user * b.stride);
#pragma unroll
                for (int v = 0; v < V; v++) {
                    const int pc = sub + G * v;
                    p[v] = p0[v] = pc < pieces ? __ldcg(pu + pc) : make_float4(0.f, 0.f, 0.f, 0.f);
                }
                bu = bu0 = __ldcg(b.user_bias + user);
                if (!MASK) {
                    const int64_t lo = __ldg(a.rated_start + user);
                    items = a.rated_items + lo;
                    vals = a.rated_vals + lo;
                    len = (int)(__ldg(a.rated_start + user + 1) - lo);
                }
            }
            float dot = 0.0f;
#pragma unroll
            for (int v = 0; v < V; v++) {
                const float4 x = p[v], y = cur.q[v];
                dot = fmaf(x.w, y.w, fmaf(x.z, y.z, fmaf(x.y, y.y, fmaf(x.x, y.x, dot))));
            }
            int pos[KW];
            if (MASK) {
#pragma unroll
                for (int s = 0; s < KW; s++) pos[s] = ((cur.m >> (sub + G * s)) & 1u) ? 0 : -1;
            } else {
                find_items<KW>(items, len, cur.nb, pos);
            }
            const float base = b.mean + bu;
            float resid[KW], sr = 0.0f, sc = 0.0f, nr = 0.0f, nk = 0.0f;
#pragma unroll
            for (int s = 0; s < KW; s++) {
                resid[s] = 0.0f;
                if (pos[s] >= 0) {
                    resid[s] = MASK ? cur.rv[s] - base - cur.bh[s]
                                    : __ldg(vals + pos[s]) - base - __ldg(a.bhat + cur.nb[s]);
                    sr = fmaf(resid[s], cur.w[s], sr);
                    nr += 1.0f;
                } else if (cur.nb[s] >= 0) {
                    sc += cur.c[s];
                }
                nk += cur.nb[s] >= 0 ? 1.0f : 0.0f;
            }
            float rr, rc;
            if (MASK) {   /* the counts from the mask and a ballot: the group's one sum takes the weighted terms */
                nr = (float)__popc(cur.m);
                const float ncount = (float)group_count<G, KW>(cur.nb, lane) - nr;
                rr = nr > 0.0f ? rsqrtf(nr) : 0.0f;
                rc = ncount > 0.0f ? rsqrtf(ncount) : 0.0f;
                dot = group_sum<G>(fmaf(sr, rr, fmaf(sc, rc, dot)));
            } else {
                dot = group_sum<G>(dot);
                sr = group_sum<G>(sr);
                sc = group_sum<G>(sc);
                nr = group_sum<G>(nr);
                const float ncount = group_sum<G>(nk) - nr;
                rr = nr > 0.0f ? 1.0f / sqrtf(nr) : 0.0f;
                rc = ncount > 0.0f ? 1.0f / sqrtf(ncount) : 0.0f;
            }
            if (cd < 0) continue;   /* the same for the group's lanes */
            const float x = MASK ? base + cur.bj + dot : base + cur.bj + dot + sr * rr + sc * rc;
            float e, term;
            if (!nbr_error(a.implicit, rd, x, held, e, term)) continue;   /* the same for the group's lanes */
            if (sub == 0) sse = a.implicit ? sse + term : fmaf(e, e, sse);
            const int64_t j = cd & LAC_MF_ITEM_MASK;
            bu = fmaf(keep_b, bu, a.gb * e);
            if (sub == 0) b.item_bias[j * LAC_MF_BIAS_STRIDE] = fmaf(keep_bh, cur.bj, a.gbh * e);
            float4 *qj = (float4 *)b.Q + j * pieces;
            const float su = a.gu * e, sv = a.gv * e;
#pragma unroll
            for (int v = 0; v < V; v++) {
                const int pc = sub + G * v;
                const float4 pf = p[v], qf = cur.q[v];
                p[v] = nbr_step4(keep_u, pf, su, qf);
                if (pc < pieces) __stcg(qj + pc, nbr_step4(keep_v, qf, sv, pf));
            }
            float *wc = cur.wc;
            const float ew = a.gw * e * rr, ec = a.gc * e * rc;
#pragma unroll
            for (int s = 0; s < KW; s++) {
                const int k = sub + G * s;
                if (pos[s] >= 0) __stcg(wc + k, fmaf(keep_w, cur.w[s], ew * resid[s]));
                else if (cur.nb[s] >= 0) __stcg(wc + K + k, fmaf(keep_c, cur.c[s], ec));
            }
        }
    }
    if (user >= 0) nbr_finish_run<G, V>(b, user, weight, p, p0, bu, bu0, sub, pieces);
    lac_mf_warp_add(b.sse, sse, lane);
}

/* The general path: a warp per group, u_i and b_i in global memory (the runs
 * of a split row share them, Hogwild), lanes striding over the row and over
 * the K neighbours (searched again for the update). */
static __global__ void __launch_bounds__(32 * LAC_MF_WARPS_PER_BLOCK) nbr_epoch_general(lac_mf_cuda_nbr_args a)
{
    const int lane = threadIdx.x & 31;
    const int64_t group = (int64_t)blockIdx.x * LAC_MF_WARPS_PER_BLOCK + (threadIdx.x >> 5);
    const lac_mf_cuda_epoch_args &b = a.base;
    const int32_t *code = b.code + group * b.steps;
    const float *rating = b.rating + group * b.steps;
    const int stride = b.stride, K = a.K;
    float sse = 0.0f, held = 0.0f;
    int64_t user = -1, next_run = b.group_first_run[group];
    float *pu = NULL;
    const int32_t *items = NULL;
    const float *vals = NULL;
    int len = 0;
    for (int64_t t = 0; t < b.steps; t++) {
        const int32_t cd = code[t];
        if (cd < 0) break;   /* padding: the stream has ended */
        if (cd & LAC_MF_RUN_START) {
            user = b.run_user[next_run];
            next_run++;
            pu = b.P + user * stride;
            const int64_t lo = a.rated_start[user];
            items = a.rated_items + lo;
            vals = a.rated_vals + lo;
            len = (int)(a.rated_start[user + 1] - lo);
        }
        const int64_t j = cd & LAC_MF_ITEM_MASK;
        float *qj = b.Q + j * stride, *w = a.WC + wc_row_of(a, j) * 2 * K, *cc = w + K;
        const int32_t *nb = a.nbr + j * K;
        float part = 0.0f;
        for (int f = lane; f < stride; f += 32) part = fmaf(__ldcg(pu + f), __ldcg(qj + f), part);
        const float dot = lac_mf_warp_sum(part);
        const float bu = __ldcg(b.user_bias + user), bj = __ldcg(b.item_bias + j * LAC_MF_BIAS_STRIDE);
        const float base = b.mean + bu;
        float sr = 0.0f, sc = 0.0f, nr = 0.0f;
        for (int k = lane; k < K; k += 32) {
            const int32_t n = nb[k];
            const int at = find_item(items, len, n);
            if (at >= 0) {
                sr = fmaf(vals[at] - base - a.bhat[n], __ldcg(w + k), sr);
                nr += 1.0f;
            } else {
                sc += __ldcg(cc + k);
            }
        }
        sr = lac_mf_warp_sum(sr);
        sc = lac_mf_warp_sum(sc);
        nr = lac_mf_warp_sum(nr);
        const float ncount = (float)K - nr;
        const float rr = nr > 0.0f ? 1.0f / sqrtf(nr) : 0.0f, rc = ncount > 0.0f ? 1.0f / sqrtf(ncount) : 0.0f;
        const float x = base + bj + dot + sr * rr + sc * rc;
        float e, term;
        if (!nbr_error(a.implicit, rating[t], x, held, e, term)) continue;
        sse = a.implicit ? sse + term : fmaf(e, e, sse);
        __syncwarp();
        if (lane == 0) {
            b.user_bias[user] = bu + a.gb * (e - a.lb * bu);
            b.item_bias[j * LAC_MF_BIAS_STRIDE] = bj + a.gbh * (e - a.lbh * bj);
        }
        for (int f = lane; f < stride; f += 32) {
            const float pf = __ldcg(pu + f), qf = __ldcg(qj + f);
            pu[f] = pf + a.gu * (e * qf - a.lu * pf);
            qj[f] = qf + a.gv * (e * pf - a.lv * qf);
        }
        const float er = e * rr, ec = e * rc;
        for (int k = lane; k < K; k += 32) {
            const int32_t n = nb[k];
            const int at = find_item(items, len, n);
            if (at >= 0) {
                const float x = __ldcg(w + k);
                w[k] = x + a.gw * (er * (vals[at] - base - a.bhat[n]) - a.lw * x);
            } else {
                const float x = __ldcg(cc + k);
                cc[k] = x + a.gc * (ec - a.lc * x);
            }
        }
        __syncwarp();
    }
    if (lane == 0) atomicAdd(b.sse + group % LAC_MF_SSE_SLOTS, (double)sse);
}

static __global__ void slot_bhat(const float *__restrict__ item_bias, const int32_t *__restrict__ nbr, int64_t n,
                                 float *__restrict__ out)
{
    const int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x < n) {
        const int32_t j = nbr[x];
        out[x] = j >= 0 ? item_bias[(int64_t)j * LAC_MF_BIAS_STRIDE] : 0.0f;
    }
}

static __global__ void copy_bhat(const float *__restrict__ item_bias, int64_t n, float *__restrict__ bhat)
{
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n) bhat[j] = item_bias[j * LAC_MF_BIAS_STRIDE];
}

/* Validation: a warp per rating, eq. (1) as lac_mf_nbr_term with the current
 * biases, clamped; -1 marks a user or item the model has not seen. MASK:
 * R^K(i;j) from the pairs' masks (vm), else searched in R(i). */
template <bool MASK>
static __global__ void nbr_validation_sse(lac_mf_cuda_nbr_args a, const int32_t *__restrict__ vu,
                                          const int32_t *__restrict__ vi, const float *__restrict__ vr, int64_t count,
                                          int k, float lo, float hi, lac_mf_cuda_nbr_masks vm,
                                          double *__restrict__ sse_out)
{
    const int lane = threadIdx.x & 31;
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    const lac_mf_cuda_epoch_args &b = a.base;
    const int stride = b.stride, K = a.K;
    float sse = 0.0f;
    for (int64_t i = warp; i < count; i += warps) {
        const int32_t u = vu[i], j = vi[i];
        float part = 0.0f, sr = 0.0f, sc = 0.0f, nr = 0.0f;
        float bu = u >= 0 ? b.user_bias[u] : 0.0f;
        if (u >= 0 && j >= 0) {
            for (int f = lane; f < k; f += 32)
                part = fmaf(b.P[(int64_t)u * stride + f], b.Q[(int64_t)j * stride + f], part);
            const float base = b.mean + bu;
            if (MASK) {   /* K <= 32: a slot a lane */
                const uint32_t m = __ldg(vm.mask + i);
                if (lane < K) {
                    if ((m >> lane) & 1u) {
                        const int32_t n = a.nbr[(int64_t)j * K + lane];
                        const float rv = __ldg(vm.mvals + __ldg(vm.moff + i) + __popc(m & ((1u << lane) - 1u)));
                        sr = rv - base - b.item_bias[(int64_t)n * LAC_MF_BIAS_STRIDE];
                        sr *= a.WC[(int64_t)j * 2 * K + lane];
                    } else {
                        sc = a.WC[(int64_t)j * 2 * K + K + lane];
                    }
                }
                nr = lane == 0 ? (float)__popc(m) : 0.0f;
            } else {
                const int64_t lo_u = a.rated_start[u];
                const int32_t *items = a.rated_items + lo_u;
                const int len = (int)(a.rated_start[u + 1] - lo_u);
                for (int x = lane; x < K; x += 32) {
                    const int32_t n = a.nbr[(int64_t)j * K + x];
                    const int at = find_item(items, len, n);
                    if (at >= 0) {
                        sr = fmaf(a.rated_vals[lo_u + at] - base - b.item_bias[(int64_t)n * LAC_MF_BIAS_STRIDE],
                                  a.WC[(int64_t)j * 2 * K + x], sr);
                        nr += 1.0f;
                    } else {
                        sc += a.WC[(int64_t)j * 2 * K + K + x];
                    }
                }
            }
        }
        part = lac_mf_warp_sum(part);
        float s = b.mean + part + bu + (j >= 0 ? b.item_bias[(int64_t)j * LAC_MF_BIAS_STRIDE] : 0.0f);
        if (u >= 0 && j >= 0) {
            sr = lac_mf_warp_sum(sr);
            sc = lac_mf_warp_sum(sc);
            nr = lac_mf_warp_sum(nr);
            const float nc = (float)K - nr;
            if (nr > 0.0f) s += sr / sqrtf(nr);
            if (nc > 0.0f) s += sc / sqrtf(nc);
        }
        s = fminf(fmaxf(s, lo), hi);
        const float e = vr[i] - s;
        sse = fmaf(e, e, sse);
    }
    if (lane == 0) atomicAdd(sse_out + (warp & (LAC_MF_SSE_SLOTS - 1)), (double)sse);
}

/* The masked kernel only where the mask's 32 bits hold G x KW slots (the
 * other cases name an instantiation that exists and are never returned). */
template <int G, int V, bool MASK>
static lac_mf_cuda_nbr_fn by_slots(int kw)
{
    switch (kw) {
    case 1: return nbr_epoch<G, V, 1, MASK>;
    case 2: return MASK && G > 16 ? NULL : nbr_epoch<G, V, (MASK && G > 16 ? 1 : 2), MASK>;
    case 4: return MASK && G > 8 ? NULL : nbr_epoch<G, V, (MASK && G > 8 ? 1 : 4), MASK>;
    case 8: return MASK ? NULL : nbr_epoch<G, V, (MASK ? 1 : 8), MASK>;
    default: return NULL;
    }
}

template <int G>
static lac_mf_cuda_nbr_fn by_rows(int pieces, int kw, bool mask)
{
    if (pieces <= G) return mask ? by_slots<G, 1, true>(kw) : by_slots<G, 1, false>(kw);
    return mask ? by_slots<G, 2, true>(kw) : by_slots<G, 2, false>(kw);
}

/* G lanes a group, each one or two float4 of u_i (rows up to 2 G float4)
 * and K slots rounded up to 1, 2, 4 or 8 a lane (K <= 8 G); otherwise the
 * general path. Searching: G = 8 for rows up to 16 float4 (F <= 64
 * padded), 16 up to 32, 32 up to 64. The masked kernel (K <= 32) takes 32
 * lanes, a slot each: with the lookups gone a step's time is mostly its
 * chain of dependent instructions, which fewer slots a lane shorten
 * (bench/RESULTS.md). lanes (8, 16 or 32; 0: the default) overrides where
 * the row fits. */
lac_mf_cuda_nbr_kernel lac_mf_cuda_nbr_choose(int pieces, int K, int masked, int lanes)
{
    lac_mf_cuda_nbr_kernel k;
    k.fn = NULL;
    const bool mask = masked && K <= 32;
    k.lanes = mask ? 32 : pieces <= 16 ? 8 : pieces <= 32 ? 16 : 32;
    if ((lanes == 8 || lanes == 16 || lanes == 32) && pieces <= 2 * lanes) k.lanes = lanes;
    int kw = 1;
    while (kw * k.lanes < K) kw *= 2;
    if (pieces <= 2 * k.lanes && kw <= 8) {
        if (k.lanes == 8) k.fn = by_rows<8>(pieces, kw, mask);
        else if (k.lanes == 16) k.fn = by_rows<16>(pieces, kw, mask);
        else k.fn = by_rows<32>(pieces, kw, mask);
    }
    k.masked = mask && k.fn;
    if (!k.fn) {
        k.lanes = 32;
        k.fn = nbr_epoch_general;
        k.groups_per_block = LAC_MF_WARPS_PER_BLOCK;
        k.masked = 0;
        return k;
    }
    k.groups_per_block = LAC_MF_WARPS_PER_BLOCK * (32 / k.lanes);
    return k;
}

lac_status lac_mf_cuda_nbr_occupancy(lac_ctx_t ctx, const lac_mf_cuda_nbr_kernel *k, int *blocks_per_sm)
{
    LAC_CUDA_CHECK(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, k->fn,
                                                                      32 * LAC_MF_WARPS_PER_BLOCK, 0));
    return LAC_SUCCESS;
}

lac_status lac_mf_cuda_nbr_launch_epoch(lac_ctx_t ctx, const lac_mf_cuda_nbr_kernel *k, unsigned blocks,
                                        const lac_mf_cuda_nbr_args *a)
{
    k->fn<<<blocks, 32 * LAC_MF_WARPS_PER_BLOCK, 0, ctx->cuda->stream>>>(*a);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

lac_status lac_mf_cuda_nbr_launch_bhat(lac_ctx_t ctx, const float *item_bias, int64_t num_items, float *bhat)
{
    if (num_items == 0) return LAC_SUCCESS;
    copy_bhat<<<(unsigned)((num_items + 255) / 256), 256, 0, ctx->cuda->stream>>>(item_bias, num_items, bhat);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

lac_status lac_mf_cuda_nbr_launch_slot_bhat(lac_ctx_t ctx, const float *item_bias, const int32_t *nbr, int64_t cells,
                                            float *out)
{
    if (cells == 0) return LAC_SUCCESS;
    slot_bhat<<<(unsigned)((cells + 255) / 256), 256, 0, ctx->cuda->stream>>>(item_bias, nbr, cells, out);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}

lac_status lac_mf_cuda_nbr_launch_validation(lac_ctx_t ctx, const lac_mf_cuda_nbr_args *a, const int32_t *user,
                                             const int32_t *item, const float *rating, int64_t count, int k,
                                             float lo, float hi, const lac_mf_cuda_nbr_masks *vm, double *sse)
{
    int64_t warps = count < 65536 ? count : 65536;
    unsigned blocks = (unsigned)((warps + 7) / 8);
    if (vm && vm->mask)
        nbr_validation_sse<true><<<blocks, 256, 0, ctx->cuda->stream>>>(*a, user, item, rating, count, k, lo, hi, *vm,
                                                                         sse);
    else
        nbr_validation_sse<false><<<blocks, 256, 0, ctx->cuda->stream>>>(*a, user, item, rating, count, k, lo, hi,
                                                                          lac_mf_cuda_nbr_masks(), sse);
    LAC_CUDA_CHECK_LAUNCH(ctx);
    return LAC_SUCCESS;
}
