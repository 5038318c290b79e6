/* libFuzzer harness: lac_text_load as float32, float64, int32 and int64 (and
 * bool, which it refuses). On success the array is a vector or a matrix whose
 * shape the data fills; a failure leaves *out untouched. */
#include "fuzz_common.h"

#include <string.h>

static const lac_dtype dtypes[] = {LAC_FLOAT32, LAC_FLOAT64, LAC_INT32, LAC_INT64, LAC_BOOL};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    lac_status int64_status = LAC_SUCCESS, int32_status = LAC_SUCCESS;
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        lac_array out, before;
        memset(&out, 0xA5, sizeof out);
        memcpy(&before, &out, sizeof before);
        lac_ctx_t ctx = fuzz_ctx_new();
        lac_status st = lac_text_load(ctx, path, dtypes[i], &out);
        fuzz_check_status(ctx, st, "lac_text_load");
        lac_ctx_destroy(&ctx);
        if (dtypes[i] == LAC_BOOL) {
            if (st != LAC_ERR_DTYPE) fuzz_fail("lac_text_load as bool returned %d, not LAC_ERR_DTYPE", st);
        }
        if (dtypes[i] == LAC_INT64) int64_status = st;
        if (dtypes[i] == LAC_INT32) int32_status = st;
        if (st != LAC_SUCCESS) {
            if (memcmp(&out, &before, sizeof out) != 0) fuzz_fail("lac_text_load failed (%d) and changed *out", st);
            continue;
        }
        if (out.dtype != dtypes[i] || out.memory != LAC_MEM_HOST || out.ndim < 1 || out.ndim > 2 || !out.data)
            fuzz_fail("lac_text_load: dtype %d, ndim %d, data %p", (int)out.dtype, out.ndim, out.data);
        int64_t count = lac_array_count(&out);
        if (out.shape[0] < 0 || (out.ndim == 2 && out.shape[1] < 2) || count > (int64_t)size)
            fuzz_fail("lac_text_load: shape (%lld, %lld) from %zu bytes", (long long)out.shape[0],
                      (long long)(out.ndim == 2 ? out.shape[1] : 1), size);
        /* every element is there to read (ASan sees a short buffer) */
        volatile unsigned char sink = 0;
        const unsigned char *bytes = out.data;
        for (size_t b = 0; b < (size_t)count * lac_dtype_size(out.dtype); b++) sink ^= bytes[b];
        (void)sink;
        lac_array_release(&out);
    }
    /* int32 is int64 with a narrower range: int32 can only fail where int64 does
     * or with a range error */
    if (int64_status != LAC_SUCCESS && int32_status == LAC_SUCCESS)
        fuzz_fail("lac_text_load: int32 succeeds where int64 fails (%d)", int64_status);
    return 0;
}
