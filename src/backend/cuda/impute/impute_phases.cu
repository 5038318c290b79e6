/* The phase clock (LACUNA_IMPUTE_CUDA_PHASES, a measurement): CUDA events
 * around each phase of every iteration on the context's stream, read once
 * the iteration's last phase has synchronised, and each phase's median
 * logged when the state is released. Host time spent between the phases
 * (the front end's λ, the figures' sums) falls in the whole iteration, not
 * in a phase. Off, nothing is made and every call returns at once. */
#include "backend/cuda/impute/impute_cuda.h"

#include <algorithm>
#include <new>
#include <vector>

namespace {
enum { FIG_GFT, FIG_SVT, FIG_IGFT, FIG_STEP, FIG_ITERATION, FIGURES };
} // namespace

struct lac_phase_clock {
    lac_ctx_t ctx;
    cudaEvent_t ev[LAC_PHASE_MARKS];
    unsigned seen;   /* the marks recorded since this iteration's GFT0 */
    std::vector<float> ms[FIGURES];
};

lac_phase_clock *lac_phase_clock_make(lac_ctx_t ctx)
{
    if (lac_knob_int(ctx, LAC_KNOB_IMPUTE_CUDA_PHASES, 0) == 0) return nullptr;
    lac_phase_clock *c = new (std::nothrow) lac_phase_clock();
    if (!c) return nullptr;
    c->ctx = ctx;
    for (int i = 0; i < LAC_PHASE_MARKS; i++)
        if (cudaEventCreate(&c->ev[i]) != cudaSuccess) {
            for (int j = 0; j < i; j++) cudaEventDestroy(c->ev[j]);
            delete c;
            lac_log(ctx, LAC_LOG_WARN, "impute (cuda): no CUDA events for the phase clock; phases not timed");
            return nullptr;
        }
    return c;
}

void lac_phase_mark(lac_phase_clock *c, int mark, cudaStream_t stream)
{
    if (!c) return;
    if (mark == LAC_PHASE_GFT0) c->seen = 0;
    if (cudaEventRecord(c->ev[mark], stream) == cudaSuccess) c->seen |= 1u << mark;
}

static void add_figure(lac_phase_clock *c, int figure, int from, int to)
{
    float ms;
    if ((c->seen >> from & 1) && (c->seen >> to & 1) && cudaEventElapsedTime(&ms, c->ev[from], c->ev[to]) == cudaSuccess)
        c->ms[figure].push_back(ms);
}

void lac_phase_iteration_end(lac_phase_clock *c)
{
    if (!c || !(c->seen >> LAC_PHASE_IGFT1 & 1)) return;
    if (cudaEventSynchronize(c->ev[LAC_PHASE_IGFT1]) != cudaSuccess) return;
    const bool step = c->seen >> LAC_PHASE_STEP0 & 1;
    add_figure(c, FIG_GFT, LAC_PHASE_GFT0, LAC_PHASE_GFT1);
    add_figure(c, FIG_SVT, LAC_PHASE_SVT0, LAC_PHASE_SVT1);
    add_figure(c, FIG_IGFT, LAC_PHASE_IGFT0, step ? LAC_PHASE_STEP0 : LAC_PHASE_IGFT1);
    if (step) add_figure(c, FIG_STEP, LAC_PHASE_STEP0, LAC_PHASE_IGFT1);
    add_figure(c, FIG_ITERATION, LAC_PHASE_GFT0, LAC_PHASE_IGFT1);
    c->seen = 0;
}

static double median_of(std::vector<float> &v)
{
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * ((double)v[n / 2 - 1] + v[n / 2]);
}

void lac_phase_clock_free(lac_phase_clock *c)
{
    if (!c) return;
    const size_t iterations = c->ms[FIG_ITERATION].size();
    if (iterations > 0) {
        double m[FIGURES];
        for (int f = 0; f < FIGURES; f++) m[f] = median_of(c->ms[f]);
        char step[64];
        if (c->ms[FIG_STEP].empty()) snprintf(step, sizeof step, "imputation step inside the iGFT");
        else snprintf(step, sizeof step, "imputation step %.4f ms", m[FIG_STEP]);
        lac_log(c->ctx, LAC_LOG_INFO,
                "impute (cuda): phases by CUDA events over %zu iterations: GFT %.4f ms, SVT %.4f ms, iGFT %.4f ms, %s "
                "(medians, sum %.4f ms); whole iteration %.4f ms (median)",
                iterations, m[FIG_GFT], m[FIG_SVT], m[FIG_IGFT], step, m[FIG_GFT] + m[FIG_SVT] + m[FIG_IGFT] + m[FIG_STEP],
                m[FIG_ITERATION]);
    }
    for (int i = 0; i < LAC_PHASE_MARKS; i++) cudaEventDestroy(c->ev[i]);
    delete c;
}
