/* Unit tests for the pure router of common/https_server.c: patterns, captures, 404 vs 405. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/https_server.h"

static int route_a, route_b; /* their addresses tell the routes apart */

static void handler(struct hc_request *req, void *arg)
{
    (void)req;
    (void)arg;
}

static const struct hc_route *match(const struct hc_router *r, const char *method, const char *path,
                                    struct hc_route_params *p, struct hc_error *err)
{
    hc_error_clear(err);
    memset(p, 0, sizeof(*p));
    return hc_router_match(r, method, path, p, err);
}

static void test_match_with_params(void **state)
{
    struct hc_router *r = hc_router_new();
    struct hc_route_params p;
    struct hc_error err;
    assert_int_equal(hc_router_add(r, "GET", "/v1/nodes/{name}", 3, handler, &route_a), 0);
    assert_int_equal(hc_router_add(r, "POST", "/v1/operations/{id}/pause", 0, handler, &route_b),
                     0);

    const struct hc_route *rt = match(r, "GET", "/v1/nodes/n1", &p, &err);
    assert_non_null(rt);
    assert_ptr_equal(rt->arg, &route_a);
    assert_int_equal(rt->flags, 3);
    assert_string_equal(rt->pattern, "/v1/nodes/{name}");
    assert_int_equal(p.count, 1);
    assert_string_equal(p.name[0], "name");
    assert_string_equal(p.value[0], "n1");

    rt = match(r, "POST", "/v1/operations/op-42/pause", &p, &err);
    assert_non_null(rt);
    assert_ptr_equal(rt->arg, &route_b);
    assert_int_equal(p.count, 1);
    assert_string_equal(p.name[0], "id");
    assert_string_equal(p.value[0], "op-42");
    hc_router_free(r);
}

static void test_several_params_and_literal_preference(void **state)
{
    struct hc_router *r = hc_router_new();
    struct hc_route_params p;
    struct hc_error err;
    assert_int_equal(hc_router_add(r, "GET", "/v1/{a}/x/{b}", 0, handler, &route_a), 0);
    assert_int_equal(hc_router_add(r, "GET", "/v1/nodes/{name}", 0, handler, &route_a), 0);
    assert_int_equal(hc_router_add(r, "GET", "/v1/nodes/self", 0, handler, &route_b), 0);

    const struct hc_route *rt = match(r, "GET", "/v1/one/x/two", &p, &err);
    assert_non_null(rt);
    assert_int_equal(p.count, 2);
    assert_string_equal(hc_router_match(r, "GET", "/v1/one/x/two", &p, &err)->pattern,
                        "/v1/{a}/x/{b}");
    assert_string_equal(p.name[0], "a");
    assert_string_equal(p.value[0], "one");
    assert_string_equal(p.name[1], "b");
    assert_string_equal(p.value[1], "two");

    /* A literal segment beats a capture whatever the order of registration. */
    rt = match(r, "GET", "/v1/nodes/self", &p, &err);
    assert_non_null(rt);
    assert_ptr_equal(rt->arg, &route_b);
    assert_int_equal(p.count, 0);
    rt = match(r, "GET", "/v1/nodes/other", &p, &err);
    assert_non_null(rt);
    assert_string_equal(rt->pattern, "/v1/nodes/{name}");
    hc_router_free(r);
}

static void test_percent_decoding(void **state)
{
    struct hc_router *r = hc_router_new();
    struct hc_route_params p;
    struct hc_error err;
    assert_int_equal(hc_router_add(r, "GET", "/v1/nodes/{name}", 0, handler, NULL), 0);

    assert_non_null(match(r, "GET", "/v1/nodes/node%20one", &p, &err));
    assert_string_equal(p.value[0], "node one");
    assert_non_null(match(r, "GET", "/v1/nodes/a%2Fb", &p, &err));
    assert_string_equal(p.value[0], "a/b");
    /* '+' is not a space in a path. */
    assert_non_null(match(r, "GET", "/v1/nodes/a+b", &p, &err));
    assert_string_equal(p.value[0], "a+b");
    /* A NUL in a value can only be an attack: no match. */
    assert_null(match(r, "GET", "/v1/nodes/a%00b", &p, &err));
    assert_int_equal(err.status, 404);

    /* Literal segments compare with the raw path. */
    assert_null(match(r, "GET", "/v1/node%73/x", &p, &err));
    assert_string_equal(err.code, HC_ERR_NOT_FOUND);

    /* A value that cannot fit the 256-byte slot is no match rather than a truncated name. */
    char path[600];
    snprintf(path, sizeof(path), "/v1/nodes/%0300d", 7);
    assert_null(match(r, "GET", path, &p, &err));
    assert_int_equal(err.status, 404);
    snprintf(path, sizeof(path), "/v1/nodes/%0255d", 7);
    assert_non_null(match(r, "GET", path, &p, &err));
    assert_int_equal(strlen(p.value[0]), 255);
    hc_router_free(r);
}

static void test_404_vs_405(void **state)
{
    struct hc_router *r = hc_router_new();
    struct hc_route_params p;
    struct hc_error err;
    assert_int_equal(hc_router_add(r, "GET", "/v1/nodes/{name}", 0, handler, NULL), 0);
    assert_int_equal(hc_router_add(r, "DELETE", "/v1/nodes/{name}", 0, handler, NULL), 0);
    assert_int_equal(hc_router_add(r, "GET", "/v1/nodes", 0, handler, NULL), 0);

    assert_null(match(r, "GET", "/v1/clusters", &p, &err));
    assert_int_equal(err.status, 404);
    assert_string_equal(err.code, HC_ERR_NOT_FOUND);
    assert_non_null(strstr(err.message, "/v1/clusters"));

    assert_null(match(r, "PUT", "/v1/nodes/n1", &p, &err));
    assert_int_equal(err.status, 405);
    assert_string_equal(err.code, HC_ERR_METHOD_NOT_ALLOWED);
    assert_non_null(strstr(err.message, "PUT"));
    assert_string_equal(err.hint, "allowed: GET, DELETE");

    assert_null(match(r, "POST", "/v1/nodes", &p, &err));
    assert_int_equal(err.status, 405);
    assert_string_equal(err.hint, "allowed: GET");
    hc_router_free(r);
}

