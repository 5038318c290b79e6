/* The smallest Lacuna program: sum three values onto two targets through a
 * bridge, on whichever backend is there. Built against an installed Lacuna by
 * tests/cli_install.sh:  cc map_hello.c $(pkg-config --cflags --libs lacuna) */
#include <lacuna/lacuna.h>
#include <stdio.h>

int main(void)
{
    float values[3] = {1.0f, 2.0f, 4.0f};
    int32_t bridge[3] = {1, 0, 1};
    float target[2] = {0};

    lac_ctx_t ctx;
    lac_ctx_params p = lac_ctx_params_default();
    if (lac_ctx_create(&p, &ctx) != LAC_SUCCESS) {
        fprintf(stderr, "%s\n", lac_last_error(NULL));
        return 1;
    }
    lac_array S = lac_array_vector(values, LAC_FLOAT32, 3);
    lac_array R = lac_array_vector(bridge, LAC_INT32, 3);
    lac_array T = lac_array_vector(target, LAC_FLOAT32, 2);
    lac_map_params mp = lac_map_params_default();   /* op sum, overwrite T */
    lac_status st = lac_map(ctx, &mp, &S, &R, NULL, &T);
    if (st < 0) {
        fprintf(stderr, "%s: %s\n", lac_status_string(st), lac_last_error(ctx));
        lac_ctx_destroy(&ctx);
        return 1;
    }
    printf("%g %g\n", target[0], target[1]);   /* 2 5 */
    lac_ctx_destroy(&ctx);
    return 0;
}
