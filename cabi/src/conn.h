/*
 * conn.h — the library's state: one connection to the agent, its request
 * table and its one progress thread (conn.c), shared by the entry points
 * (client.c, events.c).
 *
 * Locks: lib.mu guards everything below but the socket's writes, which
 * wmu serialises (taken before mu when both are). No callback of the
 * application is ever called with either held. lib.cv is broadcast when a
 * request completes, a registration's call returns, or a local chain ends.
 */
#ifndef CABI_CONN_H
#define CABI_CONN_H

#include <pthread.h>
#include <stdint.h>

#include "pmix.h"
#include "wire.h"

#define HIDDEN __attribute__((visibility("hidden")))

struct frame;
struct req;
struct work;

/* A request waiting for its reply. cb NULL: a thread waits for done (the
 * reply is copied into body). Otherwise cb runs on the progress thread
 * with the reply (f NULL and status set when the connection ended). */
struct req {
    struct req *next;
    uint64_t seq;
    int done;
    pmix_status_t lost;
    char *body;
    size_t len;
    void (*cb)(struct req *r, struct frame *f, pmix_status_t status);
    /* the callback's data */
    pmix_op_cbfunc_t opcb;
    void *cbdata;
    void *ctx;
    uintptr_t arg;
    struct reg *reg; /* a registration whose reply installs it */
};

/* A work item run on the progress thread, in order. */
struct work {
    struct work *next;
    void (*fn)(struct work *w);
    void *p;
    void *q;
    uintptr_t a;
    pmix_status_t st;
    struct req *req;
    char *body;
    size_t len;
};

/* An event registration of the application. */
struct reg {
    struct reg *next;     /* lib.regs */
    struct reg *prev_cat, *next_cat; /* its category's middle list */
    size_t ref;
    uint64_t agent_id;
    int state;     /* REG_PENDING, REG_OK */
    int returned;  /* its registering call has returned */
    int dropped;   /* deregistered before the agent answered */
    int placed;
    pmix_notification_fn_t fn;
    pmix_status_t *codes;
    size_t ncodes;
    int cat, place;
    char name[PMIX_MAX_KEYLEN + 1];
    char target[PMIX_MAX_KEYLEN + 1];
    /* filters of the local chains */
    pmix_data_range_t range;
    int job_given, job, env_given, env;
    pmix_proc_t *custom;
    size_t ncustom;
    pmix_proc_t *affected;
    size_t naffected;
    double timeout; /* PMIX_EVENT_ACTION_TIMEOUT in seconds, 0: the default */
    void *cbobject; /* PMIX_EVENT_RETURN_OBJECT: given back in each call's info */
};

enum { REG_PENDING, REG_OK };
enum { CAT_SINGLE, CAT_MULTI, CAT_DEFAULT };
enum { P_PREPEND, P_APPEND, P_FIRST, P_LAST, P_FIRST_CAT, P_LAST_CAT, P_BEFORE, P_AFTER };

/* A value kept in the process: a put, a stored value, a connect's keys. */
struct kept {
    struct kept *next;
    pmix_proc_t proc;
    char key[PMIX_MAX_KEYLEN + 1];
    int scope;
    int pending; /* put since the last commit */
    char *enc;   /* the value, msgpack-encoded as on the wire */
    size_t len;
};

struct connect_rec {
    struct connect_rec *next;
    char *key;    /* the procs, sorted */
    char **ns;    /* the connects' nspaces, oldest first */
    size_t n;
};

struct lib {
    pthread_mutex_t mu, wmu, initmu;
    pthread_cond_t cv;
    int inits;
    int singleton;
    pmix_proc_t proc;
    char cluster[PMIX_MAX_NSLEN + 1];

    /* the connection */
    int fd, wakefd;
    int version;
    int lost, final, stop;
    int forked; /* a child forked after Init: no thread, no connection */
    int closing; /* the last Finalize is detaching */
    uint64_t seq;
    struct req *reqs;
    char *hello; /* the hello reply's body (its info is read from it) */
    size_t hello_len;
    struct raw hello_in;
    pmix_info_t *job; /* hello_in decoded: read without locks while initialised */
    size_t njob;

    /* the progress thread */
    pthread_t thread;
    int running;
    struct work *qhead, *qtail;
    char *rbuf;
    size_t rlen, rcap;
    /* While the progress thread runs invocations back to back (corked,
     * its own: no lock), the completions they make gather in one
     * invoke-done-batch frame (held, under wmu), written before any other
     * frame and when the run ends (conn.c, uncork). */
    int corked, ran;
    struct wbuf held;
    struct fw held_fw;
    size_t held_at;
    uint32_t held_n;

    /* registrations, by order of registration, and the local order */
    struct reg *regs;
    size_t next_ref;
    struct reg *first, *last, *cat_head[3], *cat_tail[3], *cat_list[3];

    struct kept *puts, *stored;
    struct connect_rec *connects;
    int chains; /* local chains running */
    struct invocation *timed; /* local invocations with a deadline (events.c) */
};

extern struct lib lib HIDDEN;
extern __thread int cabi_in_handler HIDDEN;

