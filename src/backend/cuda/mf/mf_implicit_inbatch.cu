/* In-batch negatives for implicit feedback on CUDA
 * (lac_mf_cuda_implicit_inbatch_choose, mf_implicit_cuda.h): the epoch of
 * cross-entropy whose negatives are the items the other groups of the warp
 * hold at the same step.
 *
 * Why: a drawn negative's row crosses L2 twice (loaded, stepped back), so
 * with 4 of them an interaction moves five rows where an explicit epoch
 * moves two, and no layout of the draws measured brought the epoch under 6x
 * an explicit one. Here the warp's groups each load their positive's row,
 * as the explicit kernel does, and put it in shared memory with their u_i;
 * every group scores its user against the rows of the next `negatives`
 * groups (at most the warp's groups - 1), and each row takes the steps of
 * its positive and of the groups that used it, summed, in one store. Each
 * row thus crosses L2 once a step, whatever the negatives.
 *
 * Such negatives come in proportion to the items' interactions (the other
 * streams' positives), so each weighs the call's law over that one times the
 * negatives asked over those met (lac_mf_inbatch_weights): the loss's
 * negative term is then the drawn negatives' in expectation (measured, HR@10
 * against drawn negatives: ego-Facebook 1.5-6.4% under unweighted, 3-4% over
 * weighted; the MovieLens shapes 0-1.5% under unweighted, 2-4% under
 * weighted; bench/RESULTS.md). The streams are fixed by the schedule, so the
 * groups that share a warp change every epoch (an affine map of the groups,
 * lac_mf_cuda_implicit_args.perm_*): kept the same, the same users' items
 * would be one another's negatives every epoch (a numpy model of this
 * schedule, bench/implicit_inbatch_model.py, lost a fifth of HR@10 so at l2
 * 0.01). A negative the user has seen is passed over where it is among the
 * most interacted items (a bit a user and item, in L2; every item where they
 * fit, LAC_MF_INBATCH_SEEN_*), as is the user's own positive item (measured:
 * without the test HR@10 fell 4-5% on the MovieLens-100k shape, with it
 * 0-2%). l2 reaches an item row once for every group that used it, valid or
 * not, as a drawn negative's does for every draw. */
#include "backend/cuda/mf/mf_implicit_cuda.h"

#include <string.h>

/* What a warp's groups share at a step: their rows and u_i, the steps
 * (lr x error) of every (user's group, item's group) pair, the rows' biases
 * and items (-1: no cell). */
template <int GPW, int PIECES>
struct inbatch_shared {
    float4 q[GPW][PIECES], p[GPW][PIECES];
    float step[GPW][GPW];
    float bias[GPW], weight[GPW];
    int32_t item[GPW], rank[GPW];
};

/* s x + y, four floats, fused. */
static __device__ __forceinline__ float4 fma4(float s, float4 x, float4 y)
{
    return make_float4(fmaf(s, x.x, y.x), fmaf(s, x.y, y.y), fmaf(s, x.z, y.z), fmaf(s, x.w, y.w));
}

/* -log sigmoid(x) by the fast exp and log: the loss is reported, no step
 * depends on it. */
static __device__ __forceinline__ float fast_log_loss(float x)
{
    return fmaxf(-x, 0.0f) + __logf(1.0f + __expf(-fabsf(x)));
}

/* s^n for n < 16 from s, s^2, s^4, s^8. */
static __device__ __forceinline__ float power(const float (&s)[4], int n)
{
    return ((n & 1) ? s[0] : 1.0f) * ((n & 2) ? s[1] : 1.0f) * ((n & 4) ? s[2] : 1.0f) * ((n & 8) ? s[3] : 1.0f);
}

/* A lane's constants for the steps: which groups' rows its group scores and
 * whose u_i score its group's row (lane bits: group h at bit h x G), and the
 * shrinks' powers. */
struct inbatch_lane {
    unsigned scores, scored_by;
    float shrink[4], shrink_b[4];
};

/* One step of the warp: group `me` (on: it has a cell, of row j, weight w,
 * the row's pieces q and bias bq, item it, weight as a negative nw) scores
 * u_i against every group's row, takes its positive's error and its
 * negatives' (the groups of `scores` but itself: live, another item, not
 * seen by the user where SEEN and the item is ranked; each weighted by
 * its nw), then steps u_i (b_i) by the sum,
 * and its row (bias) by its positive's step and every step taken with it,
 * each shrunk once for every live row or user it met. live: the ballot of
 * `on`. Each lane works out the errors of the rows h = sub + G i only, so
 * that the warp issues them once. */
