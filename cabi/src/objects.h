/*
 * objects.h — the four functions 4.2.3+ headers expect of each structure:
 * PMIx_<Name>_construct (zeroes it), _destruct (destruct_body, with the
 * structure as p), _create (n zeroed ones from calloc) and _free (destructs
 * n and frees the array).
 */
#ifndef CABI_OBJECTS_H
#define CABI_OBJECTS_H

#include "pmix.h"

#define OBJECT_FUNCS(Name, type, destruct_body)                                  \
    PMIX_EXPORT void PMIx_##Name##_construct(type *p) { memset(p, 0, sizeof(*p)); } \
    PMIX_EXPORT void PMIx_##Name##_destruct(type *p) { destruct_body; }          \
    PMIX_EXPORT type *PMIx_##Name##_create(size_t n)                             \
    {                                                                            \
        return 0 == n ? NULL : calloc(n, sizeof(type));                          \
    }                                                                            \
    PMIX_EXPORT void PMIx_##Name##_free(type *p, size_t n)                       \
    {                                                                            \
        size_t i;                                                                \
        if (NULL == p) {                                                         \
            return;                                                              \
        }                                                                        \
        for (i = 0; i < n; i++) {                                                \
            PMIx_##Name##_destruct(&p[i]);                                       \
        }                                                                        \
        free(p);                                                                 \
    }

#endif
