/* log.c: sends two help messages with PMIx_Log, as Open MPI's and PRRTE's
 * show_help do (data PMIX_LOG_STDERR, directives PMIX_LOG_AGG,
 * PMIX_LOG_KEY = the help file, PMIX_LOG_VAL = the topic): topic "first"
 * with the blocking call, "second" with PMIx_Log_nb; then checks bad
 * input. "launched" runs in a launched job and prints "logged" once done;
 * "singleton" runs without an agent, where PMIx_Log returns
 * PMIX_ERR_UNREACH. Failures print FAIL lines and exit 1. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <pmix.h>

#include "check.h"
#include "waitcb.h"

#define HELP_FILE "help-cabi-test.txt"

/* help_dirs loads the directives of a help message of topic. */
static void help_dirs(pmix_info_t dirs[3], const char *topic)
{
    bool agg = true;
    PMIX_INFO_LOAD(&dirs[0], PMIX_LOG_AGG, &agg, PMIX_BOOL);
    PMIX_INFO_LOAD(&dirs[1], PMIX_LOG_KEY, HELP_FILE, PMIX_STRING);
    PMIX_INFO_LOAD(&dirs[2], PMIX_LOG_VAL, topic, PMIX_STRING);
}

static void launched(void)
{
    pmix_info_t data, dirs[3], once;
    pmix_status_t rc;
    bool yes = true;

    PMIX_INFO_LOAD(&data, PMIX_LOG_STDERR, "cabi test: the first help message\n", PMIX_STRING);
    help_dirs(dirs, "first");
    rc = PMIx_Log(&data, 1, dirs, 3);
    CHECK(PMIX_SUCCESS == rc, "PMIx_Log: %s", PMIx_Error_string(rc));
    PMIX_INFO_DESTRUCT(&data);
    PMIX_INFO_DESTRUCT(&dirs[2]);

    PMIX_INFO_LOAD(&data, PMIX_LOG_STDERR, "cabi test: the second help message\n", PMIX_STRING);
    PMIX_INFO_LOAD(&dirs[2], PMIX_LOG_VAL, "second", PMIX_STRING);
    rc = completed(PMIx_Log_nb(&data, 1, dirs, 3, opcb, NULL));
    CHECK(PMIX_SUCCESS == rc, "PMIx_Log_nb: %s", PMIx_Error_string(rc));

    /* A directive pmixbus does not log with, and missing arguments. */
    PMIX_INFO_LOAD(&once, PMIX_LOG_ONCE, &yes, PMIX_BOOL);
    rc = PMIx_Log(&data, 1, &once, 1);
    CHECK(PMIX_ERR_NOT_SUPPORTED == rc, "PMIx_Log with PMIX_LOG_ONCE: %s", PMIx_Error_string(rc));
    rc = PMIx_Log(NULL, 0, dirs, 3);
    CHECK(PMIX_ERR_BAD_PARAM == rc, "PMIx_Log without data: %s", PMIx_Error_string(rc));
    rc = PMIx_Log_nb(&data, 1, dirs, 3, NULL, NULL);
    CHECK(PMIX_ERR_BAD_PARAM == rc, "PMIx_Log_nb without a callback: %s", PMIx_Error_string(rc));
    PMIX_INFO_DESTRUCT(&data);
    PMIX_INFO_DESTRUCT(&dirs[1]);
    PMIX_INFO_DESTRUCT(&dirs[2]);
    printf("logged\n");
}

int main(int argc, char **argv)
{
    pmix_proc_t me;
    pmix_status_t rc, want = PMIX_SUCCESS;
    pmix_info_t data;

    if (argc != 2) {
        fprintf(stderr, "usage: log launched|singleton\n");
        return 2;
    }
    if (0 == strcmp(argv[1], "singleton")) {
        want = PMIX_ERR_UNREACH;
    }
    rc = PMIx_Init(&me, NULL, 0);
    CHECK(want == rc, "PMIx_Init: %s", PMIx_Error_string(rc));
    if (PMIX_ERR_UNREACH == want) {
        PMIX_INFO_LOAD(&data, PMIX_LOG_STDERR, "nobody hears this\n", PMIX_STRING);
        rc = PMIx_Log(&data, 1, NULL, 0);
        CHECK(PMIX_ERR_UNREACH == rc, "PMIx_Log in a singleton: %s", PMIx_Error_string(rc));
        PMIX_INFO_DESTRUCT(&data);
        printf("logged\n");
    } else {
        launched();
    }
    rc = PMIx_Finalize(NULL, 0);
    CHECK(PMIX_SUCCESS == rc, "PMIx_Finalize: %s", PMIx_Error_string(rc));
    return failed;
}
