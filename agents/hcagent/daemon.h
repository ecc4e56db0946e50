/*
 * Running hcagent as a supervised daemon where no service manager runs it (hosts without
 * systemd, the namespace lab): detach from the terminal and the SSH session, write a pid file,
 * log to a file, and restart the agent when it crashes, with backoff. A clean exit of the agent
 * (SIGTERM, or a leave request) ends the supervisor too.
 */
#ifndef HC_AGENTS_DAEMON_H
#define HC_AGENTS_DAEMON_H

#include "common/error.h"

struct hc_daemon_options {
    const char *pidfile;  /* holds the supervisor's pid while it runs; NULL: none */
    const char *log_file; /* stdout and stderr of the agent; NULL: /dev/null */
};

/* Detaches and supervises. Returns only in the supervised worker process (0), where the caller
 * then serves; the calling process exits 0 once the supervisor is running, and the supervisor
 * exits when the worker stops cleanly. Returns -1 with err if detaching failed (still in the
 * caller's process). A pid file naming a live supervisor is refused (409 conflict). */
int hc_daemon_start(const struct hc_daemon_options *opts, struct hc_error *err);

#endif
