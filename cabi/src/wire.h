/*
 * wire.h — the client–agent protocol of docs/protocol.md in C: frames (a
 * 4-byte big-endian length, then a msgpack map) read from bytes that came
 * off a socket, and written into a growable buffer; and the typed values
 * (Proc, Info, Value, PData) converted to and from the PMIx C structures.
 *
 * Everything read is hostile until checked: frame_parse bounds every
 * length by the bytes present before anything is decoded or allocated
 * (mpv_skip walks a msgpack value iteratively, the way hiredis's read.c
 * walks its replies), so the decoders below may use msgpuck's primitive
 * mp_decode_* only on values whose kind they checked first.
 *
 * msgpuck (Debian's libmsgpuck-dev) is used for its header's inline
 * encoders and scalar decoders only: its type tables and mp_check live in
 * a static library built without -fPIC, which a shared library cannot
 * link, so the validator here is this library's own.
 */
#ifndef CABI_WIRE_H
#define CABI_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "pmix.h"

/* Frame limits: the agent's default, and the nesting of info arrays. */
#define WIRE_MAX_FRAME (4u << 20)
#define WIRE_MAX_NESTING 32

/* Frame types (docs/protocol.md, "Frame types"). */
enum {
    T_HELLO = 1, T_REPLY = 2, T_REGISTER = 3, T_DEREGISTER = 4, T_NOTIFY = 5,
    T_FINALIZE = 6, T_INVOKE = 7, T_INVOKE_DONE = 8, T_ERROR = 9, T_PUBLISH = 10,
    T_LOOKUP = 11, T_UNPUBLISH = 12, T_FENCE = 13, T_COMMIT = 14, T_GET = 15,
    T_CONNECT = 16, T_DISCONNECT = 17, T_ABORT = 18, T_LOG = 19,
    T_IOF_DATA = 23, T_INVOKE_BATCH = 24, T_INVOKE_DONE_BATCH = 25,
    /* PMIx groups (group.c) */
    T_GROUP_CONSTRUCT = 40, T_GROUP_DESTRUCT = 41, T_GROUP_INVITE = 42, T_GROUP_JOIN = 43, T_GROUP_LEAVE = 44,
    /* queries, job control (issue 29's api frames, 50-59) */
    T_JOB_CONTROL = 50,
    T_QUERY = 51,
};

/* ---- the validator ---- */

/* mpv_skip returns the end of the msgpack value at p, or NULL when it is
 * not one whole value within [p, end): a length or count claiming more
 * than the bytes left, a reserved byte, or a truncated header. Iterative:
 * nesting costs no stack. */
const char *mpv_skip(const char *p, const char *end);

/* Kinds of msgpack values, from the first byte. */
enum mpv_kind { K_NIL, K_BOOL, K_UINT, K_INT, K_FLOAT, K_DOUBLE, K_STR, K_BIN, K_ARRAY, K_MAP, K_EXT, K_BAD };
enum mpv_kind mpv_kind(const char *p);

/* ---- reading a frame ---- */

/* A raw value: its bytes inside a checked frame body. */
struct raw {
    const char *p; /* NULL: absent */
    const char *end;
};

/* A decoded frame: scalars decoded, nested fields kept raw (decoded when
 * used, with the checks of the cursor functions below). Strings point into
 * the body, are not NUL-terminated, and may be NULL with length 0. */
struct frame {
    uint64_t t, s, id, v, rk, r;
    int64_t st, c;
    const char *m, *ec, *ns, *nm;
    uint32_t m_len, ec_len, ns_len, nm_len;
    struct raw in, res, pr, ks, pd, pc, src, iv, cs, dn, pt, b;
    unsigned has_st : 1, has_rk : 1, has_v : 1;
};

enum frame_rc { FRAME_OK = 0, FRAME_MORE = 1, FRAME_TOO_BIG = -1, FRAME_MALFORMED = -2 };

