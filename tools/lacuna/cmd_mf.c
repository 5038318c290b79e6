/* lacuna mf: placeholder until the capability lands. */
#include "cli.h"

int cmd_mf(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_usage_error("mf", "not available in this build yet");
}
