/*
 * Shared fixtures for the unit tests (tests/unit/support/, one static library every test links):
 * a scratch controller data dir with its database, the cluster's certificates, and an agent
 * stand-in that serves the routes a test gives it with mutual TLS on 127.0.0.1. What a test
 * asserts stays in the test; only the setting up lives here. Include after cmocka.h: the
 * helpers fail the running test with cmocka's assertions.
 */
#ifndef HC_TESTS_UNIT_SUPPORT_H
#define HC_TESTS_UNIT_SUPPORT_H

#include <pthread.h>
#include <semaphore.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "common/error.h"
#include "common/https_server.h"
#include "common/pki.h"
#include "controller/controller.h"
#include "db/db.h"

/* Skips the running test, saying why, unless cond holds. */
#define HC_TEST_SKIP_UNLESS(cond, reason)                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            print_message("skipping: %s\n", reason);                                               \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* --- controller data dir (ctl.c) ------------------------------------------------------------ */

/* A fresh scratch dir NAME.XXXXXX under $HC_TEST_TMP (else /tmp) into dir, ctl's paths in it
 * (hc_controller_paths) and cluster id c-test. */
void hc_test_ctl_dir(struct hc_controller *ctl, char *dir, size_t len, const char *name);
/* Opens ctl's database (a new one where none is) with the cluster c-test in it. */
struct hc_db *hc_test_ctl_db(const struct hc_controller *ctl);
/* The same, then crl.pem as hcctld run writes it at start (needs ctl's CA key). */
struct hc_db *hc_test_ctl_db_crl(const struct hc_controller *ctl);
/* A scratch dir with a fresh database DIR/hcctld.db, as cmocka setup and teardown: setup puts
 * a struct hc_test_db in *state. */
struct hc_test_db {
    char *dir;
    struct hc_db *db;
};
int hc_test_db_setup(void **state, const char *name);
int hc_test_db_teardown(void **state);
/* The column n of the one row sql (with one string parameter arg) returns. */
int64_t hc_test_db_count(struct hc_db *db, const char *sql, const char *arg);

/* --- certificates (pki.c) ------------------------------------------------------------------- */

/* Issues a certificate for spec from ca and writes it and its new key. */
void hc_test_cert_write(X509 *ca, EVP_PKEY *ca_key, const struct hc_cert_spec *spec,
                        const char *cert_path, const char *key_path);
/* The cluster CA (ctl's ca_file and ca_key_file), the controller's client certificate and, when
 * agent_cert is not NULL, an agent's server certificate (CN n1, for 127.0.0.1 and localhost). */
void hc_test_cluster_pki(const struct hc_controller *ctl, const char *agent_cert,
                         const char *agent_key);
/* A text file's whole content (malloc'd), e.g. a certificate's PEM as a node row holds it. */
char *hc_test_file_text(const char *path);

/* --- agent stand-in (standin.c) ------------------------------------------------------------- */

struct hc_test_route {
    const char *method;
    const char *path;
    hc_route_fn fn;
};

/* An hc_http_server on its own thread and event loop (no libevent object crosses threads),
 * stopped through a pipe. */
struct hc_test_standin {
    struct hc_tls_server_config tls;
    const struct hc_test_route *routes;
    size_t nroutes;
    void *arg; /* given to every route */
    pthread_t thread;
    sem_t ready;
    int stop_pipe[2];
    int port;
    struct hc_error err;
    int running;
};

/* Serves routes (each called with arg) on a free port of 127.0.0.1 with the server certificate
 * cert/key, asking for a client certificate from ca_file with the controller's CN. */
void hc_test_standin_start(struct hc_test_standin *s, const char *cert, const char *key,
                           const char *ca_file, const struct hc_test_route *routes, size_t nroutes,
                           void *arg);
/* Stops it; nothing when it is not running. */
void hc_test_standin_stop(struct hc_test_standin *s);

/* --- files (files.c) ------------------------------------------------------------------------ */

/* Writes text to path (atomically, with mode). */
void hc_test_write_text(const char *path, const char *text, int mode);
/* A fake cgroup v2 tree: ROOT/cgroup.controllers and, at this process's own cgroup path below
 * it, the files a real hierarchy has (controllers listed, an empty subtree_control). The base
 * directory goes into base. */
void hc_test_fake_cgroup(const char *root, const char *controllers, char *base, size_t len);

/* Runs the shell command made from fmt, its output discarded; its exit status (a failure is
 * said on stderr). */
int hc_test_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Moves this process into a network namespace of its own: 0, or -1 with why not in reason
 * (not root, or unshare failed) for the tests to skip with. */
int hc_test_unshare_net(char *reason, size_t len);

/* --- sockets (net.c) ------------------------------------------------------------------------ */

/* A loopback socket that listens and never accepts: TCP connects, nothing ever answers. Returns
 * the fd and fills port. */
int hc_test_silent_listener(int *port);

#endif