/* frame_parse reads one frame from buf[0..len): FRAME_MORE when the bytes
 * do not hold a whole frame yet; FRAME_TOO_BIG when the length prefix is
 * over max (the stream cannot be followed past it); FRAME_MALFORMED when
 * the body is not a well-formed map of known keys of the right kinds (an
 * unknown key with a nested value, a key given twice, trailing bytes, no
 * type). On FRAME_OK, *used is the frame's size with its prefix, and f
 * points into buf. why, when not NULL, says what was wrong. */
enum frame_rc frame_parse(const char *buf, size_t len, size_t max, struct frame *f, size_t *used,
                          const char **why);

/* A cursor over raw values, for the nested fields. Any error sets bad and
 * makes every later read fail: check it once at the end. */
struct cur {
    const char *p, *end;
    int bad;
};

static inline struct cur cur_of(struct raw r) { return (struct cur){r.p, r.end, NULL == r.p}; }
int cur_nil(struct cur *c); /* consumes a nil, returns 1; else 0 */
uint32_t cur_array(struct cur *c);
int cur_uint(struct cur *c, uint64_t max, uint64_t *out);
int cur_int(struct cur *c, int64_t min, int64_t max, int64_t *out);
/* str, bin or nil ("") */
const char *cur_str(struct cur *c, uint32_t *len);
void cur_skip(struct cur *c);

/* The PMIx structures, from C malloc. key selects OpenPMIx's type for the
 * keys the wire carries as another of the same width (cabi/doc.go). */
int cur_value(struct cur *c, pmix_value_t *v, const char *key, int depth);

/* WIRE_ARRAY is the wire type of a PMIX_DATA_ARRAY of another element
 * type than info and proc: [elem: uint (the C type), [value]]. */
#define WIRE_ARRAY 1039

/* elemsize is the size of one element of a data array of type t, 0 for a
 * type whose arrays the library does not know (values.c). */
size_t elemsize(pmix_data_type_t t);
int cur_proc(struct cur *c, pmix_proc_t *p);
/* An info list as a calloc'd array (the last flagged ARRAY_END); NULL for
 * none. */
int cur_infos(struct cur *c, pmix_info_t **out, size_t *n, int depth);

/* ---- writing ---- */

struct wbuf {
    char *p;
    size_t len, cap;
    int oom;
};

void wb_free(struct wbuf *w);
char *wb_reserve(struct wbuf *w, size_t n); /* NULL when out of memory (w->oom set) */
void wb_uint(struct wbuf *w, uint64_t u);
void wb_int(struct wbuf *w, int64_t i);
void wb_str(struct wbuf *w, const char *s, size_t n);
void wb_cstr(struct wbuf *w, const char *s);
void wb_bin(struct wbuf *w, const void *b, size_t n);
void wb_nil(struct wbuf *w);
void wb_bool(struct wbuf *w, int b);
void wb_array(struct wbuf *w, uint32_t n);
void wb_raw(struct wbuf *w, const char *p, size_t n);
/* An array or map whose count is known only at the end: the offset to
 * give wb_patch32. */
size_t wb_array32(struct wbuf *w);
size_t wb_map32(struct wbuf *w);
void wb_patch32(struct wbuf *w, size_t at, uint32_t n);

/* Frames: begin writes the length prefix and the map header; key writes a
 * key (counted); end patches both. */
struct fw {
    struct wbuf *w;
    size_t start, map;
    uint32_t n;
};
void fw_begin(struct fw *f, struct wbuf *w, unsigned type, uint64_t seq);
void fw_key(struct fw *f, const char *key);
int fw_end(struct fw *f); /* 0, or -1 when out of memory */

/* Values: 0, or -1 for a type that cannot leave a process (nothing
 * written). Infos leave such entries out. */
int wb_value(struct wbuf *w, const pmix_value_t *v);
void wb_proc(struct wbuf *w, const pmix_proc_t *p);
void wb_infos(struct wbuf *w, const pmix_info_t *info, size_t n);
/* A proc array whose empty nspaces are self's. */
void wb_procs(struct wbuf *w, const pmix_proc_t *procs, size_t n, const char *self);

#endif
