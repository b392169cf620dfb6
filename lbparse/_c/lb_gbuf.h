/* The growable byte buffer of lbparse's C modules, written once
 * (capture/_native.c, columnar/_kernels.c, columnar/_structs.c, storage/_scan.c).
 *
 * One rule for growing: the size wanted (len + extra) is checked against
 * LB_GBUF_MAX before any arithmetic can wrap; the capacity doubles from
 * LB_GBUF_FIRST until it holds it (the last step stops at LB_GBUF_MAX); a
 * refused size or a failed allocation returns -1 and leaves the buffer as
 * it was (bytes, length and capacity). The lb_gb_* functions call no
 * Python (_kernels.c grows its buffers without the GIL); the *_py ones,
 * for callers that hold it, set MemoryError as well.
 * tests/columnar/test_kernels.py compiles this header alone and holds it to that
 * rule, and fails when a C module grows a byte buffer of its own.
 */
#ifndef LB_GBUF_H
#define LB_GBUF_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The allocator: realloc and free, unless the module names another pair
 * before it includes this (storage/_scan.c: Python's raw allocator, so that
 * tracemalloc, and tests/storage/test_storage_growth.py, see its buffer). */
#ifndef LB_GBUF_REALLOC
#define LB_GBUF_REALLOC realloc
#define LB_GBUF_FREE free
#endif

/* Bytes p[0:len] of a block of cap bytes from LB_GBUF_REALLOC (lb_gb_free
 * it, or hand the block on with lb_gb_detach). All zero is the empty buffer. */
typedef struct {
    uint8_t *p;
    size_t len, cap;
} lb_gbuf;

/* The first capacity; a module whose buffers are long from the start names
 * its own before it includes this (a power of two, below LB_GBUF_MAX / 2). */
#ifndef LB_GBUF_FIRST
#define LB_GBUF_FIRST ((size_t)64)
#endif
/* No buffer grows past this: lengths fit ptrdiff_t and Py_ssize_t (and
 * malloc refuses more anyway). */
#define LB_GBUF_MAX ((size_t)PTRDIFF_MAX)

/* Capacity for `size` bytes in all: 0, or -1 with g unchanged. */
static inline int lb_gb_room(lb_gbuf *g, size_t size) {
    if (size <= g->cap)
        return 0;
    if (size > LB_GBUF_MAX)
        return -1;
    size_t c = g->cap ? g->cap : LB_GBUF_FIRST;
    while (c < size)
        c = c > LB_GBUF_MAX / 2 ? LB_GBUF_MAX : 2 * c;
    uint8_t *q = LB_GBUF_REALLOC(g->p, c);
    if (!q)
        return -1;
    g->p = q;
    g->cap = c;
    return 0;
}

/* Room for `extra` bytes after the length: 0, or -1 with g unchanged. */
static inline int lb_gb_reserve(lb_gbuf *g, size_t extra) {
    if (extra > LB_GBUF_MAX - g->len) /* len + extra would pass the limit, or wrap */
        return -1;
    return lb_gb_room(g, g->len + extra);
}

/* n bytes from s appended: 0, or -1 with g unchanged. */
static inline int lb_gb_put(lb_gbuf *g, const void *s, size_t n) {
    if (n == 0)
        return 0;
    if (lb_gb_reserve(g, n) < 0)
        return -1;
    memcpy(g->p + g->len, s, n);
    g->len += n;
    return 0;
}

/* The buffer holds n bytes from s, and only those: 0, or -1 with g unchanged. */
static inline int lb_gb_set(lb_gbuf *g, const void *s, size_t n) {
    if (lb_gb_room(g, n) < 0)
        return -1;
    if (n)
        memmove(g->p, s, n); /* s may lie in g's own bytes */
    g->len = n;
    return 0;
}

static inline void lb_gb_free(lb_gbuf *g) {
    LB_GBUF_FREE(g->p);
    g->p = NULL;
    g->len = g->cap = 0;
}

/* The block (NULL when nothing was ever put), now the caller's to free
 * (LB_GBUF_FREE); g is left empty. */
static inline uint8_t *lb_gb_detach(lb_gbuf *g) {
    uint8_t *p = g->p;
    g->p = NULL;
    g->len = g->cap = 0;
    return p;
}

#ifdef Py_PYTHON_H
/* The same, MemoryError set on failure (the caller holds the GIL). */
static inline int lb_gb_nomem(int rc) {
    if (rc < 0)
        PyErr_NoMemory();
    return rc;
}

static inline int lb_gb_room_py(lb_gbuf *g, size_t size) { return lb_gb_nomem(lb_gb_room(g, size)); }

static inline int lb_gb_reserve_py(lb_gbuf *g, size_t extra) {
    return lb_gb_nomem(lb_gb_reserve(g, extra));
}

static inline int lb_gb_put_py(lb_gbuf *g, const void *s, size_t n) {
    return lb_gb_nomem(lb_gb_put(g, s, n));
}

static inline int lb_gb_set_py(lb_gbuf *g, const void *s, size_t n) {
    return lb_gb_nomem(lb_gb_set(g, s, n));
}
#endif

#endif /* LB_GBUF_H */
