/* lacuna map: placeholder until the capability lands. */
#include "cli.h"

int cmd_map(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_usage_error("map", "not available in this build yet");
}
