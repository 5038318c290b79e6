/* lacuna info: version, build information and the devices this build sees. */
#include "cli.h"

int cmd_info(int argc, char **argv)
{
    const cli_command cmd = {
        .name = "info",
        .usage = "info",
        .about = "Prints the version, what the build contains and the CUDA devices it sees.\n",
    };
    int rc = cli_parse(&cmd, argc, argv, NULL, NULL);
    if (rc != CLI_OK) return rc == CLI_HELP ? CLI_OK : rc;
    printf("lacuna %s\n%s", lac_version(), lac_build_info());
    lac_ctx_t ctx = NULL;
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    if (lac_ctx_create(&p, &ctx) == LAC_SUCCESS) {
        printf("cpu threads: %d\n", lac_ctx_threads(ctx));
        lac_ctx_destroy(&ctx);
    }
    int devices = lac_cuda_device_count();
    printf("cuda devices: %d\n", devices);
    for (int d = 0; d < devices; d++) {
        char desc[256];
        if (lac_cuda_device_describe(d, desc, sizeof desc) == LAC_SUCCESS) printf("  cuda:%d %s\n", d, desc);
    }
    return CLI_OK;
}