template <int G, int V, bool SEEN>
static __device__ __forceinline__ void inbatch_step(const lac_mf_cuda_epoch_args &a, inbatch_shared<32 / G, G * V> &sh,
                                                    const inbatch_lane &ln, int me, int sub, bool on, unsigned live,
                                                    int32_t j, float w, const float4 (&q)[V], float bq, int32_t it,
                                                    int32_t rank, float nw, const uint32_t *seen, float4 (&p)[V],
                                                    float &bu, float &loss)
{
    constexpr int GPW = 32 / G, PER = (GPW + G - 1) / G;
#pragma unroll
    for (int v = 0; v < V; v++) {
        sh.q[me][sub + G * v] = q[v];
        sh.p[me][sub + G * v] = p[v];
    }
    if (sub == 0) {
        sh.bias[me] = bq;
        sh.weight[me] = nw;
        sh.item[me] = on ? it : -1;
        sh.rank[me] = rank;
    }
    __syncwarp();
    /* SEEN: the user's bits of the lane's negatives, loaded before the dot
     * products so that they wait on the load */
    int32_t its[PER];
    uint32_t word[PER];
    int bit[PER];
#pragma unroll
    for (int i = 0; i < PER; i++) {
        const int h = sub + G * i;
        its[i] = h < GPW ? sh.item[h] : -1;
        const int32_t r = SEEN && on && h < GPW && h != me ? sh.rank[h] : -1;
        bit[i] = r & 31;
        word[i] = r >= 0 ? __ldg(seen + (r >> 5)) : 0u;
    }
    /* the group sums' shuffles run in every lane: the warp is in step */
    float x[GPW];
#pragma unroll
    for (int h = 0; h < GPW; h++) {
        float d = 0.0f;
#pragma unroll
        for (int v = 0; v < V; v++) d = dot4(p[v], sh.q[h][sub + G * v], d);
        x[h] = group_sum<G>(d);
    }
    const float base = a.mean + bu;
#pragma unroll
    for (int i = 0; i < PER; i++) {
        const int h = sub + G * i;
        if (h >= GPW) break;
        float xh = x[0];
#pragma unroll
        for (int y = 1; y < GPW; y++) xh = h == y ? x[y] : xh;
        const float s = base + sh.bias[h] + xh;
        float e = 0.0f;
        if (on && h == me) {
            e = w * (1.0f - lac_mf_sigmoid(s));
            loss += w * fast_log_loss(s);
        } else if (on && ((ln.scores >> (h * G)) & 1u) && its[i] >= 0 && its[i] != it && !((word[i] >> bit[i]) & 1u)) {
            e = -sh.weight[h] * lac_mf_sigmoid(s);
            loss += sh.weight[h] * fast_log_loss(-s);
        }
        sh.step[me][h] = a.lr * e;
    }
    __syncwarp();
    float4 acc[V], dq[V];
#pragma unroll
    for (int v = 0; v < V; v++) acc[v] = dq[v] = make_float4(0.f, 0.f, 0.f, 0.f);
    float bstep = 0.0f, db = 0.0f;
#pragma unroll
    for (int h = 0; h < GPW; h++) {
        const float su = sh.step[me][h], sv = sh.step[h][me];
#pragma unroll
        for (int v = 0; v < V; v++) {
            acc[v] = fma4(su, sh.q[h][sub + G * v], acc[v]);
            dq[v] = fma4(sv, sh.p[h][sub + G * v], dq[v]);
        }
        bstep += su, db += sv;
    }
    if (on) {
        const int met = __popc(ln.scores & live), used = __popc(ln.scored_by & live);
        const float keep = power(ln.shrink, met), keep_b = power(ln.shrink_b, met);
#pragma unroll
        for (int v = 0; v < V; v++) p[v] = axpby4(keep, p[v], 1.0f, acc[v]);
        if (a.use_bias) bu = fmaf(keep_b, bu, bstep);
        float4 *qj = (float4 *)a.Q + (int64_t)j * (a.stride >> 2);
        const float row_keep = power(ln.shrink, used);
#pragma unroll
        for (int v = 0; v < V; v++) __stcg(qj + sub + G * v, axpby4(row_keep, q[v], 1.0f, dq[v]));
        if (a.use_bias && sub == 0) a.item_bias[(int64_t)j * LAC_MF_BIAS_STRIDE] = fmaf(power(ln.shrink_b, used), bq, db);
    }
    __syncwarp();   /* the shared rows are read: the next step may write them */
}

