/* The house rules the API promises: params structs that can grow (an older
 * caller's shorter struct keeps the defaults of later fields), the knob
 * registry (environment read once, per-context overrides, bad names refused),
 * private array ownership, one device per context. */
#include "harness.h"
#include "lacuna/lacuna.h"
#include "core/internal.h"
#include "core/knobs.h"

#include <stddef.h>
#include <stdlib.h>

static lac_ctx_t cpu_context(const char *knobs)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    p.threads = 1;
    p.knobs = knobs;
    lac_ctx_t ctx = NULL;
    lac_status st = lac_ctx_create(&p, &ctx);
    if (st < 0) return NULL;
    return ctx;
}

/* A caller built against an older header: its lac_map_params ended before
 * chunk_elements. The library must read only struct_size bytes and take the
 * default (0) for the rest, whatever lies beyond in the caller's memory. */
TEST(an_older_shorter_params_struct_keeps_the_defaults_of_later_fields)
{
    lac_ctx_t ctx = cpu_context(NULL);
    CHECK(ctx != NULL);
    unsigned char buffer[sizeof(lac_map_params) + 16];
    memset(buffer, 0xAB, sizeof buffer);   /* garbage where the newer fields would be */
    lac_map_params *old = (lac_map_params *)buffer;
    lac_map_params_init(old, offsetof(lac_map_params, chunk_elements));
    CHECK_INT(old->struct_size, offsetof(lac_map_params, chunk_elements));
    CHECK_INT(old->op, LAC_MAP_SUM);
    CHECK(buffer[offsetof(lac_map_params, chunk_elements)] == 0xAB);   /* init wrote nothing beyond */
    CHECK(lac_map_params_check(old) == NULL);   /* garbage chunk_elements (negative) is not read */

    float S[4] = {1, 2, 3, 4}, T[2] = {9, 9};
    int32_t R[4] = {0, 1, 1, 0};
    lac_array s = lac_array_vector(S, LAC_FLOAT32, 4), r = lac_array_vector(R, LAC_INT32, 4),
              t = lac_array_vector(T, LAC_FLOAT32, 2);
    CHECK_OK(ctx, lac_map(ctx, old, &s, &r, NULL, &t));
    CHECK(T[0] == 5.0f && T[1] == 5.0f);
    lac_ctx_destroy(&ctx);
}

TEST(params_without_struct_size_or_from_a_newer_header_are_refused)
{
    lac_ctx_t ctx = cpu_context(NULL);
    lac_map_params zero;
    memset(&zero, 0, sizeof zero);
    CHECK(lac_map_params_check(&zero) != NULL);
    float S[1] = {1}, T[1] = {0};
    int32_t R[1] = {0};
    lac_array s = lac_array_vector(S, LAC_FLOAT32, 1), r = lac_array_vector(R, LAC_INT32, 1),
              t = lac_array_vector(T, LAC_FLOAT32, 1);
    CHECK_STATUS(ctx, lac_map(ctx, &zero, &s, &r, NULL, &t), LAC_ERR_ARGUMENT);
    CHECK(strstr(lac_last_error(ctx), "struct_size") != NULL);
    CHECK(T[0] == 0.0f);

    /* A struct larger than the library's: fields this library cannot know. */
    unsigned char bigger[sizeof(lac_mf_params) + 32];
    memset(bigger, 0, sizeof bigger);
    lac_mf_params_init((lac_mf_params *)bigger, sizeof bigger);
    CHECK(lac_mf_params_check((const lac_mf_params *)bigger) != NULL);
    lac_ctx_destroy(&ctx);

    lac_ctx_params cp;
    memset(&cp, 0, sizeof cp);
    lac_ctx_t none = NULL;
    CHECK_STATUS(NULL, lac_ctx_create(&cp, &none), LAC_ERR_ARGUMENT);
    CHECK(none == NULL);
}

TEST(every_params_default_carries_its_size)
{
    CHECK_INT(lac_ctx_params_default().struct_size, sizeof(lac_ctx_params));
    CHECK_INT(lac_map_params_default().struct_size, sizeof(lac_map_params));
    CHECK_INT(lac_graph_params_default().struct_size, sizeof(lac_graph_params));
    CHECK_INT(lac_impute_params_default().struct_size, sizeof(lac_impute_params));
    CHECK_INT(lac_impute_gen_params_default().struct_size, sizeof(lac_impute_gen_params));
    CHECK_INT(lac_ratings_read_params_default().struct_size, sizeof(lac_ratings_read_params));
    CHECK_INT(lac_mf_split_params_default().struct_size, sizeof(lac_mf_split_params));
    CHECK_INT(lac_mf_gen_params_default().struct_size, sizeof(lac_mf_gen_params));
    CHECK_INT(lac_mf_params_default().struct_size, sizeof(lac_mf_params));
    /* The documented defaults survive the init path. */
    CHECK_INT(lac_mf_params_default().k, 32);
    CHECK(lac_impute_params_default().decay == 0.35);
}

