/*
 * nodefence.c — the node barrier: PMIx_Fence without data among a job's
 * ranks that all run on one node, in shared memory, with no round trip
 * to the agent (package nodefence, docs/cabi.md).
 *
 * The agent hands each rank of such a job a sealed memfd with its
 * hello's reply (SCM_RIGHTS). The library maps it at PMIx_Init if it
 * passes every check (nf_check: magic, version, size, the rank count of
 * the job on this node; the fd sealed against shrinking, so no rank can
 * make another's mapping fault) and otherwise ignores it: its fences then
 * reach the barrier through the agent, which arrives for it.
 *
 * An arrival reads the generation g (odd: broken, the fence takes the
 * agent's path), adds one to the counter, and the n-th resets it, adds 2
 * to the generation (on a partial barrier, a node's share of a larger
 * job: has the agent run the job's fence, which then adds 2) and wakes
 * everyone (FUTEX_WAKE, not private: the
 * mapping is shared between processes); the others spin a little, then
 * FUTEX_WAIT until the generation moves. Moved by 2 or more: done; by 1:
 * broken first, and the status stored with the break is returned. The
 * progress thread breaks the barrier when it loses the agent, the agent
 * when a rank of the job leaves.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/futex.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "conn.h"
#include "nodefence.h"

static struct {
    pthread_mutex_t mu; /* one fence of the process at a time */
    char *p;            /* the mapping; NULL: no barrier */
    uint32_t n;
    int partial;        /* NF_FLAG_PARTIAL */
} nf = {.mu = PTHREAD_MUTEX_INITIALIZER};

static uint32_t *word(size_t off) { return (uint32_t *)(void *)(nf.p + off); }

/* job_count is a uint32 of the hello's job info, 0 when absent. */
static uint32_t job_count(const char *key)
{
    pmix_value_t v;
    uint32_t n = 0;
    if (hello_lookup(key, &v)) {
        if (PMIX_UINT32 == v.type) {
            n = v.data.uint32;
        }
        PMIx_Value_destruct(&v);
    }
    return n;
}