/* Cell cd's row pieces, bias, item and (SEEN) rank among the most
 * interacted items: zeros and -1 where present is false. */
template <int G, int V, bool SEEN>
static __device__ __forceinline__ void load_cell(const lac_mf_cuda_implicit_args &ia, int32_t cd, bool present,
                                                 int sub, int pieces, float4 (&q)[V], float &bq, int32_t &it,
                                                 int32_t &rank, float &nw)
{
    const int32_t j = cd & LAC_MF_ITEM_MASK;
    load_row<G, V, true>(q, (const float4 *)ia.base.Q + (int64_t)j * pieces, sub, pieces, present);
    bq = (present && ia.base.use_bias) ? __ldcg(ia.base.item_bias + (int64_t)j * LAC_MF_BIAS_STRIDE) : 0.0f;
    it = present ? __ldg(ia.draws.row_item + j) : -1;
    rank = SEEN && present ? __ldg(ia.row_rank + j) : -1;
    nw = present && ia.row_weight ? __ldg(ia.row_weight + j) : 1.0f;
}

/* One epoch: G lanes a group, V float4 pieces a lane (rows of exactly G x V
 * pieces), 32 / G groups a warp in step; each cell's row, bias and item
 * loaded a step ahead (a row another group of the warp steps meanwhile is
 * read before that step, as the explicit kernel's rows loaded ahead). */
template <int G, int V, bool SEEN>
static __global__ void __launch_bounds__(32 * LAC_MF_WARPS_PER_BLOCK) inbatch_epoch(lac_mf_cuda_implicit_args ia)
{
    constexpr int GPW = 32 / G;
    const lac_mf_cuda_epoch_args &a = ia.base;
    __shared__ inbatch_shared<GPW, G * V> shared[LAC_MF_WARPS_PER_BLOCK];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, sub = lane & (G - 1), me = lane / G;
    const uint64_t groups = (uint64_t)gridDim.x * LAC_MF_WARPS_PER_BLOCK * GPW;
    const uint64_t slot = ((uint64_t)blockIdx.x * LAC_MF_WARPS_PER_BLOCK + warp) * GPW + me;
    const int64_t group = (int64_t)((ia.perm_a * slot + ia.perm_b) % groups);
    const int negs = lac_mf_cuda_inbatch_met(ia.negatives, G), pieces = a.stride >> 2;
    inbatch_lane ln;
    ln.scores = ln.scored_by = 0u;
    for (int r = 0; r <= negs; r++) {   /* the group itself and the next negs */
        ln.scores |= 1u << (((me + r) % GPW) * G);
        ln.scored_by |= 1u << (((me - r + GPW) % GPW) * G);
    }
    ln.shrink[0] = a.shrink, ln.shrink_b[0] = a.shrink_b;
    for (int b = 1; b < 4; b++)
        ln.shrink[b] = ln.shrink[b - 1] * ln.shrink[b - 1], ln.shrink_b[b] = ln.shrink_b[b - 1] * ln.shrink_b[b - 1];
    const int32_t *code = a.code + group * a.steps;
    const float *weight_of = a.rating + group * a.steps;
    float4 p[V], p0[V];
#pragma unroll
    for (int v = 0; v < V; v++) p[v] = p0[v] = make_float4(0.f, 0.f, 0.f, 0.f);
    float bu = 0.0f, bu0 = 0.0f, share = 1.0f, loss = 0.0f;
    int64_t user = -1, next_run = a.group_first_run[group];
    const uint32_t *seen = NULL;   /* SEEN: the run's user's bits */
    int32_t cd = a.steps > 0 ? __ldg(code) : LAC_MF_PAD;
    float w = a.steps > 0 ? __ldg(weight_of) : 0.0f;
    float4 q[V];
    float bq;
    int32_t it, rank;
    float nw;
    load_cell<G, V, SEEN>(ia, cd, cd >= 0, sub, pieces, q, bq, it, rank, nw);
    for (int64_t t = 0; t < a.steps; t++) {
        const bool on = cd >= 0;   /* padding ends a stream: cd stays LAC_MF_PAD after it */
        const unsigned live = __ballot_sync(0xffffffffu, on);
        if (!live) break;
        const int32_t c_now = cd, it_now = it, rank_now = rank;
        const float w_now = w, bq_now = bq, nw_now = nw;
        float4 q_now[V];
#pragma unroll
        for (int v = 0; v < V; v++) q_now[v] = q[v];
        if (on) {   /* the next cell, its row, bias and item */
            cd = t + 1 < a.steps ? __ldg(code + t + 1) : LAC_MF_PAD;
            if (cd >= 0) {
                w = __ldg(weight_of + t + 1);
                load_cell<G, V, SEEN>(ia, cd, true, sub, pieces, q, bq, it, rank, nw);
            }
        }
        if (on && (c_now & LAC_MF_RUN_START)) {
            start_run<G, V, true>(a, user, share, next_run, p, p0, bu, bu0, sub, pieces);
            if (SEEN) seen = ia.seen_bits + user * ia.seen_words;
        }
        inbatch_step<G, V, SEEN>(a, shared[warp], ln, me, sub, on, live, c_now & LAC_MF_ITEM_MASK, w_now, q_now, bq_now,
                                 it_now, rank_now, nw_now, seen, p, bu, loss);
    }
    if (user >= 0) finish_run<G, V, true>(a, user, share, p, p0, bu, bu0, sub);
    lac_mf_warp_add(a.sse, loss, lane);
}

