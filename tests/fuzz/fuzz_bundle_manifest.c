/*
 * Fuzz target: a bundle's manifest.json (common/bundle_manifest.c) as the bundle reader takes
 * it — JSON with duplicate keys refused, then the schema check — and, for a manifest that
 * passes, what the agent does with its strings: the version's ordering against another, the
 * entrypoint's path check, the {placeholder} expansion of args and hook commands
 * (agents/hcagent/service.c). The first line of the input also goes through the signature-line
 * parser (hc_bundle_sig_parse), the other small text format of a bundle. Pure: no files, no
 * network.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agents/hcagent/service.h"
#include "common/bundle.h"
#include "tests/fuzz/fuzz_util.h"

static const struct hc_service_env env = {.node = "n1",
                                          .service_host = "127.0.0.1",
                                          .data_dir = "/var/lib/hcagent/service",
                                          .version = "1.0",
                                          .bundle_dir = "/var/lib/hcagent/software/1.0"};

static void expand(const json_t *v)
{
    if (json_is_string(v)) {
        char *s = hc_service_expand(json_string_value(v), &env);
        if (!s)
            fuzz_die("hc_service_expand: out of memory");
        free(s);
    } else if (json_is_array(v) || json_is_object(v)) {
        size_t i;
        const char *k;
        json_t *item;
        if (json_is_array(v))
            json_array_foreach(v, i, item) expand(item);
        else
            json_object_foreach((json_t *)v, k, item) expand(item);
    }
}

static void signature_line(const uint8_t *data, size_t size)
{
    char line[HC_BUNDLE_SIG_MAX];
    size_t n = 0;
    while (n < size && n < sizeof(line) - 1 && data[n] != '\n')
        n++;
    memcpy(line, data, n);
    line[n] = '\0';
    struct hc_bundle_sig sig;
    struct hc_error err = {0};
    hc_bundle_sig_parse(line, &sig, &err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    signature_line(data, size);
    json_error_t jerr;
    json_t *m = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
    struct hc_error err = {0};
    if (json_is_object(m) && hc_bundle_manifest_check(m, &err) == 0) {
        const char *version = json_string_value(json_object_get(m, "version"));
        const char *entry = json_string_value(json_object_get(m, "entrypoint"));
        if (!version || !hc_bundle_version_valid(version))
            fuzz_die("a manifest that passed has an invalid version");
        int a = hc_bundle_version_cmp(version, "1.10"), b = hc_bundle_version_cmp("1.10", version);
        if ((a < 0) != (b > 0) || (a == 0) != (b == 0))
            fuzz_die("version order is not antisymmetric for '%s'", version);
        if (!entry || !hc_bundle_path_valid(entry))
            fuzz_die("a manifest that passed has an invalid entrypoint");
        expand(m);
    }
    json_decref(m);
    return 0;
}