void nf_adopt(int fd)
{
    struct stat st;
    int seals, partial;
    uint32_t size = job_count("pmix.job.size"), n = job_count("pmix.local.size"), flags;
    void *p;
    if (fd < 0) {
        return;
    }
    seals = fcntl(fd, F_GET_SEALS);
    if (0 == n || n > size || fstat(fd, &st) < 0 || st.st_size != NF_SIZE || seals < 0 ||
        (seals & (F_SEAL_SHRINK | F_SEAL_SEAL)) != (F_SEAL_SHRINK | F_SEAL_SEAL)) {
        close(fd);
        return;
    }
    p = mmap(NULL, NF_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (MAP_FAILED == p) {
        return;
    }
    /* n ranks here: the whole job, or a share of it on a partial barrier */
    memcpy(&flags, (char *)p + NF_OFF_FLAGS, sizeof(flags));
    partial = 0 != (flags & NF_FLAG_PARTIAL);
    if (0 != nf_check(p, NF_SIZE, n) || (flags & ~NF_FLAG_PARTIAL) || partial != (n < size)) {
        munmap(p, NF_SIZE);
        return;
    }
    pthread_mutex_lock(&nf.mu);
    nf.n = n;
    nf.partial = partial;
    __atomic_store_n(&nf.p, (char *)p, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&nf.mu);
}

void nf_release(void)
{
    pthread_mutex_lock(&nf.mu);
    if (NULL != nf.p) {
        munmap(nf.p, NF_SIZE);
        __atomic_store_n(&nf.p, NULL, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&nf.mu);
}

int nf_eligible(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[], size_t ninfo, const char *self)
{
    size_t i;
    if (NULL == procs) {
        nprocs = 0;
    }
    if (nprocs > 1) {
        return 0;
    }
    if (1 == nprocs && (PMIX_RANK_WILDCARD != procs[0].rank ||
                        ('\0' != procs[0].nspace[0] && 0 != strncmp(procs[0].nspace, self, PMIX_MAX_NSLEN)))) {
        return 0;
    }
    if (NULL == info) {
        ninfo = 0;
    }
    for (i = 0; i < ninfo; i++) {
        if (0 != strncmp(info[i].key, PMIX_COLLECT_DATA, PMIX_MAX_KEYLEN + 1) || PMIX_BOOL != info[i].value.type ||
            info[i].value.data.flag) {
            return 0;
        }
    }
    return 1;
}

static void wake_all(void)
{
    syscall(SYS_futex, word(NF_OFF_GEN), FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

void nf_break(pmix_status_t st)
{
    uint32_t g;
    if (NULL == __atomic_load_n(&nf.p, __ATOMIC_ACQUIRE)) {
        return;
    }
    /* Not under nf.mu: a fence in progress holds it. The mapping stays
     * until nf_release, after the progress thread ended. */
    g = __atomic_load_n(word(NF_OFF_GEN), __ATOMIC_ACQUIRE);
    if (g & 1) {
        return;
    }
    {
        uint32_t zero = 0;
        __atomic_compare_exchange_n(word(NF_OFF_STATUS), &zero, (uint32_t)st, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    }
    __atomic_fetch_add(word(NF_OFF_GEN), 1, __ATOMIC_SEQ_CST);
    wake_all();
}

/* broken_status is what a fence whose barrier broke returns: a lost
 * agent as a lost connection, as a fence waiting for the agent's reply
 * gets; otherwise the break's status, PMIX_ERR_PROC_TERM_WO_SYNC by
 * default (a rank left: the agent's path answers so too). */
static pmix_status_t broken_status(void)
{
    int32_t st = (int32_t)__atomic_load_n(word(NF_OFF_STATUS), __ATOMIC_ACQUIRE);
    int lost;
    pthread_mutex_lock(&lib.mu);
    lost = lib.lost;
    pthread_mutex_unlock(&lib.mu);
    if (lost) {
        return PMIX_ERR_LOST_CONNECTION;
    }
    return st < 0 && st > -100000 ? (pmix_status_t)st : PMIX_ERR_PROC_TERM_WO_SYNC;
}

/* Spins before sleeping: a few microseconds, which a barrier of ranks
 * that arrive together often needs no more than. */
#define NF_SPIN 256

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

int nf_fence(pmix_status_t *rc, pmix_status_t (*tell)(void *arg), void *arg)
{
    uint32_t g, cur;
    int spin;
    pthread_mutex_lock(&nf.mu);
    if (NULL == nf.p) {
        pthread_mutex_unlock(&nf.mu);
        return 0;
    }
    g = __atomic_load_n(word(NF_OFF_GEN), __ATOMIC_ACQUIRE);
    if (g & 1) {
        pthread_mutex_unlock(&nf.mu);
        return 0; /* broken: the agent's path, which knows why */
    }
    if (__atomic_add_fetch(word(NF_OFF_ARRIVED), 1, __ATOMIC_SEQ_CST) == nf.n) {
        __atomic_store_n(word(NF_OFF_ARRIVED), 0, __ATOMIC_SEQ_CST);
        if (nf.partial) {
            /* The agent runs the job's fence for the node's ranks, then
             * moves the generation (or breaks the barrier) and answers. */
            *rc = tell(arg);
            pthread_mutex_unlock(&nf.mu);
            return 1;
        }
        __atomic_fetch_add(word(NF_OFF_GEN), 2, __ATOMIC_SEQ_CST);
        wake_all();
        pthread_mutex_unlock(&nf.mu);
        *rc = PMIX_SUCCESS;
        return 1;
    }
    for (spin = 0;; spin++) {
        cur = __atomic_load_n(word(NF_OFF_GEN), __ATOMIC_ACQUIRE);
        if (cur != g) {
            break;
        }
        if (spin < NF_SPIN) {
            cpu_relax();
            continue;
        }
        syscall(SYS_futex, word(NF_OFF_GEN), FUTEX_WAIT, g, NULL, NULL, 0);
    }
    *rc = cur - g >= 2 ? PMIX_SUCCESS : broken_status();
    pthread_mutex_unlock(&nf.mu);
    return 1;
}
