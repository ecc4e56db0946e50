/*
 * {storage_host}: the storage service's address on the storage network (docs/bundles.md
 * "Placeholders"). The agent's configuration key storage_interface (valid names, round trip,
 * refusals), the address read from the interface at each environment (a fresh network namespace:
 * its lo has no IPv4 address until it is up, then 127.0.0.1), the fallback to the listen host,
 * the placeholder in arguments, the environment and hooks, and a start refused with the reason
 * when the interface has no address.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agents/hcagent/agent.h"
#include "agents/hcagent/service.h"
#include "agents/hcagent/software.h"
#include "common/json_util.h"

static json_t *config_json(const char *iface_json)
{
    char text[512];
    snprintf(text, sizeof(text),
             "{\"name\":\"n1\",\"controller\":\"https://c:7443\",\"listen\":\"10.0.0.1:7444\","
             "\"agent_url\":\"https://10.0.0.1:7444\"%s%s}",
             iface_json ? ",\"storage_interface\":" : "", iface_json ? iface_json : "");
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    return j;
}

static void test_config_key(void **state)
{
    struct hc_agent_config cfg;
    struct hc_error err = {0};
    json_t *j = config_json("\"eth1\"");
    assert_int_equal(hc_agent_config_from_json(j, &cfg, &err), 0);
    assert_string_equal(cfg.storage_interface, "eth1");
    json_t *back = hc_agent_config_to_json(&cfg);
    assert_string_equal(hc_json_str(back, "storage_interface", ""), "eth1");
    json_decref(back);
    json_decref(j);

    /* Configurations from before the storage network: none, and none written back. */
    j = config_json(NULL);
    assert_int_equal(hc_agent_config_from_json(j, &cfg, &err), 0);
    assert_string_equal(cfg.storage_interface, "");
    back = hc_agent_config_to_json(&cfg);
    assert_null(json_object_get(back, "storage_interface"));
    json_decref(back);
    json_decref(j);

    const char *bad[] = {"\"\"",       "\"eth1/x\"", "\"a b\"", "\"..\"", "\"0123456789abcdef\"",
                         "\"eth0:1\"", "7"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&err, 0, sizeof(err));
        j = config_json(bad[i]);
        assert_int_equal(hc_agent_config_from_json(j, &cfg, &err), -1);
        assert_non_null(strstr(err.message, "storage_interface"));
        json_decref(j);
    }
    assert_int_equal(hc_agent_iface_check("bond0.100", &err), 0);
    assert_int_equal(hc_agent_iface_check("0123456789abcde", &err), 0); /* 15: IFNAMSIZ - 1 */
}

static void env_with(struct hc_service_env *env, const char *storage_host, const char *problem)
{
    memset(env, 0, sizeof(*env));
    snprintf(env->node, sizeof(env->node), "n1");
    snprintf(env->service_host, sizeof(env->service_host), "10.0.0.1");
    snprintf(env->storage_host, sizeof(env->storage_host), "%s", storage_host);
    snprintf(env->storage_problem, sizeof(env->storage_problem), "%s", problem);
    snprintf(env->version, sizeof(env->version), "1.3");
    snprintf(env->bundle_dir, sizeof(env->bundle_dir), "/nonexistent");
}

