/*
 * The controller list: normalizing what the user wrote and checking every URL (controllers.h).
 * The checks run on the bytes as given, before anything is copied, so that a hostile value
 * (megabytes, thousands of commas, control characters) costs one pass and a clear message.
 */
#include "cli/controllers.h"

#include "common/util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int blank(char c)
{
    return c == ' ' || c == '\t';
}

/* One item of the list: [start, start + len). */
struct item {
    const char *start;
    size_t len;
};

static struct item trimmed(const char *start, const char *end)
{
    while (start < end && blank(*start))
        start++;
    while (end > start && blank(end[-1]))
        end--;
    return (struct item){start, (size_t)(end - start)};
}

char *hc_cli_controllers_normalize(const char *text)
{
    /* At most: every item gains "https://" (8 bytes) and keeps its other bytes. */
    size_t items = 1;
    for (const char *p = text; *p; p++)
        items += *p == ',';
    char *out = malloc(strlen(text) + items * 8 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (const char *p = text;;) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        struct item it = trimmed(p, end);
        const char *scheme = memmem(it.start, it.len, "://", 3);
        size_t keep = scheme ? (size_t)(scheme + 3 - it.start) : 0; /* "https://" stays whole */
        while (it.len > keep && it.start[it.len - 1] == '/')
            it.len--;
        /* "host:port" alone means https (hcctld serves nothing else); an empty item stays
         * empty for the parser to name. */
        if (it.len > 0 && !scheme) {
            memcpy(out + o, "https://", 8);
            o += 8;
        }
        memcpy(out + o, it.start, it.len);
        o += it.len;
        if (!comma)
            break;
        out[o++] = ',';
        p = comma + 1;
    }
    out[o] = '\0';
    return out;
}

/* HOST of a URL: a DNS name or IPv4 address (letters, digits, '-', '.', '_'), or an IPv6
 * address in brackets (hex digits, ':', '.'). */
static int host_ok(const char *host, size_t len)
{
    if (len == 0)
        return 0;
    if (host[0] == '[') {
        if (len < 4 || host[len - 1] != ']')
            return 0;
        for (size_t i = 1; i + 1 < len; i++)
            if (!isxdigit((unsigned char)host[i]) && host[i] != ':' && host[i] != '.')
                return 0;
        return 1;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)host[i];
        if (!(c < 0x80 && (isalnum(c) || c == '-' || c == '.' || c == '_')))
            return 0;
    }
    return 1;
}

/* PORT: 1 to 5 digits, 1-65535. */
static int port_ok(const char *port, size_t len)
{
    long value = 0;
    if (len == 0 || len > 5)
        return 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)port[i]))
            return 0;
        value = value * 10 + (port[i] - '0');
    }
    return value >= 1 && value <= 65535;
}

/* Where the port starts in an authority (after the host), or NULL when there is none. */
static const char *port_of(const char *auth, size_t len)
{
    const char *colon = NULL;
    if (auth[0] == '[') {
        const char *close = memchr(auth, ']', len);
        if (close && (size_t)(close - auth) + 1 < len && close[1] == ':')
            colon = close + 1;
    } else {
        colon = memchr(auth, ':', len);
    }
    return colon ? colon + 1 : NULL;
}

/* Checks one item (already trimmed) and writes it, NUL-terminated, into out. */
static int check_url(struct item it, const char *from, char *out, struct hc_error *err)
{
    if (it.len > HC_CLI_URL_MAX)
        return hc_error_set(err, HC_E(USAGE),
                            "a controller URL from %s is too long (%zu bytes; at most %d): "
                            "'%.40s...'",
                            from, it.len, HC_CLI_URL_MAX, it.start);
    memcpy(out, it.start, it.len);
    out[it.len] = '\0';
    while (it.len > 8 && out[it.len - 1] == '/')
        out[--it.len] = '\0';
    for (size_t i = 0; i < it.len; i++)
        if ((unsigned char)out[i] <= ' ' || out[i] == 0x7f)
            return hc_error_set(err, HC_E(USAGE),
                                "the controller URL '%s' (from %s) holds a blank or a control "
                                "character",
                                out, from);
    if (strncasecmp(out, "https://", 8) != 0) {
        hc_error_set(err, HC_E(USAGE),
                     "the controller URL must start with https:// (got '%s' from %s)", out, from);
        return hc_error_hint(err, "hcctld serves its API over HTTPS only: https://HOST:7443");
    }
    const char *auth = out + 8;
    size_t auth_len = strcspn(auth, "/?#");
    if (auth[auth_len] != '\0') {
        hc_error_set(err, HC_E(USAGE),
                     "the controller URL '%s' (from %s) must not have a path, query or fragment",
                     out, from);
        return hc_error_hint(err, "give the base URL only, https://HOST:7443: hcctl adds /v1/...");
    }
    if (memchr(auth, '@', auth_len))
        return hc_error_set(err, HC_E(USAGE),
                            "the controller URL '%s' (from %s) must not hold a user name or "
                            "password",
                            out, from);
    const char *port = port_of(auth, auth_len);
    size_t host_len = port ? (size_t)(port - 1 - auth) : auth_len;
    if (!host_ok(auth, host_len))
        return hc_error_set(err, HC_E(USAGE),
                            "the controller URL '%s' (from %s) has no valid host name or address",
                            out, from);
    if (port && !port_ok(port, auth_len - (size_t)(port - auth)))
        return hc_error_set(err, HC_E(USAGE),
                            "the controller URL '%s' (from %s) has an invalid port (1-65535)", out,
                            from);
    return 0;
}

