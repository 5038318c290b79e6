/* Parameter structs that can grow: every public params struct begins with its
 * struct_size (the caller's sizeof), so the library reads only what the caller
 * has and keeps the defaults for fields added after the caller was built. */
#include "core/internal.h"

#include <string.h>

void lac_params_fill(void *params, size_t struct_size, const void *defaults, size_t full_size)
{
    if (!params || struct_size < sizeof(size_t)) return;
    memcpy(params, defaults, struct_size < full_size ? struct_size : full_size);
    if (struct_size > full_size) memset((char *)params + full_size, 0, struct_size - full_size);
    memcpy(params, &struct_size, sizeof struct_size);
}

const char *lac_params_adopt(const void *given, const void *defaults, size_t full_size, void *out)
{
    if (!given) return "params is NULL";
    size_t size;
    memcpy(&size, given, sizeof size);
    if (size == 0) return "struct_size is 0: start the struct from its lac_..._params_default()";
    if (size < sizeof(size_t) || size > full_size)
        return size > full_size ? "struct_size is larger than this library's struct: the caller was built against a "
                                  "newer Lacuna"
                                : "struct_size is too small";
    if (out != defaults) memmove(out, defaults, full_size);
    memcpy(out, given, size);
    memcpy(out, &full_size, sizeof full_size);
    return NULL;
}

lac_status lac_params_read(lac_ctx_t ctx, const char *what, const void *given, const void *defaults, size_t full_size,
                           void *out)
{
    const char *why = lac_params_adopt(given, defaults, full_size, out);
    if (why) return lac_error(ctx, LAC_ERR_ARGUMENT, "%s parameters: %s", what, why);
    return LAC_SUCCESS;
}
