/* A bounded msgpack reader for lbparse's C modules (raft/_transport.c): every
 * length is checked against the bytes there are, nesting is limited, and a
 * read says whether the object is whole (LB_MP_OK), runs past the bytes
 * (LB_MP_SHORT: more may come on a stream) or is not what the caller reads
 * (LB_MP_BAD). msgpack-python, through lbparse.raft.msgpack_structs, is the
 * reference; tests/raft/test_transport_native.py holds the two equal. */
#ifndef LB_MSGPACK_H
#define LB_MSGPACK_H

#include <stddef.h>
#include <stdint.h>

#include "lb_be.h"

enum { LB_MP_OK = 0, LB_MP_SHORT = 1, LB_MP_BAD = 2 };
enum { LB_MP_NIL, LB_MP_BOOL, LB_MP_UINT, LB_MP_NEG, LB_MP_FLOAT, LB_MP_STR, LB_MP_BIN,
       LB_MP_ARRAY, LB_MP_MAP, LB_MP_EXT };
/* Nesting a skip follows; deeper is LB_MP_BAD (the caller's reference decides). */
#define LB_MP_MAX_DEPTH 64

/* One object's header. u: a bool, a uint, or a count (array, map) or byte
 * length (str, bin, ext: the body starts at `body`); i: a negative int. */
typedef struct {
    int kind;
    uint64_t u;
    int64_t i;
    size_t body;
} lb_mp_head;

/* The header at pos of b[0:n]. A str, bin or ext body is not checked here
 * (h->body + h->u may run past n): lb_mp_body does. */
static inline int lb_mp_head_at(const uint8_t *b, size_t n, size_t pos, lb_mp_head *h) {
    if (pos >= n)
        return LB_MP_SHORT;
    uint8_t c = b[pos];
    size_t avail = n - pos - 1; /* bytes after the type byte */
    const uint8_t *p = b + pos + 1;
    h->i = 0;
    h->u = 0;
    if (c <= 0x7f) { h->kind = LB_MP_UINT; h->u = c; h->body = pos + 1; return LB_MP_OK; }
    if (c >= 0xe0) { h->kind = LB_MP_NEG; h->i = (int8_t)c; h->body = pos + 1; return LB_MP_OK; }
    if (c <= 0x8f) { h->kind = LB_MP_MAP; h->u = c & 0x0f; h->body = pos + 1; return LB_MP_OK; }
    if (c <= 0x9f) { h->kind = LB_MP_ARRAY; h->u = c & 0x0f; h->body = pos + 1; return LB_MP_OK; }
    if (c <= 0xbf) { h->kind = LB_MP_STR; h->u = c & 0x1f; h->body = pos + 1; return LB_MP_OK; }
    int len;      /* bytes of the length or value after the type byte */
    int extra = 0; /* ext: its type byte */
    switch (c) {
    case 0xc0: h->kind = LB_MP_NIL; h->body = pos + 1; return LB_MP_OK;
    case 0xc2: case 0xc3:
        h->kind = LB_MP_BOOL; h->u = c == 0xc3; h->body = pos + 1; return LB_MP_OK;
    case 0xc4: h->kind = LB_MP_BIN; len = 1; break;
    case 0xc5: h->kind = LB_MP_BIN; len = 2; break;
    case 0xc6: h->kind = LB_MP_BIN; len = 4; break;
    case 0xc7: h->kind = LB_MP_EXT; len = 1; extra = 1; break;
    case 0xc8: h->kind = LB_MP_EXT; len = 2; extra = 1; break;
    case 0xc9: h->kind = LB_MP_EXT; len = 4; extra = 1; break;
    case 0xca: h->kind = LB_MP_FLOAT; len = 4; break;
    case 0xcb: h->kind = LB_MP_FLOAT; len = 8; break;
    case 0xcc: h->kind = LB_MP_UINT; len = 1; break;
    case 0xcd: h->kind = LB_MP_UINT; len = 2; break;
    case 0xce: h->kind = LB_MP_UINT; len = 4; break;
    case 0xcf: h->kind = LB_MP_UINT; len = 8; break;
    case 0xd0: h->kind = LB_MP_NEG; len = 1; break;
    case 0xd1: h->kind = LB_MP_NEG; len = 2; break;
    case 0xd2: h->kind = LB_MP_NEG; len = 4; break;
    case 0xd3: h->kind = LB_MP_NEG; len = 8; break;
    case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:
        /* fixext 1..16: a type byte, then 1 << (c - 0xd4) bytes */
        if (avail < 1)
            return LB_MP_SHORT;
        h->kind = LB_MP_EXT; h->u = (uint64_t)1 << (c - 0xd4); h->body = pos + 2;
        return LB_MP_OK;
    case 0xd9: h->kind = LB_MP_STR; len = 1; break;
    case 0xda: h->kind = LB_MP_STR; len = 2; break;
    case 0xdb: h->kind = LB_MP_STR; len = 4; break;
    case 0xdc: h->kind = LB_MP_ARRAY; len = 2; break;
    case 0xdd: h->kind = LB_MP_ARRAY; len = 4; break;
    case 0xde: h->kind = LB_MP_MAP; len = 2; break;
    case 0xdf: h->kind = LB_MP_MAP; len = 4; break;
    default: return LB_MP_BAD; /* 0xc1, never used */
    }
    if (avail < (size_t)(len + extra))
        return LB_MP_SHORT;
    uint64_t v = lb_be(p, len);
    h->body = pos + 1 + (size_t)len + (size_t)extra;
    if (h->kind == LB_MP_NEG) {
        /* int8..int64: sign-extend from the width read */
        int bits = 8 * len;
        h->i = bits == 64 ? (int64_t)v : (int64_t)(v ^ ((uint64_t)1 << (bits - 1))) -
                                             (int64_t)((uint64_t)1 << (bits - 1));
    } else {
        h->u = v;
    }
    return LB_MP_OK;
}

