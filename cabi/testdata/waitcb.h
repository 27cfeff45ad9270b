/* waitcb.h: a completion a test program waits for, signalled by the
 * library's callbacks from its own threads. */
#ifndef WAITCB_H
#define WAITCB_H

#include <pthread.h>

#include <pmix.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int done;
static pmix_status_t result;

static void signal_done(pmix_status_t status)
{
    pthread_mutex_lock(&mu);
    result = status;
    done = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
}

static pmix_status_t wait_done(void)
{
    pthread_mutex_lock(&mu);
    while (!done) {
        pthread_cond_wait(&cond, &mu);
    }
    done = 0;
    pthread_mutex_unlock(&mu);
    return result;
}

/* completed returns the status of a non-blocking call: rc when the call
 * failed at once, else the status its callback gives. */
static pmix_status_t completed(pmix_status_t rc)
{
    return PMIX_SUCCESS == rc ? wait_done() : rc;
}

static void opcb(pmix_status_t status, void *cbdata)
{
    (void)cbdata;
    signal_done(status);
}

#endif
