/*
 * Unit tests for agents/hcagent/netinfo.c: the interfaces read over rtnetlink must agree with what
 * iproute2 (`ip`) reports for the same kernel. With CAP_SYS_ADMIN and CAP_NET_ADMIN the test
 * also builds a bridge with a veth port in a private network namespace (the host's interfaces
 * are not touched) to check kind, master and addresses; without them that case is skipped.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agents/hcagent/netinfo.h"

static json_t *find_iface(json_t *list, const char *name)
{
    size_t i;
    json_t *iface;
    json_array_foreach(list, i, iface)
    {
        if (strcmp(json_string_value(json_object_get(iface, "name")), name) == 0)
            return iface;
    }
    return NULL;
}

static int has_address(json_t *iface, const char *cidr)
{
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(iface, "addresses"), i, a)
    {
        if (strcmp(json_string_value(a), cidr) == 0)
            return 1;
    }
    return 0;
}

static json_t *read_interfaces(void)
{
    struct hc_error err = {0};
    json_t *list = hc_netinfo_interfaces(&err);
    if (!list)
        fail_msg("hc_netinfo_interfaces: %s", err.message);
    assert_true(json_is_array(list));
    return list;
}

/* The word after `key ` in line, or NULL. */
static const char *word_after(const char *line, const char *key, char *buf, size_t len)
{
    char pattern[64];
    snprintf(pattern, sizeof(pattern), " %s ", key);
    const char *p = strstr(line, pattern);
    if (!p)
        return NULL;
    p += strlen(pattern);
    size_t n = strcspn(p, " \\\n");
    snprintf(buf, len, "%.*s", (int)n, p);
    return buf;
}

/* One line of `ip -o link`: "4: eth0@if5: <...> mtu 1500 ... state UP ... master br0 ...". */
static void check_link_line(json_t *list, const char *line)
{
    int index;
    char name[64], mtu[32], state[32], master[64];
    assert_int_equal(sscanf(line, "%d: %63[^:@ ]", &index, name), 2);
    json_t *iface = find_iface(list, name);
    if (!iface)
        fail_msg("interface '%s' from ip is missing", name);
    assert_int_equal(json_integer_value(json_object_get(iface, "index")), index);
    assert_non_null(word_after(line, "mtu", mtu, sizeof(mtu)));
    assert_int_equal(json_integer_value(json_object_get(iface, "mtu")), atoi(mtu));
    assert_non_null(word_after(line, "state", state, sizeof(state)));
    for (char *c = state; *c; c++)
        *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
    assert_string_equal(json_string_value(json_object_get(iface, "state")), state);
    if (word_after(line, "master", master, sizeof(master)))
        assert_string_equal(json_string_value(json_object_get(iface, "master")), master);
    else
        assert_true(json_is_null(json_object_get(iface, "master")));
}

/* Runs cmd into out (NUL-terminated); returns its exit status. */
static int run_capture(const char *cmd, char *out, size_t len)
{
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    return pclose(p);
}

/* Our interfaces and the output of cmd, taken while nothing changed: other programs (lab tests
 * building veth pairs) may add or remove interfaces at any time, so read ours before and after
 * cmd and retry until both reads agree. Skips when iproute2 is missing. */
static json_t *stable_read(const char *cmd, char *out, size_t len)
{
    for (int attempt = 0; attempt < 50; attempt++) {
        json_t *before = read_interfaces();
        int status = run_capture(cmd, out, len);
        json_t *after = read_interfaces();
        int same = json_equal(before, after);
        json_decref(before);
        if (status != 0 || !out[0]) {
            json_decref(after);
            skip(); /* no iproute2 here: nothing to compare with */
        }
        if (same)
            return after;
        json_decref(after);
        usleep(100 * 1000);
    }
    fail_msg("the interfaces kept changing while the test ran");
    return NULL;
}

/* Checks every line of `ip -o link` output against list; returns the number of lines. */
static int check_ip_link(json_t *list, char *text)
{
    int n = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        check_link_line(list, line);
        n++;
    }
    return n;
}

static void test_every_link_matches_ip(void **state)
{
    (void)state;
    static char text[256 * 1024];
    json_t *list = stable_read("ip -o link 2>/dev/null", text, sizeof(text));
    int n = check_ip_link(list, text);
    assert_int_equal(json_array_size(list), n);
    json_decref(list);
}

static void test_loopback(void **state)
{
    (void)state;
    json_t *list = read_interfaces();
    json_t *lo = find_iface(list, "lo");
    assert_non_null(lo);
    char line[4096] = "", mtu[32];
    int status = run_capture("ip -o link show lo 2>/dev/null", line, sizeof(line));
    /* Without iproute2, the kernel's default loopback MTU. */
    int want = status == 0 && word_after(line, "mtu", mtu, sizeof(mtu)) ? atoi(mtu) : 65536;
    assert_int_equal(json_integer_value(json_object_get(lo, "mtu")), want);
    assert_true(has_address(lo, "127.0.0.1/8"));
    assert_true(json_is_null(json_object_get(lo, "kind")));
    assert_true(json_is_null(json_object_get(lo, "master")));
    assert_true(json_is_integer(json_object_get(lo, "index")));
    assert_true(json_is_string(json_object_get(lo, "state")));
    json_decref(list);
}