/* Whether the body of a str, bin or ext header is all there. */
static inline int lb_mp_body(size_t n, const lb_mp_head *h) {
    return h->body <= n && h->u <= n - h->body ? LB_MP_OK : LB_MP_SHORT;
}

/* The whole object at pos: where it ends. max_items bounds every array and map
 * count (a larger one is LB_MP_BAD even before its elements come), nesting is
 * at most LB_MP_MAX_DEPTH. An ext anywhere, or a map key that is an array or a
 * map, is LB_MP_BAD: the callers read neither, and leave such bytes to the
 * reference. */
static inline int lb_mp_skip(const uint8_t *b, size_t n, size_t pos, uint64_t max_items,
                             size_t *end) {
    uint64_t pending[LB_MP_MAX_DEPTH];
    int is_map[LB_MP_MAX_DEPTH];
    int depth = 0;
    lb_mp_head h = {0};
    for (;;) {
        /* a map's key is read when its pending count is even */
        int key = depth > 0 && is_map[depth - 1] && pending[depth - 1] % 2 == 0;
        int rc = lb_mp_head_at(b, n, pos, &h);
        if (rc != LB_MP_OK)
            return rc;
        switch (h.kind) {
        case LB_MP_STR: case LB_MP_BIN:
            if (lb_mp_body(n, &h) != LB_MP_OK)
                return LB_MP_SHORT;
            pos = h.body + (size_t)h.u;
            break;
        case LB_MP_EXT:
            return LB_MP_BAD;
        case LB_MP_ARRAY: case LB_MP_MAP:
            if (key || h.u > max_items)
                return LB_MP_BAD;
            pos = h.body;
            if (h.u > 0) {
                if (depth == LB_MP_MAX_DEPTH)
                    return LB_MP_BAD;
                is_map[depth] = h.kind == LB_MP_MAP;
                pending[depth] = h.kind == LB_MP_MAP ? 2 * h.u : h.u;
                depth++;
                continue; /* its first element comes next */
            }
            break;
        default:
            pos = h.body;
        }
        /* one object done: count it off its containers, closing the full ones */
        while (depth > 0 && --pending[depth - 1] == 0)
            depth--;
        if (depth == 0) {
            *end = pos;
            return LB_MP_OK;
        }
    }
}

#endif /* LB_MSGPACK_H */
