/*
 * Unit-test support: files a test lays out (tests/unit/support/support.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/unit/support/support.h"

void hc_test_write_text(const char *path, const char *text, int mode)
{
    struct hc_error err = {0};
    assert_int_equal(hc_file_write_atomic(path, text, strlen(text), mode, &err), 0);
}

void hc_test_fake_cgroup(const char *root, const char *controllers, char *base, size_t len)
{
    char line[1024] = "", path[2400];
    struct hc_error err = {0};
    FILE *f = fopen("/proc/self/cgroup", "r");
    const char *own = "";
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "0::", 3) == 0) {
            line[strcspn(line, "\n")] = '\0';
            own = strcmp(line + 3, "/") ? line + 3 : "";
            break;
        }
    if (f)
        fclose(f);
    snprintf(base, len, "%s%s", root, own);
    assert_int_equal(hc_mkdir_p(base, 0755, &err), 0);
    snprintf(path, sizeof(path), "%s/cgroup.controllers", root);
    hc_test_write_text(path, controllers, 0644);
    snprintf(path, sizeof(path), "%s/cgroup.controllers", base);
    hc_test_write_text(path, controllers, 0644);
    snprintf(path, sizeof(path), "%s/cgroup.subtree_control", base);
    hc_test_write_text(path, "", 0644);
}

int hc_test_sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    strncat(cmd, " >/dev/null 2>&1", sizeof(cmd) - strlen(cmd) - 1);
    int rc = system(cmd);
    if (rc != 0)
        fprintf(stderr, "'%s' failed (%d)\n", cmd, rc);
    return rc;
}

int hc_test_unshare_net(char *reason, size_t len)
{
    if (geteuid() != 0) {
        snprintf(reason, len, "needs root (network namespaces)");
        return -1;
    }
    if (unshare(CLONE_NEWNET) < 0) {
        snprintf(reason, len, "unshare(CLONE_NEWNET): %s", strerror(errno));
        return -1;
    }
    return 0;
}
