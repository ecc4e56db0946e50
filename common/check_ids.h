/*
 * The ids of the controller's pre-flight checks (controller/state/checks.h, docs/api.md
 * "Checks"): one list for hcctld, which runs them, and hcctl, which refuses an unknown id in
 * --skip-checks before asking. Ids are API: never rename one.
 */
#ifndef HC_COMMON_CHECK_IDS_H
#define HC_COMMON_CHECK_IDS_H

#define HC_CHECK_IDS                                                                               \
    X(node_unreachable)                                                                            \
    X(service_unhealthy)                                                                           \
    X(mtu_mismatch)                                                                                \
    X(cert_expiring)                                                                               \
    X(clock_skew)                                                                                  \
    X(disk_low)                                                                                    \
    X(version_skew)                                                                                \
    X(config_drift)

#endif
