/*
 * conn.c — the connection to the agent: attaching (hello), the request
 * table, and the progress thread.
 *
 * PMIx_Init starts one progress thread, PMIx_Finalize joins it; nothing
 * runs at load time. The thread blocks in poll(2) on the socket and an
 * eventfd (the wake-up): an idle process makes no system call. It reads
 * frames, hands replies to the threads waiting for them (lib.cv), and
 * runs, one at a time and in arrival order, what the application is
 * called back for — event handlers, completion callbacks, the _nb calls'
 * callbacks — never holding a lock the application may need. No signal
 * handler is installed and no signal mask changed: writes use
 * MSG_NOSIGNAL, and every system call retries on EINTR.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "nodefence.h"

struct lib lib = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .wmu = PTHREAD_MUTEX_INITIALIZER,
    .initmu = PTHREAD_MUTEX_INITIALIZER,
    .cv = PTHREAD_COND_INITIALIZER,
    .fd = -1,
    .wakefd = -1,
};

__thread int cabi_in_handler;

int on_progress_thread(void) { return lib.running && pthread_equal(pthread_self(), lib.thread); }

static void wake(void)
{
    uint64_t one = 1;
    ssize_t rc;
    if (lib.wakefd < 0) {
        return;
    }
    do {
        rc = write(lib.wakefd, &one, sizeof(one));
    } while (rc < 0 && EINTR == errno);
}

struct work *work_new(void (*fn)(struct work *))
{
    struct work *w = calloc(1, sizeof(*w));
    if (NULL != w) {
        w->fn = fn;
    }
    return w;
}

void enqueue_locked(struct work *w)
{
    if (NULL == w) {
        return;
    }
    w->next = NULL;
    if (NULL == lib.qtail) {
        lib.qhead = w;
    } else {
        lib.qtail->next = w;
    }
    lib.qtail = w;
    if (!on_progress_thread()) {
        wake();
    }
}

void enqueue(struct work *w)
{
    pthread_mutex_lock(&lib.mu);
    enqueue_locked(w);
    pthread_mutex_unlock(&lib.mu);
}

/* ---- writing ---- */

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t rc = send(fd, p, n, MSG_NOSIGNAL);
        if (rc < 0) {
            if (EINTR == errno) {
                continue;
            }
            if (EAGAIN == errno || EWOULDBLOCK == errno) {
                struct pollfd pfd = {fd, POLLOUT, 0};
                (void)poll(&pfd, 1, -1);
                continue;
            }
            return -1;
        }
        p += rc;
        n -= (size_t)rc;
    }
    return 0;
}

/* flush_held_locked writes the completions held back, if any: before any
 * other frame, so the agent reads every frame in the order it was made.
 * Called with wmu. */
static int flush_held_locked(void)
{
    int rc = 0;
    if (0 == lib.held_n) {
        return 0;
    }
    wb_patch32(&lib.held, lib.held_at, lib.held_n);
    if (0 == fw_end(&lib.held_fw)) {
        rc = lib.fd < 0 || lib.lost ? -1 : write_all(lib.fd, lib.held.p, lib.held.len);
    }
    /* Out of memory the completions are lost: the agent passes their
     * handlers over after their timeout, as for any that never completes. */
    lib.held.len = 0;
    lib.held.oom = 0;
    lib.held_n = 0;
    return rc;
}

/* held_room is how far a batch of completions grows before it is written
 * even while corked (the agent's own batches are about as large). */
enum { held_room = 64 << 10 };

pmix_status_t send_done_entry(const struct wbuf *entry)
{
    int rc = 0;
    pthread_mutex_lock(&lib.wmu);
    if (0 == lib.held_n) {
        lib.held.len = 0;
        fw_begin(&lib.held_fw, &lib.held, T_INVOKE_DONE_BATCH, 0);
        fw_key(&lib.held_fw, "dn");
        lib.held_at = wb_array32(&lib.held);
    }
    wb_raw(&lib.held, entry->p, entry->len);
    lib.held_n++;
    if (!(on_progress_thread() && lib.corked) || lib.held.len >= held_room) {
        rc = flush_held_locked();
    }
    pthread_mutex_unlock(&lib.wmu);
    return rc < 0 ? PMIX_ERR_LOST_CONNECTION : PMIX_SUCCESS;
}

/* uncork ends a run of invocations on the progress thread: what they
 * completed is written, in one frame. */
