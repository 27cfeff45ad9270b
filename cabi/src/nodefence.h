/*
 * nodefence.h — the node barrier's segment, as package nodefence lays it
 * out (nodefence/layout.go), and the library's use of it (nodefence.c).
 */
#ifndef CABI_NODEFENCE_H
#define CABI_NODEFENCE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pmix.h"

#ifndef HIDDEN
#define HIDDEN __attribute__((visibility("hidden")))
#endif

#define NF_MAGIC 0x706d7866u /* "pmxf" */
#define NF_VERSION 1u
#define NF_SIZE 4096u
#define NF_MAX_RANKS (1u << 20)
#define NF_OFF_MAGIC 0
#define NF_OFF_VERSION 4
#define NF_OFF_N 8
#define NF_OFF_SIZE 12
#define NF_OFF_STATUS 16
#define NF_OFF_FLAGS 20
#define NF_FLAG_PARTIAL 1u /* a node's share of a larger job: the last arrival tells the agent */
#define NF_OFF_GEN 64
#define NF_OFF_ARRIVED 128

/* nf_check checks a segment of len bytes for n ranks: 0 when usable.
 * Pure, so it can be fuzzed alone (cabi/fuzz/fuzz_nodefence.c). */
static inline int nf_check(const void *seg, size_t len, uint32_t n)
{
    const unsigned char *p = seg;
    uint32_t v[4];
    if (NULL == p || len < NF_SIZE || 0 == n || n > NF_MAX_RANKS) {
        return -1;
    }
    memcpy(v, p + NF_OFF_MAGIC, sizeof(v)); /* magic, version, n, size */
    if (NF_MAGIC != v[0] || NF_VERSION != v[1] || n != v[2] || NF_SIZE != v[3]) {
        return -1;
    }
    return 0;
}
/* nf_adopt maps the fd the hello's reply carried (-1: none) if it passes
 * every check, and closes it either way. Called once attached. */
HIDDEN void nf_adopt(int fd);
/* nf_release unmaps it, after the progress thread ended. */
HIDDEN void nf_release(void);
/* nf_eligible: a fence the barrier takes (nodefence.Eligible's rule):
 * no procs or self's nspace with PMIX_RANK_WILDCARD, and no info but
 * PMIX_COLLECT_DATA false. */
HIDDEN int nf_eligible(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[], size_t ninfo,
                       const char *self);
/* nf_fence runs the fence on the barrier: 1 and *rc its result, or 0
 * when there is none or it is broken (the fence takes the agent's path).
 * On a partial barrier the node's last arrival calls tell(arg), which
 * sends the agent the fence marked pmixbus.nodefence.last and returns
 * its reply's status, the fence's result. */
HIDDEN int nf_fence(pmix_status_t *rc, pmix_status_t (*tell)(void *arg), void *arg);
/* nf_break breaks the barrier with st (the progress thread lost the
 * agent): every waiter wakes, later fences take the agent's path. */
HIDDEN void nf_break(pmix_status_t st);

#endif