TEST(knobs_are_overridden_per_context_and_unknown_names_refused)
{
    lac_ctx_t a = cpu_context("MAP_CUDA_FEW=0, LACUNA_MF_CUDA_LANES=8");
    lac_ctx_t b = cpu_context(NULL);
    CHECK(a != NULL && b != NULL);
    if (a && b) {
        CHECK(strcmp(lac_knob_string(a, LAC_KNOB_MAP_CUDA_FEW), "0") == 0);
        CHECK_INT(lac_knob_int(a, LAC_KNOB_MF_CUDA_LANES, -1), 8);
        /* The other context sees the environment (unset in this test). */
        CHECK(lac_knob_string(b, LAC_KNOB_MAP_CUDA_FEW) == lac_knob_string(NULL, LAC_KNOB_MAP_CUDA_FEW));
        CHECK_INT(lac_knob_int(b, LAC_KNOB_MF_CUDA_LANES, -1),
                  lac_knob_string(NULL, LAC_KNOB_MF_CUDA_LANES) ? lac_knob_int(NULL, LAC_KNOB_MF_CUDA_LANES, -1) : -1);
    }
    lac_ctx_destroy(&a);
    lac_ctx_destroy(&b);

    static const char *const bad[] = {"NO_SUCH_KNOB=1", "MAP_CUDA_FEW", "MAP_CUDA_FEWER=1"};
    for (int i = 0; i < 3; i++) {
        lac_ctx_params p = lac_ctx_params_default();
        p.backend = LAC_BACKEND_CPU;
        p.knobs = bad[i];
        lac_ctx_t ctx = NULL;
        CHECK_STATUS(NULL, lac_ctx_create(&p, &ctx), LAC_ERR_ARGUMENT);
        CHECK(ctx == NULL);
        CHECK(strstr(lac_last_error(NULL), "knobs") != NULL);
    }
    /* A value that is not a whole number falls back. */
    lac_ctx_t c = cpu_context("MF_CUDA_HOT=12x");
    CHECK_INT(lac_knob_int(c, LAC_KNOB_MF_CUDA_HOT, 77), 77);
    lac_ctx_destroy(&c);
    for (int k = 0; k < LAC_KNOB_COUNT; k++) CHECK(strncmp(lac_knob_name((lac_knob)k), "LACUNA_", 7) == 0);
}

TEST(a_view_does_not_own_and_releasing_it_leaves_the_data)
{
    lac_ctx_t ctx = cpu_context(NULL);
    int64_t shape[2] = {3, 2};
    lac_array owned;
    CHECK_OK(ctx, lac_array_alloc(ctx, LAC_FLOAT64, 2, shape, &owned));
    CHECK(owned.owner != NULL);
    ((double *)owned.data)[5] = 7.0;
    lac_array view = lac_array_view(&owned);
    CHECK(view.owner == NULL && view.data == owned.data && view.ndim == 2 && view.shape[1] == 2);
    lac_array_release(&view);
    CHECK(((double *)owned.data)[5] == 7.0);   /* still there (ASan would flag a free) */
    lac_array_release(&owned);
    CHECK(owned.data == NULL && owned.owner == NULL);
    lac_ctx_destroy(&ctx);
}

/* Several devices a context (a device may repeat); bad ordinals refused. On
 * a machine with a GPU, tests/cuda runs the shares themselves. */
TEST(several_devices_per_context)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;   /* the CPU ignores the devices */
    p.num_devices = 2;
    p.device_ids[0] = 0;
    p.device_ids[1] = 0;
    lac_ctx_t ctx = NULL;
    CHECK_OK(NULL, lac_ctx_create(&p, &ctx));
    lac_ctx_destroy(&ctx);
    p.device_ids[1] = -1;
    CHECK_STATUS(NULL, lac_ctx_create(&p, &ctx), LAC_ERR_ARGUMENT);
    CHECK(ctx == NULL);
    p.num_devices = LAC_MAX_DEVICES + 1;
    CHECK_STATUS(NULL, lac_ctx_create(&p, &ctx), LAC_ERR_ARGUMENT);
    if (lac_cuda_device_count() == 0) {
        p.backend = LAC_BACKEND_CUDA;
        p.num_devices = 2;
        p.device_ids[1] = 0;
        lac_status st = lac_ctx_create(&p, &ctx);
        CHECK(st == LAC_ERR_NO_DEVICE || st == LAC_ERR_NOT_COMPILED);
        CHECK(ctx == NULL);
    }
}

int main(void)
{
    RUN(an_older_shorter_params_struct_keeps_the_defaults_of_later_fields);
    RUN(params_without_struct_size_or_from_a_newer_header_are_refused);
    RUN(every_params_default_carries_its_size);
    RUN(knobs_are_overridden_per_context_and_unknown_names_refused);
    RUN(a_view_does_not_own_and_releasing_it_leaves_the_data);
    RUN(several_devices_per_context);
    return harness_finish();
}