static void uncork(void)
{
    lib.corked = 0;
    lib.ran = 0;
    pthread_mutex_lock(&lib.wmu);
    (void)flush_held_locked();
    pthread_mutex_unlock(&lib.wmu);
}

pmix_status_t send_oneway(struct wbuf *w)
{
    int rc;
    pthread_mutex_lock(&lib.wmu);
    rc = flush_held_locked();
    if (0 == rc) {
        rc = lib.fd < 0 || lib.lost ? -1 : write_all(lib.fd, w->p, w->len);
    }
    pthread_mutex_unlock(&lib.wmu);
    return rc < 0 ? PMIX_ERR_LOST_CONNECTION : PMIX_SUCCESS;
}

static void unlink_req_locked(struct req *r)
{
    struct req **pp;
    for (pp = &lib.reqs; NULL != *pp; pp = &(*pp)->next) {
        if (*pp == r) {
            *pp = r->next;
            r->next = NULL;
            return;
        }
    }
}

pmix_status_t send_request(struct req *r, unsigned type, void (*build)(struct fw *f, void *arg), void *arg)
{
    struct wbuf w = {0};
    struct fw f;
    uint64_t seq;
    int rc, oom;
    pthread_mutex_lock(&lib.wmu);
    pthread_mutex_lock(&lib.mu);
    if (lib.inits == 0 && type != T_FINALIZE) {
        pthread_mutex_unlock(&lib.mu);
        pthread_mutex_unlock(&lib.wmu);
        return PMIX_ERR_INIT;
    }
    if (lib.forked) {
        pthread_mutex_unlock(&lib.mu);
        pthread_mutex_unlock(&lib.wmu);
        return PMIX_ERR_UNREACH;
    }
    if (lib.fd < 0 || lib.lost) {
        pthread_mutex_unlock(&lib.mu);
        pthread_mutex_unlock(&lib.wmu);
        return PMIX_ERR_LOST_CONNECTION;
    }
    seq = ++lib.seq;
    if (NULL != r) {
        r->seq = seq;
        r->next = lib.reqs;
        lib.reqs = r;
    }
    pthread_mutex_unlock(&lib.mu);
    fw_begin(&f, &w, type, seq);
    if (NULL != build) {
        build(&f, arg);
    }
    rc = fw_end(&f);
    if (0 == rc) {
        rc = flush_held_locked();
    }
    if (0 == rc) {
        rc = write_all(lib.fd, w.p, w.len);
    }
    pthread_mutex_unlock(&lib.wmu);
    oom = w.oom;
    wb_free(&w);
    if (rc < 0 && NULL != r) {
        pthread_mutex_lock(&lib.mu);
        unlink_req_locked(r);
        pthread_mutex_unlock(&lib.mu);
    }
    if (rc < 0) {
        return oom ? PMIX_ERR_NOMEM : PMIX_ERR_LOST_CONNECTION;
    }
    return PMIX_SUCCESS;
}

void req_release(struct req *r)
{
    free(r->body);
    r->body = NULL;
}

/* ---- reading ---- */

static void connection_ended_locked(const char *why, int garbled);

/* dispatch_locked hands one frame to whoever waits for it. */
static int dispatch_locked(struct frame *f, const char *raw, size_t len)
{
    switch (f->t) {
    case T_REPLY: {
        struct req *r;
        for (r = lib.reqs; NULL != r && r->seq != f->s; r = r->next) {
        }
        if (NULL == r) {
            return 0; /* a request whose caller gave up, or a one-way's */
        }
        unlink_req_locked(r);
        if (NULL != r->reg) {
            /* The registration is installed before anything behind the
             * reply (its replayed events) is looked at. */
            struct reg *g = r->reg;
            if (f->has_st && f->st < 0) {
                g->state = -1;
            } else {
                g->agent_id = f->id;
                g->state = REG_OK;
                if (!g->dropped) {
                    reg_place_locked(g);
                }
            }
        }
        r->body = malloc(len);
        if (NULL == r->body) {
            r->lost = PMIX_ERR_NOMEM;
        } else {
            memcpy(r->body, raw, len);
            r->len = len;
        }
        r->done = 1;
        if (NULL == r->cb) {
            pthread_cond_broadcast(&lib.cv);
        } else {
            struct work *w = work_new(NULL);
            extern void run_reply(struct work * w);
            if (NULL == w) {
                return -1;
            }
            w->fn = run_reply;
            w->req = r;
            enqueue_locked(w);
        }
        return 0;
    }
    case T_INVOKE: {
        struct cur c = {raw, raw + len, 0};
        struct work *w = invoke_work(&c, 0, f);
        if (NULL == w) {
            return -1;
        }
        enqueue_locked(w);
        return 0;
    }
    case T_INVOKE_BATCH: {
        struct cur c = cur_of(f->iv);
        uint32_t n = cur_array(&c), i;
        if (c.bad) {
            return -1;
        }
        for (i = 0; i < n; i++) {
            struct work *w = invoke_work(&c, 1, f);
            if (NULL == w) {
                return -1;
            }
            enqueue_locked(w);
        }
        return c.p == f->iv.end ? 0 : -1;
    }
    case T_ERROR:
        return 0; /* the agent closes after it: the end says why */
    default:
        return 0; /* iof-data and frames of later versions: not asked for */
    }
}