/* conn.c */
HIDDEN int on_progress_thread(void);
HIDDEN void enqueue_locked(struct work *w);
HIDDEN void enqueue(struct work *w);
HIDDEN struct work *work_new(void (*fn)(struct work *));
/* Send a frame built by build (seq given) and register r for its reply,
 * r->seq set; r NULL: nobody waits, the reply is dropped when it comes.
 * Returns 0, or PMIX_ERR_LOST_CONNECTION / PMIX_ERR_INIT. */
HIDDEN pmix_status_t send_request(struct req *r, unsigned type,
                                  void (*build)(struct fw *f, void *arg), void *arg);
/* Send a frame with no reply awaited. */
HIDDEN pmix_status_t send_oneway(struct wbuf *w);
/* Send an invocation's completion, entry a Done of an invoke-done-batch
 * (protocol version 2): held back while the progress thread is corked,
 * else written at once behind those held. */
HIDDEN pmix_status_t send_done_entry(const struct wbuf *entry);
/* Wait for r (a waiter) to complete; timeout_ms < 0: forever. On the
 * progress thread it reads the socket itself. Returns the reply's status
 * (r->body holds it) or the loss. */
HIDDEN pmix_status_t await_reply(struct req *r, int timeout_ms, struct frame *f);
HIDDEN void req_release(struct req *r);
HIDDEN pmix_status_t conn_open(const char *agent, const char *nspace, pmix_rank_t rank, const char *cred);
HIDDEN void conn_close(void);
HIDDEN int hello_lookup(const char *key, pmix_value_t *v);
/* topology_release destroys the topology PMIx_Load_topology loaded
 * (topology.c), at the last PMIx_Finalize. */
HIDDEN void topology_release(void);

/* events.c */
HIDDEN void reg_place_locked(struct reg *r);
HIDDEN void reg_unplace_locked(struct reg *r);
HIDDEN void reg_free(struct reg *r);
HIDDEN void run_invoke(struct work *w);
HIDDEN struct work *invoke_work(struct cur *c, int entry, struct frame *f);
HIDDEN void local_event(pmix_status_t code, const pmix_info_t *info, size_t ninfo,
                        void (*done)(void *arg), void *arg);
HIDDEN void internal_event_locked(pmix_status_t code, const char *msg);
/* A chain of code with one handler, ref: an event the process kept,
 * replayed to a handler registered after it. */
HIDDEN void local_event_one_locked(size_t ref, pmix_status_t code, const pmix_info_t *info, size_t ninfo);

/* client.c: attached is PMIX_ERR_INIT before Init, PMIX_ERR_UNREACH
 * without an agent (a singleton, a forked child), else success. */
HIDDEN pmix_status_t attached(void);
/* client.c: send_op sends a non-blocking request whose reply goes to cb
 * on the progress thread, with cbfunc, cbdata and ctx for it. On failure
 * nothing is kept: ctx stays the caller's to free. */
HIDDEN pmix_status_t send_op(unsigned type, void (*build)(struct fw *, void *), void *arg,
                             void (*cb)(struct req *, struct frame *, pmix_status_t), pmix_op_cbfunc_t cbfunc,
                             void *cbdata, void *ctx);

/* infocall.c: requests whose reply carries info (Job_control, Query_info).
 * info_request calls cbfunc from the progress thread with the reply's
 * status and info, which the library frees when the caller calls the
 * release function it is given; info_request_wait blocks and hands the
 * info to the caller (PMIx_Info_free). Both check that the library is
 * attached: PMIX_ERR_INIT before Init, PMIX_ERR_UNREACH for a singleton. */
HIDDEN pmix_status_t info_request(unsigned type, void (*build)(struct fw *, void *), void *arg,
                                  pmix_info_cbfunc_t cbfunc, void *cbdata);
/* raw_infos decodes a reply field's list of info (none when the field is
 * absent): PMIX_ERR_UNPACK_FAILURE, and nothing handed out, when it is
 * malformed. */
HIDDEN pmix_status_t raw_infos(struct raw field, pmix_info_t **info, size_t *n);
/* info_deliver calls cb with info, which it frees when the caller calls
 * the release function it is given (at once if it cannot give one). */
HIDDEN void info_deliver(pmix_info_cbfunc_t cb, pmix_status_t st, pmix_info_t *info, size_t n, void *cbdata);
HIDDEN pmix_status_t info_request_wait(unsigned type, void (*build)(struct fw *, void *), void *arg,
                                       pmix_info_t **info, size_t *ninfo);

/* model.c */
HIDDEN void model_declare(const pmix_info_t *info, size_t ninfo);
HIDDEN void model_replay_locked(const struct reg *g);
HIDDEN int model_lookup_locked(const char *key, pmix_value_t *v);
HIDDEN void model_forget_locked(void);
/* The abort a running handler asks for (see events.c): 1 when taken. */
HIDDEN int defer_abort(void);
/* Passes over the local handlers whose timeout passed; returns the
 * milliseconds until the next deadline, -1 for none. Called with lib.mu. */
HIDDEN int expire_locked(void);
HIDDEN void free_timed_locked(void);

/* client.c */
HIDDEN void run_cleanups(void);
HIDDEN void forget_cleanups(void);
HIDDEN void watch_fork(void);

#endif