/* The same controller written twice: hosts compared without case, no port meaning 443. */
static int same_controller(const char *a, const char *b)
{
    const char *pa = port_of(a + 8, strlen(a + 8)), *pb = port_of(b + 8, strlen(b + 8));
    size_t ha = pa ? (size_t)(pa - 1 - (a + 8)) : strlen(a + 8);
    size_t hb = pb ? (size_t)(pb - 1 - (b + 8)) : strlen(b + 8);
    long port_a = pa ? strtol(pa, NULL, 10) : 443, port_b = pb ? strtol(pb, NULL, 10) : 443;
    return ha == hb && strncasecmp(a + 8, b + 8, ha) == 0 && port_a == port_b;
}

int hc_cli_controllers_parse(const char *text, const char *from, struct hc_cli_controllers *out,
                             struct hc_error *err)
{
    size_t items = 1;
    memset(out, 0, sizeof(*out));
    for (const char *p = text; *p; p++)
        items += *p == ',';
    if (items > HC_CLI_MAX_CONTROLLERS) {
        hc_error_set(err, HC_E(USAGE), "at most %d controller URLs may be given (got %zu from %s)",
                     HC_CLI_MAX_CONTROLLERS, items, from);
        return hc_error_hint(err, "an HA controller has two or three instances: "
                                  "https://A:7443,https://B:7443,https://C:7443");
    }
    for (const char *p = text; out->n < items; out->n++) {
        const char *comma = strchr(p, ',');
        struct item it = trimmed(p, comma ? comma : p + strlen(p));
        if (it.len == 0) {
            hc_error_set(err, HC_E(USAGE),
                         "the controller list from %s has an empty item (%zu of %zu)", from,
                         out->n + 1, items);
            return hc_error_hint(err, "separate the URLs with single commas: "
                                      "https://A:7443,https://B:7443");
        }
        if (check_url(it, from, out->url[out->n], err) < 0)
            return -1;
        for (size_t i = 0; i < out->n; i++)
            if (same_controller(out->url[i], out->url[out->n]))
                return hc_error_set(err, HC_E(USAGE),
                                    "the controller '%s' is given twice (from %s)",
                                    out->url[out->n], from);
        p = comma ? comma + 1 : p;
    }
    return 0;
}

int hc_cli_controller_url_check(const char *url, const char *from, char *out, struct hc_error *err)
{
    struct item it = {url, strlen(url)};
    if (memchr(url, ',', it.len))
        return hc_error_set(err, HC_E(USAGE), "the controller URL '%.80s' (from %s) holds a comma",
                            url, from);
    return check_url(it, from, out, err);
}

/* $XDG_CACHE_HOME/hcctl (absolute only, per the XDG spec), else $HOME/.cache/hcctl. */
static int cache_dir(char *buf, size_t len)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/')
        n = snprintf(buf, len, "%s/hcctl", xdg);
    else if (home && home[0])
        n = snprintf(buf, len, "%s/.cache/hcctl", home);
    else
        return -1;
    return n > 0 && (size_t)n < len ? 0 : -1;
}

int hc_cli_leader_cache_read(const struct hc_cli_controllers *list, char *out)
{
    char path[1100], line[HC_CLI_URL_MAX + 3];
    if (cache_dir(path, sizeof(path) - 8) < 0)
        return -1;
    strcat(path, "/leader");
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char *got = fgets(line, sizeof(line), f);
    fclose(f);
    if (!got)
        return -1;
    line[strcspn(line, "\n")] = '\0';
    for (size_t i = 0; i < list->n; i++)
        if (strcmp(list->url[i], line) == 0) {
            memcpy(out, line, strlen(line) + 1);
            return 0;
        }
    return -1;
}

void hc_cli_leader_cache_write(const char *url)
{
    char dir[1100], path[1108], line[HC_CLI_URL_MAX + 2];
    struct hc_error err = {0};
    int n = snprintf(line, sizeof(line), "%s\n", url);
    if (cache_dir(dir, sizeof(dir)) < 0 || n < 0 || (size_t)n >= sizeof(line) ||
        hc_mkdir_p(dir, 0700, &err) < 0)
        return;
    snprintf(path, sizeof(path), "%s/leader", dir);
    hc_file_write_atomic(path, line, (size_t)n, 0600, &err);
}