void run_reply(struct work *w)
{
    struct req *r = w->req;
    struct frame f;
    size_t used;
    if (r->lost || NULL == r->body || FRAME_OK != frame_parse(r->body, r->len, WIRE_MAX_FRAME, &f, &used, NULL)) {
        r->cb(r, NULL, r->lost ? r->lost : PMIX_ERR_LOST_CONNECTION);
    } else {
        r->cb(r, &f, f.has_st ? (pmix_status_t)f.st : PMIX_SUCCESS);
    }
    /* r is the callback's to free: it frees it */
}

/* read_some reads what the socket has and dispatches every whole frame.
 * Returns -1 when the connection ended (connection_ended_locked done). */
static int read_some(void)
{
    ssize_t n;
    size_t off = 0;
    if (lib.rcap - lib.rlen < 65536) {
        size_t cap = lib.rcap ? lib.rcap * 2 : 131072;
        char *p = realloc(lib.rbuf, cap);
        if (NULL == p) {
            pthread_mutex_lock(&lib.mu);
            connection_ended_locked("out of memory", 0);
            pthread_mutex_unlock(&lib.mu);
            return -1;
        }
        lib.rbuf = p;
        lib.rcap = cap;
    }
    do {
        n = recv(lib.fd, lib.rbuf + lib.rlen, lib.rcap - lib.rlen, MSG_DONTWAIT);
    } while (n < 0 && EINTR == errno);
    if (n < 0 && (EAGAIN == errno || EWOULDBLOCK == errno)) {
        return 0;
    }
    pthread_mutex_lock(&lib.mu);
    if (n <= 0) {
        connection_ended_locked(n == 0 ? "the agent closed the connection" : strerror(errno), 0);
        pthread_mutex_unlock(&lib.mu);
        return -1;
    }
    lib.rlen += (size_t)n;
    for (;;) {
        struct frame f;
        size_t used = 0;
        const char *why = NULL;
        enum frame_rc rc = frame_parse(lib.rbuf + off, lib.rlen - off, WIRE_MAX_FRAME, &f, &used, &why);
        if (FRAME_MORE == rc) {
            break;
        }
        if (FRAME_OK != rc || dispatch_locked(&f, lib.rbuf + off, used) < 0) {
            connection_ended_locked(why ? why : "malformed frame from the agent", 1);
            pthread_mutex_unlock(&lib.mu);
            return -1;
        }
        off += used;
    }
    pthread_mutex_unlock(&lib.mu);
    if (off > 0) {
        memmove(lib.rbuf, lib.rbuf + off, lib.rlen - off);
        lib.rlen -= off;
    }
    return 0;
}

static void fail_req_locked(struct req *r, pmix_status_t st)
{
    r->lost = st;
    r->done = 1;
    if (NULL != r->reg) {
        r->reg->state = -1;
    }
    if (NULL != r->cb) {
        struct work *w = work_new(run_reply);
        if (NULL != w) {
            w->req = r;
            enqueue_locked(w);
        }
    }
}

/* connection_ended_locked fails the requests in flight and, unless the
 * process finalized, raises PMIX_ERR_LOST_CONNECTION in its own handlers
 * (after PMIX_ERR_COMM_FAILURE when a garbled frame ended it). */
