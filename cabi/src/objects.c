/*
 * objects.c — constructors, destructors and allocators of the structures
 * that pmixbus carries but does not interpret (coordinates, topologies,
 * cpusets, geometries, device distances, endpoints, data buffers, proc
 * info, registered attributes), for programs built with 4.2.3+ headers,
 * whose macros call these. Everything is malloc'd, as the macros expect.
 */
#include "objects.h"

/* 4.2.2's PMIX_TOPOLOGY_DESTRUCT and PMIX_CPUSET_DESTRUCT call these
 * destructors already. */
OBJECT_FUNCS(Topology, pmix_topology_t, {
    free(p->source);
    p->source = NULL;
    p->topology = NULL;
})
OBJECT_FUNCS(Cpuset, pmix_cpuset_t, {
    free(p->source);
    p->source = NULL;
    p->bitmap = NULL;
})

PMIX_EXPORT void PMIx_Coord_construct(pmix_coord_t *m) { memset(m, 0, sizeof(*m)); }
PMIX_EXPORT void PMIx_Coord_destruct(pmix_coord_t *m)
{
    free(m->coord);
    memset(m, 0, sizeof(*m));
}
PMIX_EXPORT pmix_coord_t *PMIx_Coord_create(size_t dims, size_t number)
{
    size_t i;
    pmix_coord_t *m = 0 == number ? NULL : calloc(number, sizeof(pmix_coord_t));
    for (i = 0; NULL != m && i < number; i++) {
        m[i].dims = dims;
        m[i].coord = 0 == dims ? NULL : calloc(dims, sizeof(uint32_t));
    }
    return m;
}
PMIX_EXPORT void PMIx_Coord_free(pmix_coord_t *m, size_t number)
{
    size_t i;
    for (i = 0; NULL != m && i < number; i++) {
        PMIx_Coord_destruct(&m[i]);
    }
    free(m);
}

OBJECT_FUNCS(Geometry, pmix_geometry_t, {
    free(p->uuid);
    free(p->osname);
    PMIx_Coord_free(p->coordinates, p->ncoords);
    memset(p, 0, sizeof(*p));
})
OBJECT_FUNCS(Device_distance, pmix_device_distance_t, {
    free(p->uuid);
    free(p->osname);
    memset(p, 0, sizeof(*p));
})
OBJECT_FUNCS(Endpoint, pmix_endpoint_t, {
    free(p->uuid);
    free(p->osname);
    free(p->endpt.bytes);
    memset(p, 0, sizeof(*p));
})
OBJECT_FUNCS(Proc_info, pmix_proc_info_t, {
    free(p->hostname);
    free(p->executable_name);
    memset(p, 0, sizeof(*p));
})
OBJECT_FUNCS(Regattr, pmix_regattr_t, {
    free(p->name);
    PMIx_Argv_free(p->description);
    memset(p, 0, sizeof(*p));
})

PMIX_EXPORT void PMIx_Regattr_load(pmix_regattr_t *info, const char *name, const char *key,
                                   pmix_data_type_t type, const char *description)
{
    info->name = NULL == name ? NULL : strdup(name);
    PMIx_Load_key(info->string, key);
    info->type = type;
    info->description = NULL;
    if (NULL != description) {
        PMIx_Argv_append_nosize(&info->description, description);
    }
}

PMIX_EXPORT void PMIx_Regattr_xfer(pmix_regattr_t *dest, const pmix_regattr_t *src)
{
    dest->name = NULL == src->name ? NULL : strdup(src->name);
    memcpy(dest->string, src->string, sizeof(dest->string));
    dest->type = src->type;
    dest->description = PMIx_Argv_copy(src->description);
}

/* 4.2.x declares it taking a pmix_regattr_t, though it builds a fabric. */
PMIX_EXPORT void PMIx_Fabric_construct(pmix_regattr_t *p) { memset(p, 0, sizeof(pmix_fabric_t)); }

PMIX_EXPORT void PMIx_Data_buffer_construct(pmix_data_buffer_t *b) { memset(b, 0, sizeof(*b)); }
PMIX_EXPORT void PMIx_Data_buffer_destruct(pmix_data_buffer_t *b)
{
    free(b->base_ptr);
    memset(b, 0, sizeof(*b));
}
PMIX_EXPORT pmix_data_buffer_t *PMIx_Data_buffer_create(void) { return calloc(1, sizeof(pmix_data_buffer_t)); }
PMIX_EXPORT void PMIx_Data_buffer_release(pmix_data_buffer_t *b)
{
    if (NULL != b) {
        PMIx_Data_buffer_destruct(b);
        free(b);
    }
}
/* takes bytes as they are: the buffer now owns them */
PMIX_EXPORT void PMIx_Data_buffer_load(pmix_data_buffer_t *b, char *bytes, size_t sz)
{
    b->base_ptr = bytes;
    b->pack_ptr = bytes + sz;
    b->unpack_ptr = bytes;
    b->bytes_allocated = sz;
    b->bytes_used = sz;
}
PMIX_EXPORT void PMIx_Data_buffer_unload(pmix_data_buffer_t *b, char **bytes, size_t *sz)
{
    *bytes = b->base_ptr;
    *sz = b->bytes_used;
    memset(b, 0, sizeof(*b));
}

PMIX_EXPORT void PMIx_App_info_create(pmix_app_t *p, size_t n)
{
    p->ninfo = n;
    p->info = PMIx_Info_create(n);
}

PMIX_EXPORT void PMIx_Query_qualifiers_create(pmix_query_t *p, size_t n)
{
    p->nqual = n;
    p->qualifiers = PMIx_Info_create(n);
}
