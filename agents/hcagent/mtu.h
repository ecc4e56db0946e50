/*
 * MTU changes with a commit-confirmed guard (docs/api.md "Agent API: network").
 *
 * The agent applies a new MTU together with a revert timer on its event loop. Unless the
 * controller confirms the change (after re-probing the node against the others) before
 * revert_at, the agent puts the previous MTU back by itself: a change that cut the node off is
 * undone without anyone reaching it. The pending change and the last revert live in memory and
 * in a small state file in the data directory, written before the MTU is touched, so that an
 * agent restarted while a change is pending reverts at start (revert_at passed) or re-arms the
 * timer. Links are read and changed over rtnetlink (libmnl); this needs CAP_NET_ADMIN.
 *
 * Every change and every revert also flushes the route cache of the agent's network namespace:
 * path MTUs learnt at the old MTU (kept ~10 minutes, locked when they were below 552) would
 * otherwise go on limiting the new one, and a verification would blame "a router" for them.
 */
#ifndef HC_AGENTS_MTU_H
#define HC_AGENTS_MTU_H

#include <event2/event.h>
#include <jansson.h>
#include <net/if.h>
#include <stdint.h>

#include "common/constants.h"
#include "common/error.h"

#define HC_MTU_STATE_FILE "mtu-state.json"
#define HC_MTU_MIN_REVERT_MS 100
#define HC_MTU_MAX_REVERT_MS (24LL * 3600 * 1000)

/* A link's MTU and the bounds the kernel accepts (IFLA_MIN_MTU / IFLA_MAX_MTU; when the kernel
 * does not say, 68 and 65535). */
struct hc_mtu_link {
    int index;
    int mtu;
    int min_mtu;
    int max_mtu;
};

/* Reads the link ifname. -1 with err (400 invalid_argument for an unknown interface). */
int hc_mtu_link_get(const char *ifname, struct hc_mtu_link *out, struct hc_error *err);
/* Sets the MTU of ifname (RTM_NEWLINK with IFLA_MTU, acknowledged). -1 with err. */
int hc_mtu_link_set(const char *ifname, int mtu, struct hc_error *err);

struct hc_mtu_change {
    char change_id[33];
    char interface[IFNAMSIZ];
    int previous_mtu;
    int mtu;
    int64_t revert_at_ms;   /* wall clock, epoch ms */
    int64_t reverted_at_ms; /* for last_revert; 0 while pending */
    int requested;          /* for last_revert: 1 reverted on request (hc_mtu_revert), 0 timer */
    char revert_error[256]; /* why putting previous_mtu back failed; "" = it worked */
};

struct hc_mtu_mgr;
/* Loads DATA_DIR/mtu-state.json (missing = nothing pending) and, for a pending change, reverts
 * now when revert_at has passed or arms the timer on base. NULL with err (unreadable state
 * file). Free with hc_mtu_mgr_free, before base. */
struct hc_mtu_mgr *hc_mtu_mgr_new(struct event_base *base, const char *data_dir,
                                  struct hc_error *err);
/* Stops the timer; a pending change stays in the state file for the next start. */
void hc_mtu_mgr_free(struct hc_mtu_mgr *m);

/* Applies mtu to ifname with a revert after revert_after_ms. Errors: 400 invalid_argument (mtu
 * outside 68..the NIC's maximum, unknown interface, revert_after_ms outside
 * HC_MTU_MIN_REVERT_MS..HC_MTU_MAX_REVERT_MS), 409 conflict (a change is pending), 500 (netlink
 * or the state file). out (may be NULL) receives the change. */
int hc_mtu_apply(struct hc_mtu_mgr *m, const char *ifname, int mtu, int64_t revert_after_ms,
                 struct hc_mtu_change *out, struct hc_error *err);
/* Confirms the pending change: the timer is cancelled and the MTU stays. Confirming the change
 * that was last confirmed again is a success (retries). Errors: 409 conflict (that change was
 * reverted), 404 not_found (unknown change_id). */
int hc_mtu_confirm(struct hc_mtu_mgr *m, const char *change_id, struct hc_error *err);
/* Reverts the pending change now (what the timer does). 0 when nothing is pending. */
int hc_mtu_revert_now(struct hc_mtu_mgr *m);
/* Reverts change_id now, at the controller's request (its verification failed): the counterpart
 * of hc_mtu_confirm, so that nobody waits for the timer. Reverting a change that was already
 * reverted (by the timer or an earlier request) is a success too (retries); out (may be NULL)
 * receives that revert, `requested` saying who did it. Errors: 400 invalid_argument (no
 * change_id), 409 conflict (that change was confirmed), 404 not_found (unknown change_id), 500
 * (the previous MTU could not be put back: the change is no longer pending either way). */
int hc_mtu_revert(struct hc_mtu_mgr *m, const char *change_id, struct hc_mtu_change *out,
                  struct hc_error *err);

/* Flushes the route cache of this network namespace: writes "1" to
 * /proc/sys/net/ipv4/route/flush and, when IPv6 is there, /proc/sys/net/ipv6/route/flush. Drops
 * cached path MTUs (also locked ones) so that the next packets learn the path as it is now.
 * Needs CAP_NET_ADMIN; -1 with err (what could not be written), which callers log. */
int hc_mtu_route_flush(struct hc_error *err);

/* {"pending":CHANGE|null,"last_revert":REVERT|null} (hc_mtu_revert_json). New reference. */
json_t *hc_mtu_state_json(const struct hc_mtu_mgr *m);
/* {"change_id","interface","previous_mtu","mtu","revert_at"}. New reference. */
json_t *hc_mtu_change_json(const struct hc_mtu_change *c);
/* A revert: the change plus {"reverted_at","reverted_by":"timer"|"request"[,"error"]}. New
 * reference. */
json_t *hc_mtu_revert_json(const struct hc_mtu_change *c);

#endif
