/*
 * fuzz_frame.c — libFuzzer target for the frame decoder (src/wire.c):
 * whatever bytes come off the socket, frame_parse answers a frame, "need
 * more", or an error, never reading past the bytes given; and every
 * nested field of a frame it accepts decodes (or fails) as the library
 * decodes it — info lists, procs, lookup data, invocation batches — with
 * everything allocated freed again (AddressSanitizer's leak check).
 *
 *   make fuzz FUZZ_SECONDS=30
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

static void infos(struct raw r)
{
    struct cur c = cur_of(r);
    pmix_info_t *in = NULL;
    size_t n = 0;
    if (NULL != r.p && 0 == cur_infos(&c, &in, &n, 0)) {
        PMIx_Info_free(in, n);
    }
}

static void pdata(struct raw r)
{
    struct cur c = cur_of(r);
    uint32_t n = cur_array(&c), i;
    for (i = 0; i < n && !c.bad; i++) {
        pmix_proc_t p;
        pmix_value_t v;
        uint32_t kl;
        if (3 != cur_array(&c) || cur_proc(&c, &p) < 0) {
            return;
        }
        cur_str(&c, &kl);
        cur_value(&c, &v, "pmix.exit.code", 0);
        PMIx_Value_destruct(&v);
    }
}

static void invokes(struct raw r)
{
    struct cur c = cur_of(r);
    uint32_t n = cur_array(&c), i;
    for (i = 0; i < n && !c.bad; i++) {
        uint64_t u;
        int64_t code;
        uint32_t l;
        pmix_proc_t p;
        pmix_info_t *in = NULL, *res = NULL;
        size_t nin = 0, nres = 0;
        if (7 != cur_array(&c)) {
            return;
        }
        cur_uint(&c, UINT64_MAX, &u);
        cur_uint(&c, UINT64_MAX, &u);
        cur_str(&c, &l);
        cur_int(&c, INT32_MIN, INT32_MAX, &code);
        if (!cur_nil(&c)) {
            cur_proc(&c, &p);
        }
        if (0 == cur_infos(&c, &in, &nin, 0)) {
            PMIx_Info_free(in, nin);
        }
        if (0 == cur_infos(&c, &res, &nres, 0)) {
            PMIx_Info_free(res, nres);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a copy of exactly size bytes: any read past it is caught */
    char *buf = malloc(size ? size : 1);
    size_t off = 0;
    memcpy(buf, data, size);
    while (off < size) {
        struct frame f;
        size_t used = 0;
        if (FRAME_OK != frame_parse(buf + off, size - off, 1u << 16, &f, &used, NULL)) {
            break;
        }
        infos(f.in);
        infos(f.res);
        infos(f.pr);
        pdata(f.pd);
        invokes(f.iv);
        if (NULL != f.src.p) {
            struct cur c = cur_of(f.src);
            pmix_proc_t p;
            cur_proc(&c, &p);
        }
        off += used;
    }
    free(buf);
    return 0;
}
