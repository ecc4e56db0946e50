/* The list of command groups: the one table the engine, help, self-test and completion read. */
#include "cli/groups.h"

#include <stdio.h>

#include "cli/api_client.h"

/* Packed by hand: clang-format puts one item a line when the count is not a multiple of 3. */
/* clang-format off */
const struct hc_cmd_group *const hc_cmd_groups[] = {
    &hc_cmd_group_cluster,    &hc_cmd_group_node,        &hc_cmd_group_software,
    &hc_cmd_group_net,        &hc_cmd_group_maintenance, &hc_cmd_group_upgrade,
    &hc_cmd_group_config,     &hc_cmd_group_operation,   &hc_cmd_group_token,
    &hc_cmd_group_events,     &hc_cmd_group_version,     &hc_cmd_group_shell,
    &hc_cmd_group_completion, &hc_cmd_group_help,        &hc_cmd_group_self_test,
    &hc_cmd_group_complete,   &hc_cmd_group_man,         &hc_cmd_group_agent,
    NULL,
};
/* clang-format on */

int hc_cmd_path(char *buf, size_t len, const char *prefix, const char *name)
{
    char escaped[768];
    if (hc_api_client_escape(name, escaped, sizeof(escaped)) < 0)
        return -1;
    int n = snprintf(buf, len, "%s%s", prefix, escaped);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}