static void connection_ended_locked(const char *why, int garbled)
{
    struct req *r, *next;
    char msg[512];
    if (lib.lost) {
        return;
    }
    lib.lost = 1;
    for (r = lib.reqs; NULL != r; r = next) {
        next = r->next;
        r->next = NULL;
        fail_req_locked(r, PMIX_ERR_LOST_CONNECTION);
    }
    lib.reqs = NULL;
    pthread_cond_broadcast(&lib.cv);
    if (lib.final) {
        return;
    }
    nf_break(PMIX_ERR_LOST_CONNECTION); /* ranks waiting at the node barrier hear it too */
    if (garbled) {
        snprintf(msg, sizeof(msg), "undecodable frame from the agent: %s", why);
        internal_event_locked(PMIX_ERR_COMM_FAILURE, msg);
    }
    snprintf(msg, sizeof(msg), "lost connection to the agent: %s", why);
    internal_event_locked(PMIX_ERR_LOST_CONNECTION, msg);
}

static void drain_wake(void)
{
    uint64_t v;
    ssize_t rc;
    do {
        rc = read(lib.wakefd, &v, sizeof(v));
    } while (rc < 0 && EINTR == errno);
}

static void *progress(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lib.mu);
    for (;;) {
        struct pollfd pfd[2];
        nfds_t n = 1;
        int sock, timeout;
        if (NULL != lib.qhead) {
            struct work *w = lib.qhead;
            lib.qhead = w->next;
            if (NULL == lib.qhead) {
                lib.qtail = NULL;
            }
            /* Invocations run back to back hold their completions back
             * (at most 256 of them, as the Go client's queue), one frame
             * for all when the run ends: a burst of events costs each
             * rank a write per run, not per event, and the agent a read. */
            if (run_invoke == w->fn) {
                lib.corked = 1;
            }
            pthread_mutex_unlock(&lib.mu);
            w->fn(w);
            free(w);
            pthread_mutex_lock(&lib.mu);
            if (lib.corked && (++lib.ran >= 256 || NULL == lib.qhead || run_invoke != lib.qhead->fn)) {
                pthread_mutex_unlock(&lib.mu);
                uncork();
                pthread_mutex_lock(&lib.mu);
            }
            continue;
        }
        if (lib.stop) {
            /* Nothing queued: what is still in flight fails, its
             * callbacks run, and the thread ends with the queue empty. */
            if (!lib.lost && lib.fd >= 0) {
                connection_ended_locked("finalized", 0);
                continue;
            }
            if (NULL == lib.qhead) {
                break;
            }
            continue;
        }
        sock = lib.lost ? -1 : lib.fd;
        timeout = NULL == lib.timed ? -1 : expire_locked(); /* idle: no deadline, no wake-up */
        if (NULL != lib.qhead) {
            continue; /* a handler passed over: its chain moves on */
        }
        pthread_mutex_unlock(&lib.mu);
        pfd[0].fd = lib.wakefd;
        pfd[0].events = POLLIN;
        if (sock >= 0) {
            pfd[1].fd = sock;
            pfd[1].events = POLLIN;
            n = 2;
        }
        if (poll(pfd, n, timeout) > 0) {
            if (pfd[0].revents) {
                drain_wake();
            }
            if (n > 1 && pfd[1].revents) {
                (void)read_some();
            }
        }
        pthread_mutex_lock(&lib.mu);
    }
    pthread_mutex_unlock(&lib.mu);
    return NULL;
}

static int deadline_passed(const struct timespec *dl)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return now.tv_sec > dl->tv_sec || (now.tv_sec == dl->tv_sec && now.tv_nsec >= dl->tv_nsec);
}

