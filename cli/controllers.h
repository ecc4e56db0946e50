/*
 * The controller URLs hcctl may send a request to: one controller, or the instances of an HA
 * controller (docs/hcctl.md "Several controllers"), given as a comma-separated list in
 * --controller, HCCTL_CONTROLLER or the config file's "controller" (a string, or a JSON array
 * of strings that config.c joins with commas). Every URL is checked here, in one place, before
 * any request: a leader URL a standby names in a 421 answer goes through the same check.
 */
#ifndef HC_CLI_CONTROLLERS_H
#define HC_CLI_CONTROLLERS_H

#include <stddef.h>

#include "common/error.h"

/* An HA controller has two or three instances; seven leaves room and still bounds the work a
 * hostile list can cause. */
#define HC_CLI_MAX_CONTROLLERS 7
/* One URL, "https://" included, NUL excluded: a host name is at most 253 bytes. */
#define HC_CLI_URL_MAX 300

struct hc_cli_controllers {
    size_t n;
    char url[HC_CLI_MAX_CONTROLLERS][HC_CLI_URL_MAX + 1]; /* "https://host[:port]", no "/" */
};

/* The list as hcctl uses it, as a new string: each comma-separated item trimmed of blanks and
 * tabs, "host:port" alone made "https://host:port", trailing "/" dropped; anything else is left
 * for hc_cli_controllers_parse to judge. NULL when out of memory. Caller frees. */
char *hc_cli_controllers_normalize(const char *text);

/* Parses a (normalized) list into out. Each item must be https://HOST[:PORT] with HOST a DNS
 * name, an IPv4 address or a bracketed IPv6 address and PORT 1-65535; no user name, path, query
 * or fragment, no blanks or control characters inside, at most HC_CLI_URL_MAX bytes. At most
 * HC_CLI_MAX_CONTROLLERS items, none empty, none twice (host compared without case, no port
 * meaning 443). from names where the list came from for the messages ("--controller",
 * "HCCTL_CONTROLLER", "the config file '...'"). 0, or -1 with a usage error naming the item. */
int hc_cli_controllers_parse(const char *text, const char *from, struct hc_cli_controllers *out,
                             struct hc_error *err);

/* Checks one URL (a leader URL named by a standby) with the same rules and copies it without a
 * trailing "/" into out (HC_CLI_URL_MAX + 1 bytes). 0, or -1 with a usage error. */
int hc_cli_controller_url_check(const char *url, const char *from, char *out, struct hc_error *err);

/* The leader, remembered between hcctl processes, so that each command of a script or of
 * `hcctl shell` starts at the leader rather than at the first URL (a dead host there costs the
 * 3 s connect limit every time): one line in $XDG_CACHE_HOME/hcctl/leader (an absolute
 * XDG_CACHE_HOME, else ~/.cache/hcctl/leader), mode 0600. A cache only: read, it must be one
 * of list's URLs, exactly, or it is ignored; a file that cannot be read or written changes
 * nothing. */
/* Copies the cached leader into out (HC_CLI_URL_MAX + 1 bytes) and returns 0 when it is one
 * of list's URLs; -1 otherwise (no file, another URL, anything else). */
int hc_cli_leader_cache_read(const struct hc_cli_controllers *list, char *out);
/* Writes url as the cached leader (0600, atomically, the directory made 0700); failures are
 * ignored. */
void hc_cli_leader_cache_write(const char *url);

#endif
