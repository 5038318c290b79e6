/* Core: status strings, contexts, parameter checks, last error, build info. */
#include "harness.h"
#include "lacuna/lacuna.h"

TEST(status_strings_are_distinct_and_signed)
{
    CHECK(strcmp(lac_status_string(LAC_SUCCESS), "success") == 0);
    CHECK(strcmp(lac_status_string(LAC_ERR_RANGE), lac_status_string(LAC_ERR_SHAPE)) != 0);
    CHECK(LAC_ERR_ARGUMENT < 0 && LAC_ERR_ARGUMENT > -100);
    CHECK(LAC_ERR_OUT_OF_MEMORY <= -100 && LAC_ERR_NOT_COMPILED <= -100);
    CHECK(LAC_INFO_NOT_CONVERGED > 0);
    CHECK_STR_CONTAINS(lac_status_string(-55), "unknown");
}

TEST(cpu_context_resolves_and_reports_threads)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    p.threads = 3;
    lac_ctx_t ctx = NULL;
    CHECK_OK(NULL, lac_ctx_create(&p, &ctx));
    CHECK(ctx != NULL);
    CHECK_INT(lac_ctx_backend(ctx), LAC_BACKEND_CPU);
    CHECK_INT(lac_ctx_threads(ctx), 3);
    CHECK_OK(ctx, lac_ctx_synchronize(ctx));
    CHECK(strcmp(lac_last_error(ctx), "") == 0);
    lac_ctx_destroy(&ctx);
    CHECK(ctx == NULL);
    lac_ctx_destroy(&ctx);   /* NULL is accepted */
    lac_ctx_destroy(NULL);
}

TEST(bad_context_params_are_rejected_with_a_reason)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.threads = -2;
    lac_ctx_t ctx = (lac_ctx_t)(void *)&p;   /* must be reset to NULL */
    CHECK_STATUS(NULL, lac_ctx_create(&p, &ctx), LAC_ERR_ARGUMENT);
    CHECK(ctx == NULL);
    CHECK_STR_CONTAINS(lac_last_error(NULL), "threads");
    p = lac_ctx_params_default();
    p.backend = (lac_backend)7;
    CHECK(lac_ctx_params_check(&p) != NULL);
    CHECK_STATUS(NULL, lac_ctx_create(NULL, NULL), LAC_ERR_ARGUMENT);
}

TEST(cuda_backend_without_a_device_fails_cleanly)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CUDA;
    lac_ctx_t ctx = NULL;
    lac_status st = lac_ctx_create(&p, &ctx);
    if (lac_cuda_device_count() == 0) {
        CHECK(st == LAC_ERR_NOT_COMPILED || st == LAC_ERR_NO_DEVICE);
        CHECK(ctx == NULL);
        CHECK(strlen(lac_last_error(NULL)) > 0);
    } else {
        CHECK_OK(NULL, st);
        lac_ctx_destroy(&ctx);
    }
}

TEST(auto_backend_always_gives_a_context)
{
    lac_ctx_t ctx = NULL;
    CHECK_OK(NULL, lac_ctx_create(NULL, &ctx));
    CHECK(lac_ctx_backend(ctx) == (lac_cuda_device_count() > 0 ? LAC_BACKEND_CUDA : LAC_BACKEND_CPU));
    lac_ctx_destroy(&ctx);
}

static int log_calls;
static void count_log(lac_log_level level, const char *msg, void *user)
{
    (void)level;
    (void)msg;
    *(int *)user += 1;
}

TEST(log_callback_receives_debug_messages)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    p.log = count_log;
    p.log_user = &log_calls;
    p.log_level = LAC_LOG_DEBUG;
    lac_ctx_t ctx = NULL;
    CHECK_OK(NULL, lac_ctx_create(&p, &ctx));
    int before = log_calls;
    lac_array a;
    CHECK_STATUS(ctx, lac_npy_load(ctx, "/nonexistent/x.npy", 0, &a), LAC_ERR_IO);
    CHECK(log_calls > before);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "/nonexistent/x.npy");
    lac_ctx_destroy(&ctx);
}

TEST(version_and_build_info)
{
    CHECK(strlen(lac_version()) >= 5);
    CHECK_STR_CONTAINS(lac_build_info(), "version: ");
    CHECK_STR_CONTAINS(lac_build_info(), "cuda: ");
    CHECK_STR_CONTAINS(lac_build_info(), "blas: OpenBLAS");
}

TEST(arrays_and_dtypes)
{
    CHECK_INT(lac_dtype_size(LAC_FLOAT64), 8);
    CHECK_INT(lac_dtype_size(LAC_BOOL), 1);
    CHECK(strcmp(lac_dtype_name(LAC_INT32), "int32") == 0);
    lac_ctx_t ctx = NULL;
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    CHECK_OK(NULL, lac_ctx_create(&p, &ctx));
    int64_t shape[3] = {2, 3, 4};
    lac_array a;
    CHECK_OK(ctx, lac_array_alloc(ctx, LAC_FLOAT32, 3, shape, &a));
    CHECK_INT(lac_array_count(&a), 24);
    CHECK(((float *)a.data)[23] == 0.0f);
    lac_array_release(&a);
    CHECK(a.data == NULL);
    int64_t bad[1] = {-1};
    CHECK_STATUS(ctx, lac_array_alloc(ctx, LAC_FLOAT32, 1, bad, &a), LAC_ERR_SHAPE);
    lac_status st = lac_device_alloc(ctx, 16, &a.data);   /* a CPU context has no device memory */
    CHECK(st == LAC_ERR_ARGUMENT || st == LAC_ERR_NOT_COMPILED);
    lac_ctx_destroy(&ctx);
}

int main(void)
{
    RUN(status_strings_are_distinct_and_signed);
    RUN(cpu_context_resolves_and_reports_threads);
    RUN(bad_context_params_are_rejected_with_a_reason);
    RUN(cuda_backend_without_a_device_fails_cleanly);
    RUN(auto_backend_always_gives_a_context);
    RUN(log_callback_receives_debug_messages);
    RUN(version_and_build_info);
    RUN(arrays_and_dtypes);
    return harness_finish();
}
