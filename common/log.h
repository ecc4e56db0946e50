/*
 * Logging with levels, to stderr, one line per message with a timestamp and the level.
 * Thread-safe (each line is written with one write call).
 */
#ifndef HC_COMMON_LOG_H
#define HC_COMMON_LOG_H

enum hc_log_level { HC_LOG_DEBUG = 0, HC_LOG_INFO, HC_LOG_WARN, HC_LOG_ERROR };

void hc_log_set_level(enum hc_log_level level);
/* Parses "debug|info|warn|error"; returns 0 or -1 for an unknown name. */
int hc_log_parse_level(const char *name, enum hc_log_level *out);
/* Prefix identifying the program ("hcctld", "hcagent"). */
void hc_log_set_ident(const char *ident);
void hc_log(enum hc_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define HC_DEBUG(...) hc_log(HC_LOG_DEBUG, __VA_ARGS__)
#define HC_INFO(...) hc_log(HC_LOG_INFO, __VA_ARGS__)
#define HC_WARN(...) hc_log(HC_LOG_WARN, __VA_ARGS__)
#define HC_ERROR(...) hc_log(HC_LOG_ERROR, __VA_ARGS__)

#endif
