/* libFuzzer harness: lac_npy_load, read into memory and mapped (LAC_NPY_MMAP).
 * Both must agree: the same status, and on success the same dtype, shape and
 * bytes; a bool array holds only 0 and 1; a failure leaves *out untouched. */
#include "fuzz_common.h"

#include <string.h>

static lac_status load(const char *path, unsigned flags, lac_array *out)
{
    lac_array before;
    memset(out, 0xA5, sizeof *out);
    memcpy(&before, out, sizeof before);
    lac_ctx_t ctx = fuzz_ctx_new();
    lac_status st = lac_npy_load(ctx, path, flags, out);
    fuzz_check_status(ctx, st, flags & LAC_NPY_MMAP ? "lac_npy_load(LAC_NPY_MMAP)" : "lac_npy_load");
    lac_ctx_destroy(&ctx);
    if (st != LAC_SUCCESS) {
        if (memcmp(out, &before, sizeof before) != 0) fuzz_fail("lac_npy_load failed (%d) and changed *out", st);
        return st;
    }
    if (out->ndim < 1 || out->ndim > LAC_MAX_DIMS || out->memory != LAC_MEM_HOST)
        fuzz_fail("lac_npy_load: ndim %d, memory %d", out->ndim, (int)out->memory);
    for (int d = 0; d < out->ndim; d++)
        if (out->shape[d] < 0) fuzz_fail("lac_npy_load: shape[%d] = %lld", d, (long long)out->shape[d]);
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    lac_array plain, mapped;
    lac_status a = load(path, 0, &plain);
    lac_status b = load(path, LAC_NPY_MMAP, &mapped);
    if (a != b) fuzz_fail("lac_npy_load: %d read, %d mapped", a, b);
    if (a != LAC_SUCCESS) return 0;
    if (plain.dtype != mapped.dtype || plain.ndim != mapped.ndim ||
        memcmp(plain.shape, mapped.shape, sizeof plain.shape[0] * (size_t)plain.ndim) != 0)
        fuzz_fail("lac_npy_load: read and mapped arrays differ in dtype or shape");
    size_t bytes = (size_t)lac_array_count(&plain) * lac_dtype_size(plain.dtype);
    if (bytes > size) fuzz_fail("lac_npy_load: %zu data bytes from a %zu-byte file", bytes, size);
    if (bytes && (!plain.data || !mapped.data)) fuzz_fail("lac_npy_load: NULL data for %zu bytes", bytes);
    if (bytes && memcmp(plain.data, mapped.data, bytes) != 0) fuzz_fail("lac_npy_load: read and mapped bytes differ");
    if (plain.dtype == LAC_BOOL)
        for (size_t i = 0; i < bytes; i++)
            if (((const unsigned char *)plain.data)[i] > 1) fuzz_fail("lac_npy_load: bool byte %zu is not 0 or 1", i);
    lac_array_release(&plain);
    lac_array_release(&mapped);
    return 0;
}
