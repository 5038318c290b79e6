/* Determinism as an option of a map plan (lac_map_plan_set_deterministic),
 * on the CPU backend: a new plan is deterministic (its executes are the
 * deterministic one-shot call's bits even without params.deterministic);
 * switched off, its executes agree with a float64 reference loop written here
 * to float32 rounding, and an execute that asks for determinism is still the
 * deterministic call's bits; a NULL plan is an argument error. */
#include "harness.h"
#include "lacuna/lacuna.h"

#include <stdint.h>

#define M 200003
#define N 5000

TEST(a_plan_is_deterministic_until_switched_off)
{
    lac_ctx_params cp = lac_ctx_params_default();
    cp.backend = LAC_BACKEND_CPU;
    cp.threads = 2;
    lac_ctx_t ctx = NULL;
    CHECK_OK(NULL, lac_ctx_create(&cp, &ctx));
    if (!ctx) return;
    unsigned long long st = 20261124;
    float *S = malloc(sizeof(float) * M), *T = malloc(sizeof(float) * N), *D = malloc(sizeof(float) * N);
    int32_t *R = malloc(sizeof(int32_t) * M);
    double *ref = calloc(N, sizeof(double));
    for (int64_t i = 0; i < M; i++) {
        S[i] = (float)(2.0 * harness_rand_uniform(&st) - 1.0);
        R[i] = harness_rand_uniform(&st) < 0.3 ? 7 : (int32_t)(harness_rand_u64(&st) % N);   /* one hot target */
        ref[R[i]] += S[i];
    }
    lac_array as = lac_array_vector(S, LAC_FLOAT32, M), ar = lac_array_vector(R, LAC_INT32, M);
    lac_array at = lac_array_vector(T, LAC_FLOAT32, N), ad = lac_array_vector(D, LAC_FLOAT32, N);
    lac_map_params p = lac_map_params_default(), det = p;
    det.deterministic = 1;
    CHECK_OK(ctx, lac_map(ctx, &det, &as, &ar, NULL, &ad));
    lac_map_plan_t plan = NULL;
    CHECK_OK(ctx, lac_map_plan_create(ctx, &ar, N, &plan));

    CHECK_OK(ctx, lac_map_plan_execute(ctx, plan, &p, &as, NULL, &at));
    if (memcmp(T, D, sizeof(float) * N) != 0) HARNESS_FAIL("a new plan's execute differs from the deterministic call");

    CHECK_OK(ctx, lac_map_plan_set_deterministic(plan, 0));
    CHECK_OK(ctx, lac_map_plan_execute(ctx, plan, &p, &as, NULL, &at));
    double err = 0;
    for (int64_t k = 0; k < N; k++) {
        double e = fabs((double)T[k] - ref[k]) / (fabs(ref[k]) > 1.0 ? fabs(ref[k]) : 1.0);
        err = e > err ? e : err;
    }
    if (!(err <= 1e-4)) HARNESS_FAIL("plan without determinism: error %g against the float64 loop", err);

    memset(T, 0, sizeof(float) * N);
    CHECK_OK(ctx, lac_map_plan_execute(ctx, plan, &det, &as, NULL, &at));
    if (memcmp(T, D, sizeof(float) * N) != 0)
        HARNESS_FAIL("an execute asking for determinism differs from the deterministic call");

    CHECK_OK(ctx, lac_map_plan_set_deterministic(plan, 1));
    memset(T, 0, sizeof(float) * N);
    CHECK_OK(ctx, lac_map_plan_execute(ctx, plan, &p, &as, NULL, &at));
    if (memcmp(T, D, sizeof(float) * N) != 0) HARNESS_FAIL("a plan switched back on differs from the deterministic call");

    CHECK_INT(lac_map_plan_set_deterministic(NULL, 0), LAC_ERR_ARGUMENT);
    lac_map_plan_destroy(&plan);
    free(S), free(T), free(D), free(R), free(ref);
    lac_ctx_destroy(&ctx);
}

int main(void)
{
    RUN(a_plan_is_deterministic_until_switched_off);
    return harness_finish();
}