/* Every address of `ip -o addr` is listed on its interface with its prefix length. */
static void test_addresses_match_ip(void **state)
{
    (void)state;
    static char text[256 * 1024];
    json_t *list = stable_read("ip -o addr 2>/dev/null", text, sizeof(text));
    char name[64], family[16], cidr[128], *save = NULL;
    int n = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (sscanf(line, "%*d: %63s %15s %127s", name, family, cidr) != 3)
            continue;
        json_t *iface = find_iface(list, name);
        if (!iface || !has_address(iface, cidr))
            fail_msg("address %s of '%s' (from ip) is missing", cidr, name);
        n++;
    }
    assert_true(n > 0); /* at least 127.0.0.1/8 */
    json_decref(list);
}

static void test_sorted_by_index(void **state)
{
    (void)state;
    json_t *list = read_interfaces();
    json_int_t prev = 0;
    size_t i;
    json_t *iface;
    json_array_foreach(list, i, iface)
    {
        json_int_t idx = json_integer_value(json_object_get(iface, "index"));
        assert_true(idx > prev);
        prev = idx;
    }
    json_decref(list);
}

static void test_operstate_names(void **state)
{
    (void)state;
    assert_string_equal(hc_netinfo_operstate_name(6), "up");
    assert_string_equal(hc_netinfo_operstate_name(2), "down");
    assert_string_equal(hc_netinfo_operstate_name(0), "unknown");
    assert_string_equal(hc_netinfo_operstate_name(5), "dormant");
    assert_string_equal(hc_netinfo_operstate_name(200), "unknown");
}

static int sh(const char *cmd)
{
    char full[512];
    snprintf(full, sizeof(full), "%s >/dev/null 2>&1", cmd);
    return system(full);
}

/* In a private namespace: br-hc (bridge, mtu 9000) with veth port vhc0 (peer vhc1). */
static void check_bridge_namespace(void)
{
    if (sh("ip link add br-hc mtu 9000 type bridge") != 0 ||
        sh("ip link add vhc0 mtu 9000 type veth peer name vhc1") != 0)
        skip(); /* bridge or veth not available in this kernel */
    assert_int_equal(sh("ip link set vhc0 master br-hc"), 0);
    assert_int_equal(sh("ip addr add 198.18.0.1/24 dev br-hc"), 0);
    assert_int_equal(sh("ip addr add fd00:18::1/64 dev br-hc nodad"), 0);
    json_t *list = read_interfaces();
    json_t *br = find_iface(list, "br-hc"), *v0 = find_iface(list, "vhc0");
    json_t *v1 = find_iface(list, "vhc1");
    assert_non_null(br);
    assert_non_null(v0);
    assert_non_null(v1);
    assert_string_equal(json_string_value(json_object_get(br, "kind")), "bridge");
    assert_string_equal(json_string_value(json_object_get(v0, "kind")), "veth");
    assert_string_equal(json_string_value(json_object_get(v0, "master")), "br-hc");
    assert_true(json_is_null(json_object_get(v1, "master")));
    assert_true(json_is_null(json_object_get(br, "master")));
    assert_int_equal(json_integer_value(json_object_get(br, "mtu")), 9000);
    assert_true(has_address(br, "198.18.0.1/24"));
    assert_true(has_address(br, "fd00:18::1/64"));
    assert_string_equal(json_string_value(json_object_get(v1, "state")), "down");
    json_decref(list);
    /* Nothing else changes interfaces in this private namespace. */
    static char text[64 * 1024];
    list = stable_read("ip -o link 2>/dev/null", text, sizeof(text));
    assert_int_equal(check_ip_link(list, text), json_array_size(list));
    json_decref(list);
}

/* Runs last: a failed assertion leaves the process in the private namespace. */
static void test_bridge_in_private_netns(void **state)
{
    (void)state;
    int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    assert_true(home >= 0);
    if (unshare(CLONE_NEWNET) < 0) {
        close(home);
        print_message("skipping: unshare(CLONE_NEWNET): %s (needs root)\n", strerror(errno));
        skip();
    }
    check_bridge_namespace();
    /* Back to the original namespace; the private one disappears with its interfaces. */
    assert_int_equal(setns(home, CLONE_NEWNET), 0);
    close(home);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loopback),           cmocka_unit_test(test_every_link_matches_ip),
        cmocka_unit_test(test_addresses_match_ip), cmocka_unit_test(test_sorted_by_index),
        cmocka_unit_test(test_operstate_names),    cmocka_unit_test(test_bridge_in_private_netns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
