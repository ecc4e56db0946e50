/*
 * Scratch directories for unit tests: made under $HC_TEST_TMP (else /tmp) and removed with
 * everything in them. Header-only: every test executable is one file plus the libraries.
 */
#ifndef HC_TESTS_UNIT_TESTDIR_H
#define HC_TESTS_UNIT_TESTDIR_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* A fresh directory named NAME.XXXXXX; the caller frees the path. NULL on failure. */
static inline char *hc_test_mkdtemp(const char *name)
{
    const char *base = getenv("HC_TEST_TMP");
    char tmpl[4096];
    if (!base || !*base)
        base = "/tmp";
    if (hc_mkdir_p(base, 0700, NULL) < 0)
        return NULL;
    snprintf(tmpl, sizeof(tmpl), "%s/%s.XXXXXX", base, name);
    return mkdtemp(tmpl) ? strdup(tmpl) : NULL;
}

static inline int hc_test_rm_entry(const char *path, const struct stat *st, int flag,
                                   struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes dir and everything below it (symbolic links are not followed). */
static inline void hc_test_rmtree(const char *dir)
{
    if (dir)
        nftw(dir, hc_test_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
