/* lacuna info: version, build information and the devices this build sees. */
#include "cli.h"
#include "json.h"

#include <string.h>

/* The value of "key: value" in lac_build_info() into buf ("" when absent). */
static const char *build_fact(const char *key, char *buf, size_t len)
{
    const char *info = lac_build_info(), *at = info;
    size_t k = strlen(key);
    buf[0] = '\0';
    while (at && *at) {
        if (strncmp(at, key, k) == 0 && at[k] == ':') {
            const char *v = at + k + 1 + (at[k + 1] == ' '), *end = strchr(v, '\n');
            snprintf(buf, len, "%.*s", (int)(end ? end - v : (long)strlen(v)), v);
            break;
        }
        at = strchr(at, '\n');
        if (at) at++;
    }
    return buf;
}

int cmd_info(int argc, char **argv)
{
    int json = 0;
    cli_opt options[] = {
        {"--json", NULL, CLI_FLAG, &json, NULL,
         .help = "one line of JSON: {\"version\", \"build\", \"cuda\", \"cuda_devices\", \"mpi\" (true when MPI is "
                 "built in), \"mpi_library\", \"ranks\", \"cpu_threads\"}"},
        {0},
    };
    const cli_command cmd = {
        .name = "info",
        .usage = "info [--json]",
        .about = "Prints the version, what the build contains (CUDA, MPI) and the CUDA devices it sees.\n",
        .tables = {options},
    };
    int rc = cli_parse(&cmd, argc, argv, NULL, NULL);
    if (rc != CLI_OK) return rc == CLI_HELP ? CLI_OK : rc;
    int threads = 0, ranks = 1;
    lac_ctx_t ctx = NULL;
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    bool have_ctx = lac_ctx_create(&p, &ctx) == LAC_SUCCESS;
    if (have_ctx) {
        threads = lac_ctx_threads(ctx);
        ranks = lac_ctx_ranks(ctx);
    }
    bool reporter = !have_ctx || lac_ctx_rank(ctx) == 0;
    int devices = lac_cuda_device_count();
    char mpi[256], cuda[256], build[64];
    build_fact("mpi", mpi, sizeof mpi);
    if (!reporter) {
    } else if (json) {
        cli_json j;
        cli_json_begin(&j, stdout);
        cli_json_string(&j, "version", lac_version());
        cli_json_string(&j, "build", build_fact("build", build, sizeof build));
        cli_json_string(&j, "cuda", build_fact("cuda", cuda, sizeof cuda));
        cli_json_int(&j, "cuda_devices", devices);
        cli_json_bool(&j, "mpi", strncmp(mpi, "yes", 3) == 0);
        cli_json_string(&j, "mpi_library", strncmp(mpi, "yes, ", 5) == 0 ? mpi + 5 : "");
        cli_json_int(&j, "ranks", ranks);
        cli_json_int(&j, "cpu_threads", threads);
        cli_json_end(&j);
    } else {
        printf("lacuna %s\n%s", lac_version(), lac_build_info());
        if (have_ctx) printf("cpu threads: %d\n", threads);
        if (ranks > 1) printf("mpi ranks: %d\n", ranks);
        printf("cuda devices: %d\n", devices);
        for (int d = 0; d < devices; d++) {
            char desc[256];
            if (lac_cuda_device_describe(d, desc, sizeof desc) == LAC_SUCCESS) printf("  cuda:%d %s\n", d, desc);
        }
    }
    lac_ctx_destroy(&ctx);
    return CLI_OK;
}
