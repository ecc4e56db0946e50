/* Parsing and formatting of [USER@]HOST[:PORT] (see ssh_target.h). */
#include "common/ssh_target.h"

#include <stdio.h>
#include <string.h>

#include "common/util.h"

int hc_ssh_target_parse(const char *text, struct hc_ssh_target *t, struct hc_error *err)
{
    memset(t, 0, sizeof(*t));
    snprintf(t->user, sizeof(t->user), "root");
    t->port = 22;
    const char *at = strchr(text, '@');
    const char *hostpart = text;
    if (at) {
        size_t ul = (size_t)(at - text);
        if (ul == 0 || ul >= sizeof(t->user))
            goto bad;
        memcpy(t->user, text, ul);
        t->user[ul] = '\0';
        hostpart = at + 1;
    }
    const char *colon = strrchr(hostpart, ':');
    int bracketed = hostpart[0] == '[';
    if (bracketed || (colon && strchr(hostpart, ':') == colon)) {
        if (colon && (!bracketed || colon > strchr(hostpart, ']'))) {
            if (hc_split_host_port(hostpart, t->host, sizeof(t->host), &t->port, err) < 0)
                goto bad;
            if (t->port == 0)
                goto bad;
        } else if (bracketed) {
            const char *close = strchr(hostpart, ']');
            if (!close || close[1])
                goto bad;
            snprintf(t->host, sizeof(t->host), "%.*s", (int)(close - hostpart - 1), hostpart + 1);
        }
    } else {
        snprintf(t->host, sizeof(t->host), "%s", hostpart);
    }
    if (!t->host[0] || strpbrk(t->user, " \t'\"\\;$`") || strpbrk(t->host, " \t'\"\\;$`/@"))
        goto bad;
    return 0;
bad:
    hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid node address '%s'", text);
    return hc_error_hint(err, "use [USER@]HOST[:PORT], e.g. root@198.18.0.11:22");
}

void hc_ssh_target_format(const struct hc_ssh_target *t, char *buf, size_t len)
{
    if (strchr(t->host, ':'))
        snprintf(buf, len, "%s@[%s]:%d", t->user, t->host, t->port);
    else
        snprintf(buf, len, "%s@%s:%d", t->user, t->host, t->port);
}
