/* Arrow arrays built in C and handed to pyarrow whole, through the Arrow C
 * data interface (https://arrow.apache.org/docs/format/CDataInterface.html),
 * written by hand: a column's buffers leave the builder without a copy and
 * pyarrow imports the whole tree in one call (pa.Array._import_from_c with
 * the column's type), where a Python walk made one pyarrow call per column.
 *
 * An array made by lb_arrow_init owns what it is given (lb_arrow_own: blocks
 * from malloc/realloc, as lb_gbuf.h's lb_gb_detach hands them on) and its
 * children; its release callback frees them all, children first. It calls
 * no Python: pyarrow may release an array from any thread, without the GIL.
 * A tree whose building failed half-way is released the same way: children
 * not made yet have no release callback and are only freed. A module that
 * includes Python.h first gets lb_arrow_drop_py, its `drop(address)`.
 */
#ifndef LB_ARROW_H
#define LB_ARROW_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE
#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};
#endif

#define LB_ARROW_MAX_BUFFERS 3 /* validity, then values or offsets, then data */

typedef struct {
    const void *buffers[LB_ARROW_MAX_BUFFERS];
    void *owned[LB_ARROW_MAX_BUFFERS];
} lb_arrow_private;

static void lb_arrow_release(struct ArrowArray *a) {
    if (!a->release)
        return;
    for (int64_t i = 0; i < a->n_children; i++) {
        struct ArrowArray *c = a->children[i];
        if (c && c->release)
            c->release(c);
        free(c);
    }
    free(a->children);
    lb_arrow_private *p = a->private_data;
    if (p)
        for (int i = 0; i < LB_ARROW_MAX_BUFFERS; i++)
            free(p->owned[i]);
    free(p);
    a->release = NULL;
}

/* `a` (any memory) made an array of `length` elements, `null_count` of them
 * null, with `n_buffers` buffers (all NULL until given) and `n_children`
 * zeroed children: 0, or -1 when memory ran out (then a is released). */
static inline int lb_arrow_init(struct ArrowArray *a, int64_t length, int64_t null_count,
                                int n_buffers, int64_t n_children) {
    memset(a, 0, sizeof *a);
    lb_arrow_private *p = calloc(1, sizeof *p);
    if (!p)
        return -1;
    a->length = length;
    a->null_count = null_count;
    a->n_buffers = n_buffers;
    a->buffers = p->buffers;
    a->private_data = p;
    a->release = lb_arrow_release;
    if (n_children) {
        a->children = calloc((size_t)n_children, sizeof *a->children);
        if (!a->children) {
            lb_arrow_release(a);
            return -1;
        }
        a->n_children = n_children;
        for (int64_t i = 0; i < n_children; i++)
            if (!(a->children[i] = calloc(1, sizeof(struct ArrowArray)))) {
                lb_arrow_release(a);
                return -1;
            }
    }
    return 0;
}

/* Buffer `i` of `a` is `block`, freed with the array (NULL: none, which the
 * interface allows for a validity bitmap without nulls and for an empty buffer). */
static inline void lb_arrow_own(struct ArrowArray *a, int i, void *block) {
    lb_arrow_private *p = a->private_data;
    p->owned[i] = block;
    p->buffers[i] = block;
}

/* An array from malloc given back: released if no one moved it out, then freed. */
static inline void lb_arrow_drop(struct ArrowArray *a) {
    if (a && a->release)
        a->release(a);
    free(a);
}

/* n bytes as an Arrow bitmap (least significant bit first; a byte other than
 * 0 is a 1), from malloc; NULL when memory ran out. Eight bytes a step: each
 * byte made 0 or 1, then gathered into one by a multiplication (byte j's bit
 * lands on bit 56 + j of the product, no two partial products on one bit),
 * where a test and a branch a byte was a visible part of _structs' export. */
static inline uint8_t *lb_arrow_bitmap(const uint8_t *bytes, size_t n) {
    size_t nb = (n + 7) / 8;
    uint8_t *p = calloc(nb ? nb : 1, 1);
    if (!p)
        return NULL;
    size_t i = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ /* byte j at bits 8j */
    const uint64_t low7 = 0x7F7F7F7F7F7F7F7FULL, high = 0x8080808080808080ULL;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        memcpy(&x, bytes + i, 8);
        x = ((((x & low7) + low7) | x) & high) >> 7; /* each byte: 1 when not 0 */
        p[i / 8] = (uint8_t)((x * 0x0102040810204080ULL) >> 56);
    }
#endif
    for (; i < n; i++)
        if (bytes[i])
            p[i / 8] |= (uint8_t)(1u << (i % 8));
    return p;
}

#ifdef Py_PYTHON_H
/* drop(address), a module function (METH_O) of each module that hands an
 * array out by its address for pa.Array._import_from_c: the array given
 * back once imported (or not), released if no one moved it out, then freed. */
static inline PyObject *lb_arrow_drop_py(PyObject *module, PyObject *address) {
    (void)module;
    unsigned long long a = PyLong_AsUnsignedLongLong(address);
    if (PyErr_Occurred())
        return NULL;
    lb_arrow_drop((struct ArrowArray *)(uintptr_t)a);
    Py_RETURN_NONE;
}
#endif

#endif
