/* helpers.c exercises the helper functions that 4.2.3+ headers call
 * (compiled against pmixbus's header: 4.2.2's does not declare them). It
 * prints "ok" or the failures. */
#include <stdio.h>
#include <string.h>

#include <pmix.h>

#include "datacheck.h"

int main(void)
{
    char **argv = PMIx_Argv_split("a,b,,c", ',');
    char *joined, **env = NULL;
    pmix_nspace_t target, cl, ns;
    pmix_value_t v1, v2;
    pmix_proc_t p, q;
    uint32_t u = 7, out = 0;
    void *data = &out, *list;
    size_t sz = 0;
    pmix_info_t *info, *it;
    void *next;

    CHECK(3 == PMIx_Argv_count(argv), "split count %d", PMIx_Argv_count(argv));
    PMIx_Argv_append_unique_nosize(&argv, "b");
    PMIx_Argv_prepend_nosize(&argv, "z");
    joined = PMIx_Argv_join(argv, ':');
    CHECK(0 == strcmp(joined, "z:a:b:c"), "join %s", joined);
    free(joined);
    PMIx_Argv_free(argv);
    argv = PMIx_Argv_split_with_empty("a,,b", ',');
    CHECK(3 == PMIx_Argv_count(argv), "split with empty %d", PMIx_Argv_count(argv));
    PMIx_Argv_free(argv);

    CHECK(PMIX_SUCCESS == PMIx_Setenv("X", "1", true, &env), "setenv");
    CHECK(PMIX_ERR_EXISTS == PMIx_Setenv("X", "2", false, &env), "setenv no overwrite");
    CHECK(PMIX_SUCCESS == PMIx_Setenv("X", "3", true, &env) && 0 == strcmp(env[0], "X=3"), "setenv overwrite");
    PMIx_Argv_free(env);

    PMIx_Load_nspace(cl, "B");
    PMIx_Load_nspace(ns, "job");
    PMIx_Multicluster_nspace_construct(target, cl, ns);
    CHECK(0 == strcmp(target, "B:job"), "multicluster %s", target);
    PMIx_Multicluster_nspace_parse(target, cl, ns);
    CHECK(0 == strcmp(cl, "B") && 0 == strcmp(ns, "job"), "parse %s %s", cl, ns);

    PMIx_Proc_load(&p, "job", 3);
    PMIx_Load_procid(&q, "job", PMIX_RANK_WILDCARD);
    CHECK(PMIx_Check_procid(&p, &q), "wildcard matches");
    CHECK(!PMIx_Procid_invalid(&p), "valid proc");

    PMIx_Value_construct(&v1);
    PMIx_Value_load(&v1, &u, PMIX_UINT32);
    CHECK(PMIX_SUCCESS == PMIx_Value_unload(&v1, &data, &sz) && 7 == out && 4 == sz, "unload %u %zu", out, sz);
    PMIx_Value_construct(&v2);
    PMIx_Value_xfer(&v2, &v1);
    CHECK(PMIX_EQUAL == PMIx_Value_compare(&v1, &v2), "compare");
    PMIx_Value_load(&v2, "x", PMIX_STRING);
    CHECK(PMIX_VALUE_TYPE_DIFFERENT == PMIx_Value_compare(&v1, &v2), "compare types");
    CHECK(PMIX_NON_BOOL == PMIx_Value_true(&v1), "true of a number");
    PMIx_Value_destruct(&v2);

    info = PMIx_Info_create(2);
    CHECK(PMIx_Info_is_end(&info[1]) && !PMIx_Info_is_end(&info[0]), "create end flag");
    PMIx_Info_required(&info[0]);
    CHECK(0 == strcmp(PMIx_Info_directives_string(info[0].flags), "REQUIRED"), "directives %s",
          PMIx_Info_directives_string(info[0].flags));
    PMIx_Info_free(info, 2);

    list = PMIx_Info_list_start();
    PMIx_Info_list_add(list, "second", "2", PMIX_STRING);
    PMIx_Info_list_prepend(list, "first", "1", PMIX_STRING);
    it = PMIx_Info_list_get_info(list, NULL, &next);
    CHECK(NULL != it && 0 == strcmp(it->key, "first"), "list head");
    it = PMIx_Info_list_get_info(list, next, &next);
    CHECK(NULL != it && 0 == strcmp(it->key, "second"), "list next");
    CHECK(NULL == PMIx_Info_list_get_info(list, next, &next), "list end");
    PMIx_Info_list_release(list);

    {
        /* the macros over these helpers */
        char **av = NULL, *j;
        int rc, n;
        pmix_app_t *app;
        PMIX_ARGV_APPEND(rc, av, "x");
        PMIX_ARGV_APPEND(rc, av, "y");
        PMIX_ARGV_COUNT(n, av);
        PMIX_ARGV_JOIN(j, av, ' ');
        CHECK(PMIX_SUCCESS == rc && 2 == n && 0 == strcmp(j, "x y"), "argv macros %d %d %s", rc, n, j);
        free(j);
        PMIX_ARGV_FREE(av);
        PMIX_APP_CREATE(app, 1);
        app->cmd = strdup("prog");
        PMIX_APP_INFO_CREATE(app, 1);
        PMIX_INFO_LOAD(&app->info[0], "k", "v", PMIX_STRING);
        PMIX_APP_FREE(app, 1);
        CHECK(NULL == app, "APP_FREE");
    }
    datacheck();
    if (!failed) {
        printf("ok\n");
    }
    return failed;
}
