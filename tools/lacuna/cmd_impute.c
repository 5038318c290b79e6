/* lacuna impute: placeholder until the capability lands. */
#include "cli.h"

int cmd_impute(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_usage_error("impute", "not available in this build yet");
}
