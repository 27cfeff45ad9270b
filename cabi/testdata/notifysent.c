/* notifysent.c: blocking notifies of each range, printed with what they
 * return; the fake agent of TestNotifySent answers only the SESSION one,
 * so the others must return without the agent's answer. */
#include <stdio.h>

#include <pmix.h>

int main(void)
{
    pmix_proc_t me;
    pmix_data_range_t ranges[] = {PMIX_RANGE_RM, PMIX_RANGE_LOCAL, PMIX_RANGE_NAMESPACE, PMIX_RANGE_GLOBAL,
                                  PMIX_RANGE_SESSION};
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("init %d\n", rc);
    for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
        rc = PMIx_Notify_event(-3000, NULL, ranges[i], NULL, 0, NULL, NULL);
        printf("notify %d %d\n", (int)ranges[i], rc);
    }
    printf("finalize %d\n", PMIx_Finalize(NULL, 0));
    return 0;
}
