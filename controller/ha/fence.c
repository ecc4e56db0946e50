/* The process-wide fencing term and leader check (fence.h). */
#include "controller/ha/fence.h"

#include <stdatomic.h>

static _Atomic int64_t fence_term;
static int (*_Atomic fence_checker)(struct hc_error *err);

int64_t hc_fence_term(void)
{
    return atomic_load(&fence_term);
}

void hc_fence_set_term(int64_t term)
{
    atomic_store(&fence_term, term);
}

int hc_fence_check(struct hc_error *err)
{
    int (*check)(struct hc_error *) = atomic_load(&fence_checker);
    return check ? check(err) : 0;
}

void hc_fence_set_checker(int (*check)(struct hc_error *err))
{
    atomic_store(&fence_checker, check);
}