template <int G, bool SEEN>
static lac_mf_cuda_implicit_fn inbatch_fn(int v)
{
    switch (v) {
    case 1: return inbatch_epoch<G, 1, SEEN>;
    case 2: return inbatch_epoch<G, 2, SEEN>;
    case 3: return inbatch_epoch<G, 3, SEEN>;
    case 4: return inbatch_epoch<G, 4, SEEN>;
    case 5: return inbatch_epoch<G, 5, SEEN>;
    case 6: return inbatch_epoch<G, 6, SEEN>;
    case 7: return inbatch_epoch<G, 7, SEEN>;
    case 8: return inbatch_epoch<G, 8, SEEN>;
    default: return NULL;
    }
}

lac_mf_cuda_implicit_kernel lac_mf_cuda_implicit_inbatch_choose(int pieces, int lanes, int seen)
{
    lac_mf_cuda_implicit_kernel k;
    memset(&k, 0, sizeof k);
    /* 8 lanes (4 groups a warp, 3 negatives) where they divide the row: a
     * step of 4 lanes issues more than twice the instructions (measured at k
     * = 32: 1.61 against 1.19 ms an epoch) */
    if (lanes == 0) lanes = pieces % 8 == 0 ? 8 : 4;
    if ((lanes != 4 && lanes != 8) || pieces % lanes || pieces / lanes > 8) return k;
    k.lanes = lanes;
    k.groups_per_block = LAC_MF_WARPS_PER_BLOCK * (32 / lanes);
    k.inbatch = seen ? 2 : 1;
    k.fn = lanes == 4 ? (seen ? inbatch_fn<4, true>(pieces / 4) : inbatch_fn<4, false>(pieces / 4))
                      : (seen ? inbatch_fn<8, true>(pieces / 8) : inbatch_fn<8, false>(pieces / 8));
    return k;
}

/* An affine map of the groups for this epoch: a (coprime to groups) and b
 * from the seed and the epoch by the draws' rule (mf_backend.h; key
 * INT64_MIN, which no user or pool round takes), so that a warp's groups
 * differ by epoch. */
void lac_mf_cuda_implicit_inbatch_map(uint64_t seed, int epoch, int64_t groups, uint64_t *a, uint64_t *b)
{
    const uint64_t h = lac_mf_draw_seed(seed, epoch, INT64_MIN);
    const uint64_t n = groups > 0 ? (uint64_t)groups : 1;
    *b = h % n;
    uint64_t x = n > 2 ? 1 + (h >> 17) % (n - 1) : 1;
    for (;; x = x + 1 < n ? x + 1 : 1) {   /* the first x from there coprime to n */
        uint64_t u = x, w = n;
        while (w) {
            const uint64_t r = u % w;
            u = w, w = r;
        }
        if (u == 1) break;
    }
    *a = x;
}
