/*
 * model.c — PMIX_MODEL_DECLARED: PMIx_Init's info may declare the
 * programming model of the library calling it (PMIX_PROGRAMMING_MODEL,
 * PMIX_MODEL_LIBRARY_NAME, PMIX_MODEL_LIBRARY_VERSION,
 * PMIX_THREADING_MODEL). As OpenPMIx does, Init then raises
 * PMIX_MODEL_DECLARED in the process (PMIX_RANGE_PROC_LOCAL) with those
 * values, and keeps the event: a handler registered later for that code
 * by name (not a default handler) is called with it once, as OpenPMIx's
 * cache of local events calls it. The process's own keys are also kept
 * for PMIx_Get of them.
 */
#include <stdlib.h>
#include <string.h>

#include "conn.h"

static const char *const model_keys[] = {PMIX_PROGRAMMING_MODEL, PMIX_MODEL_LIBRARY_NAME, PMIX_MODEL_LIBRARY_VERSION,
                                         PMIX_THREADING_MODEL};
#define NMODEL (sizeof(model_keys) / sizeof(model_keys[0]))

/* Under lib.mu. */
static pmix_info_t *model;
static size_t nmodel;

void model_declare(const pmix_info_t *info, size_t ninfo)
{
    pmix_info_t *m;
    size_t i, k, n = 0;
    if (NULL == info) {
        return;
    }
    m = calloc(NMODEL, sizeof(*m));
    if (NULL == m) {
        return;
    }
    for (k = 0; k < NMODEL; k++) {
        for (i = 0; i < ninfo; i++) {
            if (0 == strncmp(info[i].key, model_keys[k], PMIX_MAX_KEYLEN) && PMIX_STRING == info[i].value.type &&
                NULL != info[i].value.data.string) {
                PMIx_Info_load(&m[n++], model_keys[k], info[i].value.data.string, PMIX_STRING);
                break;
            }
        }
    }
    if (0 == n) {
        free(m);
        return;
    }
    pthread_mutex_lock(&lib.mu);
    PMIx_Info_free(model, nmodel);
    model = m;
    nmodel = n;
    pthread_mutex_unlock(&lib.mu);
    local_event(PMIX_MODEL_DECLARED, m, n, NULL, NULL);
}

void model_replay_locked(const struct reg *g)
{
    size_t i;
    if (NULL == model) {
        return;
    }
    for (i = 0; i < g->ncodes; i++) {
        if (PMIX_MODEL_DECLARED == g->codes[i]) {
            local_event_one_locked(g->ref, PMIX_MODEL_DECLARED, model, nmodel);
            return;
        }
    }
}

int model_lookup_locked(const char *key, pmix_value_t *v)
{
    size_t i;
    for (i = 0; i < nmodel; i++) {
        if (0 == strncmp(model[i].key, key, PMIX_MAX_KEYLEN)) {
            return PMIX_SUCCESS == PMIx_Value_xfer(v, &model[i].value) ? 0 : -1;
        }
    }
    return -1;
}

void model_forget_locked(void)
{
    PMIx_Info_free(model, nmodel);
    model = NULL;
    nmodel = 0;
}
