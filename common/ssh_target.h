/*
 * [USER@]HOST[:PORT], the way an admin names a node to bring in over SSH. Shared by hcctl (a bad
 * one is a usage error before anything is sent) and hcctld (which connects to it).
 */
#ifndef HC_COMMON_SSH_TARGET_H
#define HC_COMMON_SSH_TARGET_H

#include <stddef.h>

#include "common/error.h"

struct hc_ssh_target {
    char user[64];
    char host[256];
    int port;
};
/* Parses [USER@]HOST[:PORT] (user defaults to root, port to 22; [v6]:port accepted). */
int hc_ssh_target_parse(const char *text, struct hc_ssh_target *t, struct hc_error *err);
/* "user@host:port" into buf. */
void hc_ssh_target_format(const struct hc_ssh_target *t, char *buf, size_t len);

#endif
