/* Levelled logging to stderr: "2026-11-29T18:54:36.123Z hcctld INFO message". */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

static enum hc_log_level min_level = HC_LOG_INFO;
static const char *ident = "hcctl";
static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

void hc_log_set_level(enum hc_log_level level)
{
    min_level = level;
}

int hc_log_parse_level(const char *name, enum hc_log_level *out)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    for (size_t i = 0; i < HC_ARRAY_LEN(names); i++) {
        if (strcmp(name, names[i]) == 0) {
            *out = (enum hc_log_level)i;
            return 0;
        }
    }
    return -1;
}

void hc_log_set_ident(const char *name)
{
    ident = name;
}

void hc_log(enum hc_log_level level, const char *fmt, ...)
{
    if (level < min_level)
        return;
    char line[2048], ts[32];
    int n = snprintf(line, sizeof(line), "%s %s %s ", hc_time_format(hc_now_ms(), ts, sizeof(ts)),
                     ident, level_names[level]);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof(line))
        n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(line) - 1)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    /* One write per line so that lines from several threads never interleave. */
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}
