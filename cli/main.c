/* hcctl: the thin client of hcctld. Everything happens in the command engine (cli/cmd.c); a
 * write to stdout that failed makes the command fail (common/cmdline.h). */
#include <stdio.h>

#include "cli/cmd.h"

int main(int argc, char **argv)
{
    struct hc_cli_io io = {stdout, stderr, stdin, -1, -1, 0};
    return hc_cmdline_close_stdout("hcctl", hc_cli_main(hc_cmd_groups, argc, argv, &io));
}
