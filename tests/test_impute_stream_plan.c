/* The GPU imputation's memory plan (src/impute/stream_plan.c), on the CPU:
 * the resident need counted buffer by buffer by hand, the streamed slab the
 * widest that fits (brute force over every width), the boundaries between
 * resident, streamed and too small, and the cap knob's byte counts. */
#include "harness.h"
#include "core/knobs.h"
#include "impute/stream_plan.h"

static lac_impute_footprint small_case(void)
{
    lac_impute_footprint f;
    memset(&f, 0, sizeof f);
    f.N = 8;
    f.mn = 6;
    f.ni = 3;
    f.real_size = 4;
    f.tensor_size = 8;
    f.stats_slice = 48;
    return f;
}

TEST(resident_need_is_the_sum_of_setups_buffers)
{
    lac_impute_footprint f = small_case();
    lac_impute_plan p;
    lac_impute_plan_make(&f, (size_t)1 << 40, &p);
    CHECK_INT(p.mode, LAC_IMPUTE_RESIDENT);
    /* U 64, U_I 24, C Ĝ Ĝest 3*48, X_I 18 floats; λ and figures 8 x (8 + 48);
     * 512 partial sums; 3 indices; staging of all 8 vertices (48 doubles and
     * a state byte each). */
    size_t want = 4 * (64 + 24 + 144 + 18) + 8 * 56 + 512 * 8 + 3 * 8 + 8 * (48 + 1);
    CHECK_INT((long long)p.resident_bytes, (long long)want);
    /* Truth, momentum, entry masks and the Jacobi vectors (25 doubles). */
    f.truth = f.momentum = f.entry_mask = 1;
    f.svt_slice_bytes = 200;
    lac_impute_plan_make(&f, (size_t)1 << 40, &p);
    want += 4 * (48 + 18) + 4 * 2 * 18 + 18 + 8 * 200 + 8 * 6;
    CHECK_INT((long long)p.resident_bytes, (long long)want);
    /* The Gram route's vectors (the subspace pass) are the resident plan's
     * alone: one slab and the fixed part stay as they were. */
    lac_impute_plan before = p;
    f.svt_resident_slice_bytes = 128;
    lac_impute_plan_make(&f, (size_t)1 << 40, &p);
    CHECK_INT((long long)p.resident_bytes, (long long)(want + 8 * 128));
    CHECK_INT((long long)p.min_bytes, (long long)before.min_bytes);
    CHECK_INT((long long)p.fixed_bytes, (long long)before.fixed_bytes);
}

static void check_boundaries(lac_impute_footprint f)
{
    lac_impute_plan p, q;
    lac_impute_plan_make(&f, (size_t)1 << 50, &p);
    const int64_t few = f.N < 16 ? f.N : 16;
    const size_t resident = p.resident_bytes;
    lac_impute_plan_make(&f, resident, &q);
    CHECK_INT(q.mode, LAC_IMPUTE_RESIDENT);
    CHECK_INT((long long)q.svt_budget, (long long)(f.svt_work_fixed + (size_t)few * f.svt_work_slice));
    lac_impute_plan_make(&f, resident - 1, &q);
    if (p.min_bytes <= resident - 1) CHECK_INT(q.mode, LAC_IMPUTE_STREAMED);
    CHECK_INT((long long)p.min_bytes, (long long)(p.fixed_bytes + lac_impute_plan_slab_bytes(&f, 1)));
    lac_impute_plan_make(&f, p.min_bytes - 1, &q);
    CHECK_INT(q.mode, LAC_IMPUTE_TOO_SMALL);
    /* Every budget between one slab and the resident plan: the widest slab
     * that fits, found here by trying every width. */
    const int64_t widest = (f.N + 3) / 4;
    for (int step = 0; step <= 40; step++) {
        size_t avail = p.min_bytes + (size_t)((double)(resident - 1 - p.min_bytes) * step / 40.0);
        lac_impute_plan_make(&f, avail, &q);
        if (avail >= resident) continue;
        CHECK_INT(q.mode, LAC_IMPUTE_STREAMED);
        int64_t best = 0;
        for (int64_t w = 1; w <= widest; w++)
            if (p.fixed_bytes + lac_impute_plan_slab_bytes(&f, w) <= avail) best = w;
        CHECK_INT(q.slab, best);
        CHECK(q.fixed_bytes + q.slab_bytes <= avail);
        CHECK_INT((long long)q.svt_budget, (long long)((size_t)q.slab * f.svt_work_slice + f.svt_work_fixed));
    }
}

TEST(streamed_slab_is_the_widest_that_fits)
{
    lac_impute_footprint f = small_case();
    check_boundaries(f);
    /* 128 x 128 x 2000, float32, half the vertices incomplete, Gram workspace. */
    f.N = 2000;
    f.mn = 128 * 128;
    f.ni = 1000;
    f.tensor_size = 4;
    f.truth = 1;
    f.svt_work_slice = (size_t)(2 * 128 * 128 + 128 * 128 + 2 * 128 + 4) * 8 + 8;
    check_boundaries(f);
    f.svt_work_fixed = (size_t)40 << 20;   /* a solver workspace that does not grow with the chunk */
    check_boundaries(f);
    f.svt_work_fixed = 0;
    /* 50 x 50 x 4039 float64 with the Jacobi vectors and entry masks. */
    f.N = 4039;
    f.mn = 2500;
    f.ni = 2019;
    f.real_size = 8;
    f.tensor_size = 8;
    f.entry_mask = f.momentum = 1;
    f.svt_slice_bytes = 50 * 50 * 8;
    f.svt_work_slice = 0;
    check_boundaries(f);
    /* Fewer than four frequencies: one a slab. */
    f.N = 3;
    f.ni = 2;
    check_boundaries(f);
}

TEST(slab_bytes_grow_with_the_width)
{
    lac_impute_footprint f = small_case();
    f.N = 300;
    f.ni = 100;
    f.truth = 1;
    for (int64_t w = 1; w < 300; w++) CHECK(lac_impute_plan_slab_bytes(&f, w + 1) > lac_impute_plan_slab_bytes(&f, w));
}

TEST(cap_knob_takes_bytes_with_binary_suffixes)
{
    uint64_t b = 0;
    CHECK_INT(lac_parse_bytes("123", &b), 0);
    CHECK_INT((long long)b, 123);
    CHECK_INT(lac_parse_bytes("64M", &b), 0);
    CHECK_INT((long long)b, 64LL << 20);
    CHECK_INT(lac_parse_bytes("3k", &b), 0);
    CHECK_INT((long long)b, 3072);
    CHECK_INT(lac_parse_bytes("2G", &b), 0);
    CHECK_INT((long long)b, 2LL << 30);
    CHECK_INT(lac_parse_bytes("1T", &b), 0);
    CHECK_INT((long long)b, 1LL << 40);
    static const char *bad[] = {"", "M", "-5", " 5", "5 M", "5MB", "1.5G", "0x10", "99999999999999999999",
                                "20000000000T"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        b = 77;
        CHECK_INT(lac_parse_bytes(bad[i], &b), -1);
        CHECK_INT((long long)b, 77);
    }
}

int main(void)
{
    RUN(resident_need_is_the_sum_of_setups_buffers);
    RUN(streamed_slab_is_the_widest_that_fits);
    RUN(slab_bytes_grow_with_the_width);
    RUN(cap_knob_takes_bytes_with_binary_suffixes);
    return harness_finish();
}
