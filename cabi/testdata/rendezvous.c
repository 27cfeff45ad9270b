/* rendezvous.c: "server" publishes where it can be reached and waits
 * (PMIX_WAIT) for the client's answer; "client", started first, waits for
 * the server's data with a blocking PMIX_WAIT lookup, reads a second key
 * with PMIx_Lookup_nb, publishes its answer and a scratch key without
 * blocking, and unpublishes the scratch key. Each prints what it found. */
#include <stdio.h>
#include <string.h>

#include <pmix.h>

#include "waitcb.h"

static void lookupcb(pmix_status_t status, pmix_pdata_t data[], size_t ndata, void *cbdata)
{
    (void)cbdata;
    if (PMIX_SUCCESS == status && 1 == ndata && PMIX_INT32 == data[0].value.type) {
        printf("lookup_nb %s=%d from %s.%u\n", data[0].key, data[0].value.data.int32, data[0].proc.nspace,
               data[0].proc.rank);
    } else {
        printf("FAIL lookup_nb: %s, %zu values\n", PMIx_Error_string(status), ndata);
    }
    signal_done(status);
}

static pmix_status_t wait_lookup(pmix_pdata_t *pd, const char *key)
{
    pmix_info_t *dirs;
    int all = 0, secs = 20;
    pmix_status_t rc;
    PMIX_PDATA_CONSTRUCT(pd);
    PMIX_LOAD_KEY(pd->key, key);
    PMIX_INFO_CREATE(dirs, 2);
    PMIX_INFO_LOAD(&dirs[0], PMIX_WAIT, &all, PMIX_INT);
    PMIX_INFO_LOAD(&dirs[1], PMIX_TIMEOUT, &secs, PMIX_INT);
    rc = PMIx_Lookup(pd, 1, dirs, 2);
    PMIX_INFO_FREE(dirs, 2);
    return rc;
}

static int server(void)
{
    pmix_info_t *info;
    int32_t port = 4711;
    pmix_pdata_t pd;
    pmix_status_t rc;

    PMIX_INFO_CREATE(info, 2);
    PMIX_INFO_LOAD(&info[0], "svc.uri", "tcp://svc:4711", PMIX_STRING);
    PMIX_INFO_LOAD(&info[1], "svc.port", &port, PMIX_INT32);
    rc = PMIx_Publish(info, 2);
    PMIX_INFO_FREE(info, 2);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL publish: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    printf("published\n");
    fflush(stdout);
    rc = wait_lookup(&pd, "client.answer");
    if (PMIX_SUCCESS != rc || PMIX_STRING != pd.value.type) {
        printf("FAIL lookup client.answer: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    printf("answer %s from %s.%u\n", pd.value.data.string, pd.proc.nspace, pd.proc.rank);
    PMIX_PDATA_DESTRUCT(&pd);
    rc = PMIx_Unpublish(NULL, NULL, 0);
    printf("unpublish %d\n", rc);
    return PMIX_SUCCESS != rc;
}

static int client(void)
{
    pmix_pdata_t pd;
    pmix_status_t rc;
    char *keys[] = {"svc.port", NULL};
    pmix_info_t *answer, wait;
    int all = 0;

    printf("waiting\n");
    fflush(stdout);
    rc = wait_lookup(&pd, "svc.uri");
    if (PMIX_SUCCESS != rc || PMIX_STRING != pd.value.type) {
        printf("FAIL lookup svc.uri: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    printf("lookup %s=%s from %s.%u\n", pd.key, pd.value.data.string, pd.proc.nspace, pd.proc.rank);
    PMIX_PDATA_DESTRUCT(&pd);

    /* the keys of one publish become visible one by one: wait for this
     * one too */
    PMIX_INFO_LOAD(&wait, PMIX_WAIT, &all, PMIX_INT);
    rc = PMIx_Lookup_nb(keys, &wait, 1, lookupcb, NULL);
    PMIX_INFO_DESTRUCT(&wait);
    if (PMIX_SUCCESS != (rc = completed(rc))) {
        printf("FAIL lookup_nb: %s\n", PMIx_Error_string(rc));
        return 1;
    }

    PMIX_INFO_CREATE(answer, 2);
    PMIX_INFO_LOAD(&answer[0], "client.answer", "hello", PMIX_STRING);
    PMIX_INFO_LOAD(&answer[1], "client.scratch", "x", PMIX_STRING);
    rc = PMIx_Publish_nb(answer, 2, opcb, NULL);
    PMIX_INFO_FREE(answer, 2);
    if (PMIX_SUCCESS != (rc = completed(rc))) {
        printf("FAIL publish_nb: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    /* the server may still be waiting for client.answer: drop the other */
    keys[0] = "client.scratch";
    rc = completed(PMIx_Unpublish_nb(keys, NULL, 0, opcb, NULL));
    printf("unpublish_nb %d\n", rc);
    /* gone now: a lookup that does not wait finds nothing */
    PMIX_PDATA_CONSTRUCT(&pd);
    PMIX_LOAD_KEY(pd.key, "client.scratch");
    printf("lookup-after-unpublish %d\n", PMIx_Lookup(&pd, 1, NULL, 0));
    return 0;
}

int main(int argc, char **argv)
{
    pmix_proc_t me;
    pmix_status_t rc;
    int failed;

    if (argc != 2) {
        fprintf(stderr, "usage: rendezvous server|client\n");
        return 2;
    }
    rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        printf("FAIL init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    failed = 0 == strcmp(argv[1], "server") ? server() : client();
    PMIx_Finalize(NULL, 0);
    return failed;
}
