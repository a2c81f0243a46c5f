/* cli_activity.c - `seckill activity ...` (being written). */
#include "cli.h"

int sk_cli_activity(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return sk_cli_usage_error("activity: not built yet");
}