static void test_placeholder(void **state)
{
    struct hc_service_env env;
    struct hc_error err = {0};
    env_with(&env, "10.1.0.1", "");
    char *x = hc_service_expand("{storage_host}:7480 {service_host}:1 {storage_host}", &env);
    assert_string_equal(x, "10.1.0.1:7480 10.0.0.1:1 10.1.0.1");
    free(x);
    char **envp = hc_service_environ(&env);
    int seen = 0;
    for (size_t i = 0; envp && envp[i]; i++)
        seen |= strcmp(envp[i], "HC_STORAGE_HOST=10.1.0.1") == 0;
    assert_true(seen);
    hc_service_env_free(envp);

    json_t *uses = json_loads("{\"args\":[\"--listen\",\"{storage_host}:7480\"]}", 0, NULL);
    json_t *hook_uses = json_loads("{\"args\":[],\"reload\":{\"http\":\"http://"
                                   "{storage_host}:7480/reload\"}}",
                                   0, NULL);
    json_t *old = json_loads("{\"args\":[\"--listen\",\"{service_host}:7480\"],\"health\":"
                             "{\"http\":\"http://{service_host}:7480/health\"}}",
                             0, NULL);
    assert_int_equal(hc_service_env_check(uses, &env, &err), 0);

    /* No address: a manifest that serves on it is refused with the reason, one that does not
     * still runs. */
    env_with(&env, "", "storage interface eth1 has no IPv4 address");
    assert_int_equal(hc_service_env_check(uses, &env, &err), -1);
    assert_string_equal(err.code, "precondition_failed");
    assert_non_null(strstr(err.message, "storage interface eth1 has no IPv4 address"));
    memset(&err, 0, sizeof(err));
    assert_int_equal(hc_service_env_check(hook_uses, &env, &err), -1);
    assert_int_equal(hc_service_env_check(old, &env, &err), 0);

    /* A hook toward it answers the reason, without asking "http://:7480". */
    struct hc_hook_result r;
    json_t *hook = json_loads("{\"http\":\"http://{storage_host}:7480/health\"}", 0, NULL);
    hc_hook_run(HC_HOOK_HEALTH, hook, &env, &r);
    assert_true(r.defined);
    assert_false(r.ok);
    assert_non_null(strstr(r.detail, "storage interface eth1 has no IPv4 address"));
    json_decref(hook);
    json_decref(uses);
    json_decref(hook_uses);
    json_decref(old);
}

/* lo up (the kernel gives it 127.0.0.1 then). 0 or -1. */
static int lo_up(void)
{
    struct ifreq ifr;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    int rc = fd >= 0 && ioctl(fd, SIOCGIFFLAGS, &ifr) == 0 &&
                     (ifr.ifr_flags |= IFF_UP, ioctl(fd, SIOCSIFFLAGS, &ifr) == 0)
                 ? 0
                 : -1;
    if (fd >= 0)
        close(fd);
    return rc;
}

/* In the child, in a network namespace of its own: the exit status says which check failed. */
static int resolve_in_fresh_netns(void)
{
    struct hc_agent_software sw;
    struct hc_service_env env;
    memset(&sw, 0, sizeof(sw));
    snprintf(sw.cfg.name, sizeof(sw.cfg.name), "n1");
    snprintf(sw.service_host, sizeof(sw.service_host), "10.0.0.1");
    if (unshare(CLONE_NEWNET) < 0 && unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
        return 10;
    /* no storage interface configured: the listen host */
    hc_agent_sw_env(&sw, "1.3", &env);
    if (strcmp(env.storage_host, "10.0.0.1") != 0 || env.storage_problem[0])
        return 11;
    /* lo is down and has no address in a new namespace */
    snprintf(sw.cfg.storage_interface, sizeof(sw.cfg.storage_interface), "lo");
    hc_agent_sw_env(&sw, "1.3", &env);
    if (env.storage_host[0] || !strstr(env.storage_problem, "storage interface lo has no IPv4"))
        return 12;
    /* re-addressed: followed at the next environment (each start makes one) */
    if (lo_up() < 0)
        return 13;
    hc_agent_sw_env(&sw, "1.3", &env);
    if (strcmp(env.storage_host, "127.0.0.1") != 0 || env.storage_problem[0])
        return 14;
    snprintf(sw.cfg.storage_interface, sizeof(sw.cfg.storage_interface), "nosuch0");
    hc_agent_sw_env(&sw, "1.3", &env);
    if (env.storage_host[0] || !strstr(env.storage_problem, "nosuch0 does not exist"))
        return 15;
    return 0;
}

static void test_resolution(void **state)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(resolve_in_fresh_netns());
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_key),
        cmocka_unit_test(test_placeholder),
        cmocka_unit_test(test_resolution),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