pmix_status_t await_reply(struct req *r, int timeout_ms, struct frame *f)
{
    struct timespec dl;
    size_t used;
    clock_gettime(CLOCK_REALTIME, &dl);
    if (timeout_ms >= 0) {
        dl.tv_sec += timeout_ms / 1000;
        dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
    }
    if (on_progress_thread()) {
        /* Called back on the progress thread, for a request that waits
         * only for the agent (Commit, Log, Abort): read the socket here;
         * what else arrives is queued behind the running callback. */
        pthread_mutex_lock(&lib.mu);
        while (!r->done) {
            struct pollfd pfd = {lib.fd, POLLIN, 0};
            int ms = -1;
            if (lib.lost || lib.fd < 0) {
                break;
            }
            if (timeout_ms >= 0) {
                struct timespec now;
                clock_gettime(CLOCK_REALTIME, &now);
                ms = (int)((dl.tv_sec - now.tv_sec) * 1000 + (dl.tv_nsec - now.tv_nsec) / 1000000);
                if (ms <= 0) {
                    break;
                }
            }
            pthread_mutex_unlock(&lib.mu);
            if (poll(&pfd, 1, ms) > 0) {
                (void)read_some();
            }
            pthread_mutex_lock(&lib.mu);
        }
    } else {
        pthread_mutex_lock(&lib.mu);
        while (!r->done) {
            if (timeout_ms < 0) {
                pthread_cond_wait(&lib.cv, &lib.mu);
            } else if (ETIMEDOUT == pthread_cond_timedwait(&lib.cv, &lib.mu, &dl) || deadline_passed(&dl)) {
                break;
            }
        }
    }
    if (!r->done) {
        unlink_req_locked(r);
        pthread_mutex_unlock(&lib.mu);
        return PMIX_ERR_TIMEOUT;
    }
    pthread_mutex_unlock(&lib.mu);
    if (r->lost) {
        return r->lost;
    }
    if (NULL == r->body || FRAME_OK != frame_parse(r->body, r->len, WIRE_MAX_FRAME, f, &used, NULL)) {
        return PMIX_ERR_LOST_CONNECTION;
    }
    return f->has_st ? (pmix_status_t)f->st : PMIX_SUCCESS;
}

/* ---- attaching ---- */

static int dial(const char *agent)
{
    int fd = -1;
    if (0 == strncmp(agent, "unix:", 5)) {
        struct sockaddr_un sa;
        const char *path = agent + 5;
        if (strlen(path) >= sizeof(sa.sun_path) || '\0' == path[0]) {
            errno = ENAMETOOLONG;
            return -1;
        }
        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            return -1;
        }
        while (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
            if (EINTR != errno) {
                close(fd);
                return -1;
            }
        }
        return fd;
    }
    if (0 == strncmp(agent, "tcp:", 4)) {
        char host[256];
        const char *hp = agent + 4, *colon = strrchr(hp, ':');
        struct addrinfo hints, *ai = NULL, *a;
        size_t hl;
        if (NULL == colon || (hl = (size_t)(colon - hp)) >= sizeof(host)) {
            errno = EINVAL;
            return -1;
        }
        memcpy(host, hp, hl);
        host[hl] = '\0';
        if (hl >= 2 && '[' == host[0] && ']' == host[hl - 1]) {
            memmove(host, host + 1, hl - 2);
            host[hl - 2] = '\0';
        }
        memset(&hints, 0, sizeof(hints));
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_NUMERICSERV;
        if (0 != getaddrinfo(host, colon + 1, &hints, &ai)) {
            errno = EINVAL;
            return -1;
        }
        for (a = ai; NULL != a; a = a->ai_next) {
            fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd < 0) {
                continue;
            }
            if (0 == connect(fd, a->ai_addr, a->ai_addrlen)) {
                break;
            }
            close(fd);
            fd = -1;
        }
        freeaddrinfo(ai);
        return fd;
    }
    errno = EINVAL;
    return -1;
}

static void build_hello(struct fw *f, void *arg)
{
    const char **a = arg;
    fw_key(f, "v");
    wb_uint(f->w, 2);
    fw_key(f, "ns");
    wb_cstr(f->w, a[0]);
    fw_key(f, "rk");
    wb_uint(f->w, (uint32_t)(uintptr_t)a[1]);
    fw_key(f, "cr");
    wb_cstr(f->w, a[2]);
}

/* hello_lookup finds key in the hello reply's info (decoded once, at
 * attach, and never changed until Finalize: read without a lock): 1 and
 * *v set (from malloc) when found. */
int hello_lookup(const char *key, pmix_value_t *v)
{
    size_t i;
    for (i = 0; i < lib.njob; i++) {
        if (0 == strcmp(lib.job[i].key, key)) {
            memset(v, 0, sizeof(*v));
            if (PMIX_SUCCESS != PMIx_Value_xfer(v, &lib.job[i].value)) {
                PMIx_Value_destruct(v);
                return 0;
            }
            return 1;
        }
    }
    return 0;
}

/* recv_fd is recv that also takes a file descriptor passed with the
 * bytes (SCM_RIGHTS): the first one into *passed if it is -1, any other
 * closed. */