/* Defined behaviour: a trailing slash is a different path, with an empty last segment that no
 * capture matches, and there is no redirect. */
static void test_trailing_slash(void **state)
{
    struct hc_router *r = hc_router_new();
    struct hc_route_params p;
    struct hc_error err;
    assert_int_equal(hc_router_add(r, "GET", "/v1/nodes/{name}", 0, handler, NULL), 0);
    assert_int_equal(hc_router_add(r, "GET", "/v1/version", 0, handler, NULL), 0);
    assert_int_equal(hc_router_add(r, "GET", "/", 0, handler, NULL), 0);

    assert_null(match(r, "GET", "/v1/nodes/", &p, &err));
    assert_int_equal(err.status, 404);
    assert_null(match(r, "GET", "/v1/nodes", &p, &err));
    assert_int_equal(err.status, 404);
    assert_null(match(r, "GET", "/v1/version/", &p, &err));
    assert_int_equal(err.status, 404);
    assert_null(match(r, "GET", "/v1/nodes/n1/", &p, &err));
    assert_null(match(r, "GET", "/v1//version", &p, &err));
    assert_non_null(match(r, "GET", "/v1/version", &p, &err));
    assert_non_null(match(r, "GET", "/", &p, &err));
    assert_string_equal(hc_router_match(r, "GET", "/", &p, &err)->pattern, "/");
    hc_router_free(r);
}

static void test_malformed_patterns_refused(void **state)
{
    static const char *bad[] = {
        "",
        "v1/nodes",
        "/v1//nodes",
        "/v1/nodes/",
        "/v1/{}",
        "/v1/{name",
        "/v1/name}",
        "/v1/x{name}",
        "/v1/{name}x",
        "/v1/{Name}",
        "/v1/{1a}",
        "/v1/{a-b}",
        "/v1/{a}/{a}",
        "/v1/a b",
        "/v1/a%20b",
        "/v1/a?b",
        "/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}",
        "/v1/{abcdefghijklmnopqrstuvwxyz0123456}",
    };
    struct hc_router *r = hc_router_new();
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (hc_router_add(r, "GET", bad[i], 0, handler, NULL) != -1)
            fail_msg("pattern '%s' was accepted", bad[i]);
    }
    char longp[200];
    memset(longp, 'a', sizeof(longp));
    longp[0] = '/';
    longp[sizeof(longp) - 1] = '\0';
    assert_int_equal(hc_router_add(r, "GET", longp, 0, handler, NULL), -1);
    /* Methods: uppercase letters, shorter than 8. */
    assert_int_equal(hc_router_add(r, "get", "/v1/x", 0, handler, NULL), -1);
    assert_int_equal(hc_router_add(r, "", "/v1/x", 0, handler, NULL), -1);
    assert_int_equal(hc_router_add(r, "GETTTTTT", "/v1/x", 0, handler, NULL), -1);
    assert_int_equal(hc_router_add(r, "GET", "/v1/x", 0, NULL, NULL), -1);
    /* Duplicates are refused; eight captures are the maximum. */
    assert_int_equal(hc_router_add(r, "GET", "/v1/x", 0, handler, NULL), 0);
    assert_int_equal(hc_router_add(r, "GET", "/v1/x", 0, handler, NULL), -1);
    assert_int_equal(hc_router_add(r, "GET", "/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}", 0, handler, NULL),
                     0);
    assert_int_equal(hc_router_add(r, "GET", "/v1/{snake_case_2}", 0, handler, NULL), 0);
    /* Nothing refused was added: only "/v1/{a}/{a}" would match this path. */
    struct hc_route_params p;
    struct hc_error err;
    assert_null(match(r, "GET", "/v1/p/q", &p, &err));
    assert_int_equal(err.status, 404);
    hc_router_free(r);
}

static void test_too_many_routes(void **state)
{
    struct hc_router *r = hc_router_new();
    char pattern[64];
    int added = 0;
    for (int i = 0; i < 1000; i++) {
        snprintf(pattern, sizeof(pattern), "/v1/r%d", i);
        if (hc_router_add(r, "GET", pattern, 0, handler, NULL) != 0)
            break;
        added++;
    }
    assert_int_equal(added, 64);
    struct hc_route_params p;
    struct hc_error err;
    assert_non_null(match(r, "GET", "/v1/r63", &p, &err));
    assert_null(match(r, "GET", "/v1/r64", &p, &err));
    assert_int_equal(err.status, 404);
    hc_router_free(r);
}

static void test_empty_router(void **state)
{
    struct hc_router *r = hc_router_new();
    struct hc_route_params p;
    struct hc_error err;
    assert_null(match(r, "GET", "/", &p, &err));
    assert_int_equal(err.status, 404);
    hc_router_free(r);
    hc_router_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match_with_params),
        cmocka_unit_test(test_several_params_and_literal_preference),
        cmocka_unit_test(test_percent_decoding),
        cmocka_unit_test(test_404_vs_405),
        cmocka_unit_test(test_trailing_slash),
        cmocka_unit_test(test_malformed_patterns_refused),
        cmocka_unit_test(test_too_many_routes),
        cmocka_unit_test(test_empty_router),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
