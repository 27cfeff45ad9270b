/*
 * fuzz_nodefence.c — libFuzzer target for the node barrier's header
 * check (src/nodefence.h): whatever a segment holds and however long it
 * is, nf_check answers without reading past it, and accepts only a
 * header of the magic, version, size and rank count asked for.
 *
 *   make fuzz FUZZ_SECONDS=30
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nodefence.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t n, v[4];
    unsigned char *seg;
    if (size < 4) {
        return 0;
    }
    memcpy(&n, data, 4);
    size -= 4;
    seg = malloc(size ? size : 1); /* exactly the bytes given: ASan sees any read beyond */
    if (NULL == seg) {
        return 0;
    }
    memcpy(seg, data + 4, size);
    if (0 == nf_check(seg, size, n)) {
        memcpy(v, seg, sizeof(v));
        if (size < NF_SIZE || v[0] != NF_MAGIC || v[1] != NF_VERSION || v[2] != n || v[3] != NF_SIZE || 0 == n ||
            n > NF_MAX_RANKS) {
            abort();
        }
    }
    free(seg);
    return 0;
}