static ssize_t recv_fd(int fd, char *buf, size_t len, int *passed)
{
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {buf, len};
    struct msghdr m;
    struct cmsghdr *c;
    ssize_t n;
    memset(&m, 0, sizeof(m));
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl.buf;
    m.msg_controllen = sizeof(ctl.buf);
    do {
        n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
    } while (n < 0 && EINTR == errno);
    if (n < 0) {
        return n;
    }
    for (c = CMSG_FIRSTHDR(&m); NULL != c; c = CMSG_NXTHDR(&m, c)) {
        size_t i, k;
        if (SOL_SOCKET != c->cmsg_level || SCM_RIGHTS != c->cmsg_type || c->cmsg_len < CMSG_LEN(0)) {
            continue;
        }
        k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (i = 0; i < k; i++) {
            int got;
            memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (*passed < 0) {
                *passed = got;
            } else {
                close(got);
            }
        }
    }
    return n;
}

/* read_one reads one whole frame from fd within timeout_ms (before the
 * progress thread runs): the hello's reply, and the fd of the node
 * barrier passed with it (*passed, -1 for none). */
static pmix_status_t read_one(int fd, int timeout_ms, char **body, size_t *len, int *passed)
{
    size_t have = 0, cap = 4096;
    char *buf = malloc(cap);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    if (NULL == buf) {
        return PMIX_ERR_NOMEM;
    }
    for (;;) {
        struct frame f;
        size_t used;
        enum frame_rc rc = frame_parse(buf, have, WIRE_MAX_FRAME, &f, &used, NULL);
        struct pollfd pfd = {fd, POLLIN, 0};
        ssize_t n;
        int left;
        if (FRAME_OK == rc) {
            *body = buf;
            *len = used;
            return PMIX_SUCCESS;
        }
        if (FRAME_MORE != rc) {
            free(buf);
            return PMIX_ERR_COMM_FAILURE;
        }
        if (have >= 4) {
            size_t want = 4 + ((size_t)(unsigned char)buf[0] << 24 | (size_t)(unsigned char)buf[1] << 16 |
                               (size_t)(unsigned char)buf[2] << 8 | (unsigned char)buf[3]);
            if (want > cap) {
                char *p = realloc(buf, want);
                if (NULL == p) {
                    free(buf);
                    return PMIX_ERR_NOMEM;
                }
                buf = p;
                cap = want;
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        left = timeout_ms - (int)((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000);
        if (left <= 0 || poll(&pfd, 1, left) <= 0) {
            if (left > 0 && EINTR == errno) {
                continue;
            }
            free(buf);
            return PMIX_ERR_UNREACH;
        }
        n = recv_fd(fd, buf + have, (have < 4 ? 4 : cap) - have, passed);
        if (n <= 0) {
            free(buf);
            return PMIX_ERR_UNREACH;
        }
        have += (size_t)n;
    }
}

pmix_status_t conn_open(const char *agent, const char *nspace, pmix_rank_t rank, const char *cred)
{
    struct wbuf w = {0};
    struct fw fwr;
    const char *args[3] = {nspace, (const char *)(uintptr_t)rank, cred};
    char *body = NULL;
    size_t len = 0, used;
    struct frame f;
    pmix_status_t st;
    pmix_value_t v;
    int passed = -1;
    int fd = dial(agent);
    if (fd < 0) {
        return PMIX_ERR_UNREACH;
    }
    fw_begin(&fwr, &w, T_HELLO, 1);
    build_hello(&fwr, args);
    if (fw_end(&fwr) < 0 || write_all(fd, w.p, w.len) < 0) {
        wb_free(&w);
        close(fd);
        return PMIX_ERR_UNREACH;
    }
    wb_free(&w);
    st = read_one(fd, 30000, &body, &len, &passed);
    if (PMIX_SUCCESS != st) {
        if (passed >= 0) {
            close(passed);
        }
        close(fd);
        return st;
    }
    frame_parse(body, len, WIRE_MAX_FRAME, &f, &used, NULL);
    if (f.has_st && f.st < 0) {
        st = (pmix_status_t)f.st;
    } else if (T_REPLY != f.t) {
        st = PMIX_ERR_COMM_FAILURE;
    }
    if (PMIX_SUCCESS != st) {
        if (passed >= 0) {
            close(passed);
        }
        free(body);
        close(fd);
        return st;
    }
    lib.fd = fd;
    lib.version = f.has_v ? (int)f.v : 1;
    lib.hello = body;
    lib.hello_len = len;
    lib.hello_in = f.in;
    lib.job = NULL;
    lib.njob = 0;
    if (NULL != f.in.p) {
        struct cur c = cur_of(f.in);
        if (cur_infos(&c, &lib.job, &lib.njob, 0) < 0) {
            if (passed >= 0) {
                close(passed);
            }
            free(body);
            close(fd);
            lib.fd = -1;
            lib.hello = NULL;
            return PMIX_ERR_COMM_FAILURE;
        }
    }
    lib.seq = 1;
    lib.lost = lib.final = lib.stop = 0;
    lib.cluster[0] = '\0';
    if (hello_lookup("pmix.clid", &v)) {
        if (PMIX_STRING == v.type && NULL != v.data.string) {
            snprintf(lib.cluster, sizeof(lib.cluster), "%s", v.data.string);
        }
        PMIx_Value_destruct(&v);
    }
    nf_adopt(passed); /* nodefence.c: it checks, maps and closes it */
    return PMIX_SUCCESS;
}

/* fork(2) after Init: the child has the parent's memory but none of its
 * threads, and shares its socket. Like OpenPMIx's child it has no
 * progress thread; unlike it, it never writes on the parent's connection
 * nor waits for a thread that is not there: what needs the agent returns
 * PMIX_ERR_UNREACH, what the process answers itself works, its Finalize
 * only releases memory (and runs none of the parent's cleanups). The
 * locks are held across the fork, so the child finds them consistent. */
static void fork_prepare(void)
{
    pthread_mutex_lock(&lib.wmu);
    pthread_mutex_lock(&lib.mu);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&lib.mu);
    pthread_mutex_unlock(&lib.wmu);
}

static void fork_child(void)
{
    if (lib.inits > 0 && lib.running) {
        lib.forked = 1;
        lib.running = 0;
        lib.lost = 1;
        lib.final = 1;
        lib.reqs = NULL;
        lib.qhead = lib.qtail = NULL;
        lib.held_n = 0;
        lib.corked = 0;
        if (lib.fd >= 0) {
            close(lib.fd); /* the child's descriptor only */
            lib.fd = -1;
        }
        if (lib.wakefd >= 0) {
            close(lib.wakefd);
            lib.wakefd = -1;
        }
        forget_cleanups();
    }
    pthread_mutex_unlock(&lib.mu);
    pthread_mutex_unlock(&lib.wmu);
}

static void watch_fork_once(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

/* watch_fork installs the fork handlers, at the first Init (never at
 * load time). */
void watch_fork(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, watch_fork_once);
}

/* progress_start starts the progress thread (attached or a singleton). */
HIDDEN int progress_start(void)
{
    lib.wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (lib.wakefd < 0) {
        return -1;
    }
    lib.stop = 0;
    lib.forked = 0;
    lib.running = 1;
    if (0 != pthread_create(&lib.thread, NULL, progress, NULL)) {
        lib.running = 0;
        close(lib.wakefd);
        lib.wakefd = -1;
        return -1;
    }
    return 0;
}

/* conn_close stops the progress thread (it runs what is queued first)
 * and closes the connection. */
void conn_close(void)
{
    if (lib.running) {
        pthread_mutex_lock(&lib.mu);
        lib.stop = 1;
        lib.final = 1;
        wake();
        pthread_cond_broadcast(&lib.cv); /* a replay waiting for its registration */
        pthread_mutex_unlock(&lib.mu);
        if (!on_progress_thread()) {
            pthread_join(lib.thread, NULL);
        }
        lib.running = 0;
    }
    pthread_mutex_lock(&lib.wmu);
    if (lib.fd >= 0) {
        close(lib.fd);
        lib.fd = -1;
    }
    pthread_mutex_unlock(&lib.wmu);
    if (lib.wakefd >= 0) {
        close(lib.wakefd);
        lib.wakefd = -1;
    }
    free(lib.hello);
    lib.hello = NULL;
    lib.hello_in.p = lib.hello_in.end = NULL;
    PMIx_Info_free(lib.job, lib.njob);
    lib.job = NULL;
    lib.njob = 0;
    free(lib.rbuf);
    lib.rbuf = NULL;
    lib.rlen = lib.rcap = 0;
    wb_free(&lib.held);
    lib.held_n = 0;
    nf_release();
}
