/* log.c: sends two help messages with PMIx_Log, as Open MPI's and PRRTE's
 * show_help do (data PMIX_LOG_STDERR, directives PMIX_LOG_AGG,
 * PMIX_LOG_KEY = the help file, PMIX_LOG_VAL = the topic): topic "first"
 * with the blocking call, "second" with PMIx_Log_nb; then checks bad
 * input; then Open MPI 4.1's own form of a help message (PMIX_LOG_MSG),
 * syslog messages and PMIX_LOG_ONCE. "launched" runs in a launched job and prints "logged" once done;
 * "singleton" runs without an agent, where PMIx_Log returns
 * PMIX_ERR_UNREACH. Failures print FAIL lines and exit 1. */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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

/* put_str appends an OPAL DSS string (count 1, length with the NUL,
 * bytes), big-endian, as Open MPI 4.1 packs it. */
static size_t put_str(unsigned char *b, size_t at, const char *s)
{
    uint32_t one = htonl(1), len = htonl((uint32_t)strlen(s) + 1);
    memcpy(b + at, &one, 4);
    memcpy(b + at + 4, &len, 4);
    memcpy(b + at + 8, s, strlen(s) + 1);
    return at + 8 + strlen(s) + 1;
}

/* ompi_help logs a help message as Open MPI 4.1's orte_show_help does
 * from a rank. */
static void ompi_help(void)
{
    unsigned char b[512];
    size_t n = 0;
    uint32_t one = htonl(1);
    pmix_info_t msg;
    pmix_byte_object_t bo;
    pmix_status_t rc;
    n = put_str(b, n, "help-cabi-ompi.txt");
    n = put_str(b, n, "abort");
    memcpy(b + n, &one, 4);
    b[n + 4] = 1; /* a rendered text follows */
    n = put_str(b, n + 5, "cabi test: an Open MPI help message\n");
    bo.bytes = (char *)b;
    bo.size = n;
    PMIX_INFO_LOAD(&msg, PMIX_LOG_MSG, &bo, PMIX_BYTE_OBJECT);
    rc = completed(PMIx_Log_nb(&msg, 1, NULL, 0, opcb, NULL));
    CHECK(PMIX_SUCCESS == rc, "PMIx_Log_nb of Open MPI's form: %s", PMIx_Error_string(rc));
    PMIX_INFO_DESTRUCT(&msg);
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

    /* Open MPI 4.1's own form: its show-help message packed in a byte
     * object (PMIX_LOG_MSG), no directives. */
    ompi_help();

    /* Syslog, with a priority and a timestamp; PMIX_LOG_ONCE takes the
     * first channel that logs (email is not one); email alone is refused. */
    {
        pmix_info_t two[2], sdirs[2];
        int pri = 4; /* LOG_WARNING */
        time_t at = 1795831200;
        PMIX_INFO_LOAD(&two[0], PMIX_LOG_EMAIL, "nobody@example.com", PMIX_STRING);
        PMIX_INFO_LOAD(&two[1], PMIX_LOG_SYSLOG, "cabi test: a syslog message", PMIX_STRING);
        PMIX_INFO_LOAD(&sdirs[0], PMIX_LOG_SYSLOG_PRI, &pri, PMIX_INT);
        PMIX_INFO_LOAD(&sdirs[1], PMIX_LOG_TIMESTAMP, &at, PMIX_TIME);
        rc = PMIx_Log(&two[1], 1, sdirs, 2);
        CHECK(PMIX_SUCCESS == rc, "PMIx_Log to syslog: %s", PMIx_Error_string(rc));
        PMIX_INFO_LOAD(&once, PMIX_LOG_ONCE, &yes, PMIX_BOOL);
        rc = PMIx_Log(two, 2, &once, 1);
        CHECK(PMIX_SUCCESS == rc, "PMIx_Log with PMIX_LOG_ONCE: %s", PMIx_Error_string(rc));
        rc = PMIx_Log(two, 1, NULL, 0);
        CHECK(PMIX_ERR_NOT_SUPPORTED == rc, "PMIx_Log by email: %s", PMIx_Error_string(rc));
        PMIX_INFO_DESTRUCT(&two[0]);
        PMIX_INFO_DESTRUCT(&two[1]);
        PMIX_INFO_DESTRUCT(&sdirs[0]);
        PMIX_INFO_DESTRUCT(&sdirs[1]);
    }
    /* Missing arguments. */
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
