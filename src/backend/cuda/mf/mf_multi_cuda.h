/* mf on several devices of one context (mf_multi.cu): the block rotation
 * over the context's shares, built on one-device trainings of CUSGD++
 * (mf_sgd.cu), whose pieces it drives through the functions below. */
#ifndef LACUNA_BACKEND_CUDA_MF_MULTI_CUDA_H
#define LACUNA_BACKEND_CUDA_MF_MULTI_CUDA_H

#include "backend/cuda/cuda_internal.h"
#include "mf/mf_backend.h"

/* One device's training (mf_sgd.cu) on the context's current share. */
lac_status lac_mf_cuda_one_begin(lac_ctx_t ctx, const lac_mf_call *call, lac_mf_state **out);
/* An epoch enqueued on the share's stream, and (after it) its summed e^2. */
lac_status lac_mf_cuda_one_launch(lac_ctx_t ctx, lac_mf_state *s, float lr, int epoch);
lac_status lac_mf_cuda_one_sse(lac_ctx_t ctx, lac_mf_state *s, double *train_sse);
/* The popular items' replica rows set from the items' own rows (after those changed). */
lac_status lac_mf_cuda_one_spread(lac_ctx_t ctx, lac_mf_state *s);
/* The table's keep, get and put of one device's training: the kept epoch on
 * the device; the current (kept 0) or kept factors to or from host arrays
 * shaped as the call's. */
lac_status lac_mf_cuda_one_keep(lac_ctx_t ctx, lac_mf_state *s, int restore);
lac_status lac_mf_cuda_one_get(lac_ctx_t ctx, lac_mf_state *s, int kept, const lac_mf_factors *to);
lac_status lac_mf_cuda_one_put(lac_ctx_t ctx, lac_mf_state *s, int kept, const lac_mf_factors *from);
void lac_mf_cuda_one_end(lac_ctx_t ctx, lac_mf_state *s);
typedef struct {
    float *P, *Q, *user_bias;
    float *item_bias;          /* LAC_MF_BIAS_STRIDE apart */
    int64_t num_users, num_items;
    int stride;
    float *WC;                 /* the neighbourhood model's w_j | c_j, num_items x 2K; NULL for the plain one */
    int K;
} lac_mf_cuda_one_arrays;
lac_mf_cuda_one_arrays lac_mf_cuda_one_get_arrays(const lac_mf_state *s);

/* The rotation's state and its side of the backend table. */
typedef struct lac_mf_cuda_multi lac_mf_cuda_multi;
/* Whether this call trains over the context's shares (several of them, not
 * a part of the items, at least as many users and items as shares). */
int lac_mf_cuda_multi_wanted(lac_ctx_t ctx, const lac_mf_call *call);
lac_status lac_mf_cuda_multi_begin(lac_ctx_t ctx, const lac_mf_call *call, lac_mf_cuda_multi **out);
lac_status lac_mf_cuda_multi_epoch(lac_ctx_t ctx, lac_mf_cuda_multi *m, float lr, int epoch, double *train_sse);
lac_status lac_mf_cuda_multi_valid_rmse(lac_ctx_t ctx, lac_mf_cuda_multi *m, double *rmse);
lac_status lac_mf_cuda_multi_keep(lac_ctx_t ctx, lac_mf_cuda_multi *m, int restore);
lac_status lac_mf_cuda_multi_download(lac_ctx_t ctx, lac_mf_cuda_multi *m);
lac_status lac_mf_cuda_multi_get(lac_ctx_t ctx, lac_mf_cuda_multi *m, int kept, const lac_mf_factors *to);
lac_status lac_mf_cuda_multi_put(lac_ctx_t ctx, lac_mf_cuda_multi *m, int kept, const lac_mf_factors *from);
void lac_mf_cuda_multi_end(lac_ctx_t ctx, lac_mf_cuda_multi *m);

#endif
