/* hello.c: a PMIx client in C, as README's `pmixbus run -n 4 ./hello`
 * runs it. Each rank puts a greeting, commits, fences with the data
 * collected, and prints its right neighbour's greeting.
 *
 *   gcc -I cabi/include cabi/example/hello.c -L lib -lpmix -o hello
 */
#include <stdio.h>
#include <unistd.h>

#include <pmix.h>

int main(void)
{
    pmix_proc_t me, job, peer;
    pmix_value_t val, *got = NULL;
    pmix_info_t collect;
    pmix_status_t rc;
    uint32_t size;
    char greeting[128], host[64] = "";
    bool yes = true;

    if (PMIX_SUCCESS != (rc = PMIx_Init(&me, NULL, 0))) {
        fprintf(stderr, "PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
    if (PMIX_SUCCESS != (rc = PMIx_Get(&job, PMIX_JOB_SIZE, NULL, 0, &got))) {
        fprintf(stderr, "PMIx_Get(job size): %s\n", PMIx_Error_string(rc));
        return 1;
    }
    size = got->data.uint32;
    PMIX_VALUE_RELEASE(got);

    gethostname(host, sizeof(host) - 1);
    snprintf(greeting, sizeof(greeting), "hello from rank %u on %s", me.rank, host);
    PMIX_VALUE_LOAD(&val, greeting, PMIX_STRING);
    rc = PMIx_Put(PMIX_GLOBAL, "hello.greeting", &val);
    PMIX_VALUE_DESTRUCT(&val);
    if (PMIX_SUCCESS == rc) {
        rc = PMIx_Commit();
    }
    PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    if (PMIX_SUCCESS == rc) {
        rc = PMIx_Fence(NULL, 0, &collect, 1);
    }
    PMIX_INFO_DESTRUCT(&collect);
    if (PMIX_SUCCESS != rc) {
        fprintf(stderr, "put/commit/fence: %s\n", PMIx_Error_string(rc));
        return 1;
    }

    PMIX_LOAD_PROCID(&peer, me.nspace, (me.rank + 1) % size);
    if (PMIX_SUCCESS != (rc = PMIx_Get(&peer, "hello.greeting", NULL, 0, &got))) {
        fprintf(stderr, "PMIx_Get(rank %u): %s\n", peer.rank, PMIx_Error_string(rc));
        return 1;
    }
    printf("rank %u of %u: rank %u says \"%s\"\n", me.rank, size, peer.rank, got->data.string);
    PMIX_VALUE_RELEASE(got);
    return PMIx_Finalize(NULL, 0) == PMIX_SUCCESS ? 0 : 1;
}
