/*
 * Protobuf messages straight into Arrow struct columns, in C: the native
 * twin of wirescan.decode_structs (its numpy reader is the reference, and
 * documents the rules; tests/columnar/test_native_decode.py holds the two equal,
 * `ok` and values, on hypothesis-made messages, the reference vectors and
 * the real capture's payloads).
 *
 * Program(spec): the message type compiled by wirescan_native.py from its
 * descriptor and its Arrow type (fields in the Arrow struct's order, their
 * numbers, protobuf kinds and wire types, nullability, enum names);
 * Program.decode(data, starts, ends) -> (ok, column buffers).
 *
 * Each message is first checked (every rule that leaves it to upb: a tag or
 * length past 5 bytes, a varint past 10, a wire type other than the field's
 * (a repeated number packed is read: its elements one by one),
 * a singular field twice, a group, more than 256 fields, invalid UTF-8, an
 * unknown number of a closed enum, a map entry with a key twice, an unknown
 * field or no value, and, for `clean`, a field the type does not declare),
 * then written: a message that fails leaves a null row and nothing else,
 * so no partial output can misalign a column. Nothing is read outside
 * data[starts[i]:ends[i]], checked against the buffer first.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "lb_arrow.h"
#include "lb_gbuf.h"
#include "lb_varint.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

#define MAX_STEPS 256     /* wirescan.MAX_STEPS */
#define MAX_SIZE_BYTES 5  /* wirescan.MAX_SIZE_BYTES */
#define BY_NUMBER 64      /* field numbers below this are found by table, not by search */

enum { K_INT32 = 1, K_SINT32, K_SINT64, K_BOOL, K_INT64, K_ENUM, K_FLOAT, K_DOUBLE, K_FIXED32,
       K_FIXED64, K_STRING, K_BYTES, K_MESSAGE };
enum { R_SINGLE = 0, R_LIST = 1, R_MAP = 2 };


struct node;

typedef struct {
    int32_t number;
    int wire;            /* expected wire type */
    int rep;             /* R_SINGLE, R_LIST, R_MAP */
    int presence;        /* proto3 optional: null exactly when absent */
    struct node *col;    /* the column: scalar or struct; for lists and maps, its elements */
    lb_gbuf offsets;        /* lists and maps: int32 offsets */
    size_t last_offsets;    /* its length in the last batch exported (presize) */
} field;

typedef struct node {
    int kind;            /* K_*; K_MESSAGE: a struct */
    int nullable;        /* a zero value (or absence) is null */
    /* struct */
    int nfields;
    field *fields;
    int32_t *numbers;    /* declared numbers checked for `strict` (sorted), or NULL */
    int ndeclared;
    int strict;          /* a number outside `numbers` leaves the message to upb */
    int map_entry;       /* the entry of a map: key (field 0) and value (field 1) */
    int32_t by_number[BY_NUMBER]; /* a field number's index in fields, -1 if none */
    /* enum */
    int32_t enum_lo;
    int nnames;
    char **names;        /* by number - enum_lo; NULL where none */
    int closed;
    PyObject *enum_name; /* for UNKNOWN_ENUM_VALUE_<name>_<n> */
    /* builders */
    lb_gbuf valid, values, offsets, data;
    int64_t length, nulls;
    /* Null slots not written yet (settle writes them, at once, before the
     * column's next slot and before export): an absent message is one count
     * here, not a slot written in each column under it. Most of a
     * PropagatedRequest's columns are the ops it does not carry: writing
     * their nulls one by one was 9 in 10 of its decoding. */
    int64_t owed;
    /* Each builder's length in the last batch exported: the next batch's
     * builders start that large (scaled to its rows), not at 64 bytes
     * doubled a dozen times, each time copied (presize). */
    size_t last_valid, last_values, last_offsets, last_data;
} node;

typedef struct {
    PyObject_HEAD
    node *root;
    int clean;
    Py_ssize_t last_rows; /* the rows of the last batch exported (presize) */
} Program;

/* ---- reading ------------------------------------------------------------------ */

typedef struct {
    int32_t f;      /* field index, -1 for a number the type does not declare */
    int wt;
    int64_t a, b;   /* value (varint) or start; end */
} occ;

/* The occurrences of one message (wirescan._Scan's rules); -1 if it breaks one. */
static int scan(const node *m, const uint8_t *d, int64_t pos, int64_t end, occ *out) {
    int n = 0;
    while (pos < end) {
        uint64_t tag, v;
        int64_t p, a, b;
        if (n == MAX_STEPS || !lb_varint(d, pos, end, &tag, &p) || tag > 0xFFFFFFFFu || tag < 8 ||
            p - pos > MAX_SIZE_BYTES)
            return -1;
        int wt = (int)(tag & 7);
        if (wt == 0 || wt == 2) {
            if (!lb_varint(d, p, end, &v, &b))
                return -1;
            if (wt == 2) {
                int64_t len = (int64_t)v;
                if (len < 0 || len > end - b || b - p > MAX_SIZE_BYTES)
                    return -1;
                a = b;
                b += len;
            } else {
                a = (int64_t)v;
            }
        } else if (wt == 1 || wt == 5) {
            a = p;
            b = p + (wt == 1 ? 8 : 4);
            if (b > end)
                return -1;
        } else {
            return -1;
        }
        uint32_t number = (uint32_t)(tag >> 3);
        int32_t f = -1;
        if (number < BY_NUMBER)
            f = m->by_number[number];
        else
            for (int i = 0; i < m->nfields; i++)
                if ((uint32_t)m->fields[i].number == number) {
                    f = i;
                    break;
                }
        out[n].f = f;
        out[n].wt = wt;
        out[n].a = a;
        out[n].b = b;
        if (f < 0 && m->strict) {
            int known = 0;
            for (int i = 0; i < m->ndeclared; i++)
                known |= (uint32_t)m->numbers[i] == number;
            if (!known)
                return -1;
        }
        n++;
        pos = b;
    }
    return n;
}

/* Standard UTF-8 (what Arrow's string validation and upb accept). */
static int utf8_checked(const uint8_t *s, int64_t n) {
    int64_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            /* ASCII, the usual case: eight bytes at a time */
            uint64_t w;
            while (i + 8 <= n && (memcpy(&w, s + i, 8), !(w & 0x8080808080808080ull)))
                i += 8;
            if (i < n && s[i] < 0x80)
                i++;
            continue;
        }
        int k;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF)
            k = 1, cp = c & 0x1F;
        else if (c >= 0xE0 && c <= 0xEF)
            k = 2, cp = c & 0x0F;
        else if (c >= 0xF0 && c <= 0xF4)
            k = 3, cp = c & 0x07;
        else
            return 0;
        for (int j = 1; j <= k; j++) {
            if (i + j >= n || (s[i + j] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if ((k == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += k + 1;
    }
    return 1;
}

/* The same; a string of ASCII alone (the usual case, and short: names,
 * subjects, keys) found so by OR-ing its bytes, a word at a time and then
 * the tail, without a branch per byte. */
static inline int utf8_ok(const uint8_t *s, int64_t n) {
    uint64_t words = 0, w;
    uint8_t tail = 0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, s + i, 8);
        words |= w;
    }
    for (; i < n; i++)
        tail |= s[i];
    if (!(words & 0x8080808080808080ull) && !(tail & 0x80))
        return 1;
    return utf8_checked(s, n);
}

/* A scalar's value as the column holds it (int64 for integer kinds, bool
 * as 0/1), from an occurrence; and whether it is zero. */
static int64_t int_value(int kind, const uint8_t *d, const occ *o) {
    uint64_t raw = (uint64_t)o->a;
    switch (kind) {
    case K_INT32:
    case K_ENUM:
        return (int32_t)(uint32_t)raw;
    case K_SINT32: {
        uint32_t u = (uint32_t)raw;
        return (int32_t)((u >> 1) ^ (0u - (u & 1u)));
    }
    case K_SINT64:
        return (int64_t)((raw >> 1) ^ (0ull - (raw & 1ull)));
    case K_BOOL:
        return raw != 0;
    case K_INT64:
        return (int64_t)raw;
    case K_FIXED32: {
        uint32_t v;
        memcpy(&v, d + o->a, 4);
        return (int32_t)v;
    }
    case K_FIXED64: {
        int64_t v;
        memcpy(&v, d + o->a, 8);
        return v;
    }
    }
    return 0;
}

static const char *enum_name(const node *c, int64_t v) {
    int64_t i = v - c->enum_lo;
    return (i >= 0 && i < c->nnames) ? c->names[i] : NULL;
}

static int check_message(const node *m, const uint8_t *d, int64_t pos, int64_t end);

/* A repeated scalar of a numeric kind may come packed: one length-delimited
 * occurrence holding the elements back to back (wire type 2 where the field
 * expects 0, 1 or 5). upb reads both forms, whatever the field declares. */
static inline int packable(const field *f) {
    return f->rep == R_LIST && f->wire != 2;
}

/* The elements of a packed occurrence, one at a time: *e is the next one as
 * an unpacked occurrence of the field's wire type; 0 at the end, -1 if the
 * bytes are not whole elements (a varint cut or too long, a fixed width
 * that does not divide the length). */
static inline int packed_next(const field *f, const uint8_t *d, int64_t *pos, int64_t end,
                              occ *e) {
    if (*pos >= end)
        return 0;
    e->f = -1;
    e->wt = f->wire;
    if (f->wire == 0) {
        uint64_t v;
        int64_t nx;
        if (!lb_varint(d, *pos, end, &v, &nx))
            return -1;
        e->a = (int64_t)v;
        e->b = nx;
    } else {
        int64_t w = f->wire == 1 ? 8 : 4;
        if (end - *pos < w)
            return -1;
        e->a = *pos;
        e->b = *pos + w;
    }
    *pos = e->b;
    return 1;
}

/* A value of field f at occurrence o passes the rules (not its wire type: done). */
static inline __attribute__((always_inline)) int check_value(const field *f, const node *c,
                                                            const uint8_t *d, const occ *o) {
    if (c->kind == K_MESSAGE)
        return check_message(c, d, o->a, o->b);
    if (c->kind == K_STRING)
        return utf8_ok(d + o->a, o->b - o->a);
    if (c->kind == K_ENUM && c->closed && !enum_name(c, int_value(K_ENUM, d, o)))
        return 0;
    (void)f;
    return 1;
}

/* The key of a map entry (its field 0), as what makes two keys the same. */
typedef struct {
    int64_t v;
    const uint8_t *s;
    int64_t n;
} key;

static int entry_key(const node *entry, const uint8_t *d, int64_t pos, int64_t end, key *k) {
    occ o[MAX_STEPS];
    int n = scan(entry, d, pos, end, o);
    k->v = 0;
    k->s = (const uint8_t *)"";
    k->n = 0;
    const node *kc = entry->fields[0].col;
    for (int i = 0; i < n; i++)
        if (o[i].f == 0) {
            if (kc->kind == K_STRING || kc->kind == K_BYTES) {
                k->s = d + o[i].a;
                k->n = o[i].b - o[i].a;
            } else {
                k->v = int_value(kc->kind, d, &o[i]);
            }
        }
    return 1;
}

/* A message whose occurrences `o` (n of them, from scan) pass the rules.
 * One pass over the occurrences: a field's are checked where they come,
 * which gives the same answer as field by field (every rule is a yes or
 * no, and none has a side effect). */
static int check_scanned(const node *m, const uint8_t *d, const occ *o, int n) {
    int count[m->nfields > 0 ? m->nfields : 1];
    memset(count, 0, sizeof count);
    int repeated_maps = 0;
    for (int i = 0; i < n; i++) {
        int fi = o[i].f;
        if (fi < 0)
            continue;
        const field *f = &m->fields[fi];
        if (o[i].wt == 2 && packable(f)) {
            int64_t p = o[i].a;
            occ e;
            int r;
            while ((r = packed_next(f, d, &p, o[i].b, &e)) > 0)
                if (!check_value(f, f->col, d, &e))
                    return 0;
            if (r < 0)
                return 0;
            count[fi]++;
            continue;
        }
        if (o[i].wt != f->wire)
            return 0;
        if (++count[fi] > 1 && f->rep == R_SINGLE)
            return 0;
        if (!check_value(f, f->col, d, &o[i]))
            return 0;
        if (f->rep == R_MAP) {
            const node *entry = f->col;
            /* an entry without its (message) value */
            if (entry->nfields > 1 && entry->fields[1].col->kind == K_MESSAGE) {
                occ eo[MAX_STEPS];
                int en = scan(entry, d, o[i].a, o[i].b, eo);
                int has = 0;
                for (int j = 0; j < en; j++)
                    has |= eo[j].f == 1;
                if (!has)
                    return 0;
            }
            repeated_maps |= count[fi] > 1;
        }
    }
    for (int fi = 0; repeated_maps && fi < m->nfields; fi++) {
        const field *f = &m->fields[fi];
        if (f->rep != R_MAP || count[fi] < 2)
            continue;
        /* a key twice: upb keeps the last; left to it */
        key seen[MAX_STEPS];
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (o[i].f != fi)
                continue;
            key kk;
            entry_key(f->col, d, o[i].a, o[i].b, &kk);
            for (int j = 0; j < k; j++)
                if (seen[j].v == kk.v && seen[j].n == kk.n &&
                    (kk.n == 0 || !memcmp(seen[j].s, kk.s, (size_t)kk.n)))
                    return 0;
            seen[k++] = kk;
        }
    }
    return 1;
}

static int check_message(const node *m, const uint8_t *d, int64_t pos, int64_t end) {
    occ o[MAX_STEPS];
    int n = scan(m, d, pos, end, o);
    return n >= 0 && check_scanned(m, d, o, n);
}

/* ---- writing -------------------------------------------------------------------- */
/* Slot c->length - 1 (each slot's length counted first, then its validity
 * put, once). Validity bytes are written only from a column's first null:
 * until then every slot is valid and none is written (most columns of an
 * emit_defaults batch never have a null, and export_node makes no bitmap for
 * them); the first null writes the ones before it. */
static inline __attribute__((always_inline)) int put_valid(node *c, int valid) {
    if (valid && !c->nulls)
        return 0;
    if (!c->nulls) {
        size_t before = (size_t)(c->length - 1);
        if (lb_gb_room_py(&c->valid, before + 1) < 0)
            return -1;
        memset(c->valid.p, 1, before);
        c->valid.len = before;
    }
    uint8_t v = (uint8_t)valid;
    c->nulls += !valid;
    return lb_gb_put_py(&c->valid, &v, 1);
}

static inline __attribute__((always_inline)) int put_offset(lb_gbuf *g, int64_t v) {
    if (v > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a column passed 2 GiB in one batch");
        return -1;
    }
    int32_t x = (int32_t)v;
    return lb_gb_put_py(g, &x, sizeof x);
}

static int write_message(node *m, const uint8_t *d, int64_t pos, int64_t end);

/* k null slots at the end of c's validity (its length already counted them). */
static int put_nulls(node *c, int64_t k) {
    size_t before = (size_t)(c->length - k);
    if (!c->nulls) { /* the first nulls: the valid slots before them written first */
        if (lb_gb_room_py(&c->valid, before + (size_t)k) < 0)
            return -1;
        memset(c->valid.p, 1, before);
        c->valid.len = before;
    } else if (lb_gb_reserve_py(&c->valid, (size_t)k) < 0) {
        return -1;
    }
    memset(c->valid.p + c->valid.len, 0, (size_t)k);
    c->valid.len += (size_t)k;
    c->nulls += k;
    return 0;
}

/* k copies of offset v appended to g (put_offset's, at once). */
static int put_offsets(lb_gbuf *g, int64_t v, int64_t k) {
    if (v > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a column passed 2 GiB in one batch");
        return -1;
    }
    int32_t x = (int32_t)v;
    if (lb_gb_reserve_py(g, (size_t)k * sizeof x) < 0)
        return -1;
    for (int64_t j = 0; j < k; j++) {
        memcpy(g->p + g->len, &x, sizeof x);
        g->len += sizeof x;
    }
    return 0;
}

/* n zero bytes appended to g. */
static int put_zeros(lb_gbuf *g, size_t n) {
    if (lb_gb_reserve_py(g, n) < 0)
        return -1;
    memset(g->p + g->len, 0, n);
    g->len += n;
    return 0;
}

/* The null slots c owes, written: what that many write_value(c, NULL, ...)
 * of a null would write (a zero value, an empty string), at once; a
 * struct's columns owe its null slots in turn, its lists an empty list each. */
static int settle(node *c) {
    int64_t k = c->owed;
    c->owed = 0;
    c->length += k;
    if (put_nulls(c, k) < 0)
        return -1;
    switch (c->kind) {
    case K_MESSAGE:
        for (int i = 0; i < c->nfields; i++) {
            field *f = &c->fields[i];
            if (f->rep == R_SINGLE) {
                f->col->owed += k;
                continue;
            }
            /* a list's elements are only ever written, never owed: its length is whole */
            if (put_offsets(&f->offsets, f->col->length, k) < 0)
                return -1;
        }
        return 0;
    case K_STRING:
    case K_BYTES:
    case K_ENUM:
        return put_offsets(&c->offsets, (int64_t)c->data.len, k);
    case K_BOOL:
        return put_zeros(&c->values, (size_t)k);
    case K_FLOAT:
    case K_INT32:
    case K_SINT32:
    case K_FIXED32:
        return put_zeros(&c->values, (size_t)k * 4);
    default:
        return put_zeros(&c->values, (size_t)k * 8);
    }
}

/* A null slot in a column (a message left to upb, an absent message): owed. */
static inline int write_null(node *c) {
    c->owed++;
    return 0;
}

/* A scalar or message slot: `o` the occurrence, NULL when absent. */
/* Inlined into its callers: a call per slot was a tenth of a Publish's decoding. */
static inline __attribute__((always_inline)) int write_value(node *c, const uint8_t *d, const occ *o,
                                                            int nullable, int presence) {
    if (c->owed && settle(c) < 0)
        return -1;
    c->length++;
    switch (c->kind) {
    case K_MESSAGE: {
        c->length--;
        if (!o)
            return write_null(c);
        return write_message(c, d, o->a, o->b);
    }
    case K_STRING:
    case K_BYTES: {
        int64_t n = o ? o->b - o->a : 0;
        int null = presence ? !o : (nullable && n == 0);
        if (!null && n && lb_gb_put_py(&c->data, d + o->a, (size_t)n) < 0)
            return -1;
        return put_offset(&c->offsets, (int64_t)c->data.len) || put_valid(c, !null);
    }
    case K_ENUM: {
        int64_t v = o ? int_value(K_ENUM, d, o) : 0;
        int null = presence ? !o : (nullable && v == 0);
        if (!null) {
            const char *name = enum_name(c, v);
            if (name) {
                if (lb_gb_put_py(&c->data, name, strlen(name)) < 0)
                    return -1;
            } else {
                PyObject *s = PyUnicode_FromFormat("UNKNOWN_ENUM_VALUE_%U_%lld", c->enum_name,
                                                   (long long)v);
                const char *u = s ? PyUnicode_AsUTF8(s) : NULL;
                int rc = u ? lb_gb_put_py(&c->data, u, strlen(u)) : -1;
                Py_XDECREF(s);
                if (rc < 0)
                    return -1;
            }
        }
        return put_offset(&c->offsets, (int64_t)c->data.len) || put_valid(c, !null);
    }
    case K_FLOAT: {
        float v = 0;
        if (o)
            memcpy(&v, d + o->a, 4);
        int null = presence ? !o : (nullable && v == 0 && !signbit(v));
        return lb_gb_put_py(&c->values, &v, 4) || put_valid(c, !null);
    }
    case K_DOUBLE: {
        double v = 0;
        if (o)
            memcpy(&v, d + o->a, 8);
        int null = presence ? !o : (nullable && v == 0 && !signbit(v));
        return lb_gb_put_py(&c->values, &v, 8) || put_valid(c, !null);
    }
    case K_BOOL: {
        uint8_t v = o ? (uint8_t)int_value(K_BOOL, d, o) : 0;
        int null = presence ? !o : (nullable && !v);
        return lb_gb_put_py(&c->values, &v, 1) || put_valid(c, !null);
    }
    case K_INT32:
    case K_SINT32:
    case K_FIXED32: {
        int32_t v = o ? (int32_t)int_value(c->kind, d, o) : 0;
        int null = presence ? !o : (nullable && v == 0);
        return lb_gb_put_py(&c->values, &v, 4) || put_valid(c, !null);
    }
    default: {
        int64_t v = o ? int_value(c->kind, d, o) : 0;
        int null = presence ? !o : (nullable && v == 0);
        return lb_gb_put_py(&c->values, &v, 8) || put_valid(c, !null);
    }
    }
}

/* A checked message from its occurrences (scan's), into its columns. */
static int write_scanned(node *m, const uint8_t *d, const occ *o, int n) {
    if (m->owed && settle(m) < 0)
        return -1;
    m->length++;
    if (put_valid(m, 1) < 0)
        return -1;
    /* A singular field's value is its last occurrence (as upb keeps it). */
    int last[m->nfields > 0 ? m->nfields : 1];
    for (int fi = 0; fi < m->nfields; fi++)
        last[fi] = -1;
    for (int i = 0; i < n; i++)
        if (o[i].f >= 0)
            last[o[i].f] = i;
    /* keep_zero: a map entry's key and value are kept even when zero, as is
     * everything under Spark's emit.default.values (compiled as nullable=0) */
    for (int fi = 0; fi < m->nfields; fi++) {
        field *f = &m->fields[fi];
        node *c = f->col;
        if (f->rep == R_SINGLE) {
            const occ *found = last[fi] >= 0 ? &o[last[fi]] : NULL;
            if (write_value(c, d, found, c->nullable, f->presence) < 0)
                return -1;
            continue;
        }
        for (int i = 0; last[fi] >= 0 && i <= last[fi]; i++) {
            if (o[i].f != fi)
                continue;
            if (c->kind == K_MESSAGE) {
                if (write_message(c, d, o[i].a, o[i].b) < 0)
                    return -1;
            } else if (o[i].wt == 2 && packable(f)) {
                int64_t p = o[i].a;
                occ e;
                while (packed_next(f, d, &p, o[i].b, &e) > 0) /* checked: whole elements */
                    if (write_value(c, d, &e, 0, 0) < 0)
                        return -1;
            } else if (write_value(c, d, &o[i], 0, 0) < 0) {
                return -1;
            }
        }
        if (put_offset(&f->offsets, c->length) < 0)
            return -1;
    }
    return 0;
}

static int write_message(node *m, const uint8_t *d, int64_t pos, int64_t end) {
    occ o[MAX_STEPS];
    int n = scan(m, d, pos, end, o);
    if (n < 0)
        return -1; /* checked before: cannot happen */
    return write_scanned(m, d, o, n);
}

/* ---- the program ------------------------------------------------------------------ */
static void free_node(node *c) {
    if (!c)
        return;
    for (int i = 0; i < c->nfields; i++) {
        free_node(c->fields[i].col);
        lb_gb_free(&c->fields[i].offsets);
    }
    free(c->fields);
    free(c->numbers);
    for (int i = 0; i < c->nnames; i++)
        free(c->names[i]);
    free(c->names);
    Py_XDECREF(c->enum_name);
    lb_gb_free(&c->valid);
    lb_gb_free(&c->values);
    lb_gb_free(&c->offsets);
    lb_gb_free(&c->data);
    free(c);
}

/* spec of a column: (kind, nullable, fields, declared, strict, enum) where
 * fields: ((number, wire, rep, presence, column spec), ...) for a message;
 * declared: numbers (strict checks); enum: (lo, names, closed, enum name). */
static node *compile(PyObject *spec, int depth) {
    if (depth > 100) {
        PyErr_SetString(PyExc_ValueError, "Program: nested too deeply");
        return NULL;
    }
    int kind, nullable, strict;
    PyObject *fields, *declared, *en;
    if (!PyArg_ParseTuple(spec, "iiOOiO", &kind, &nullable, &fields, &declared, &strict, &en))
        return NULL;
    node *c = calloc(1, sizeof(node));
    if (!c) {
        PyErr_NoMemory();
        return NULL;
    }
    c->kind = kind;
    c->nullable = nullable;
    c->strict = strict;
    if (kind < K_INT32 || kind > K_MESSAGE) {
        PyErr_Format(PyExc_ValueError, "Program: kind %d", kind);
        goto fail;
    }
    if (kind == K_MESSAGE) {
        Py_ssize_t nf = PySequence_Size(fields), nd = PySequence_Size(declared);
        if (nf < 0 || nd < 0)
            goto fail;
        c->fields = calloc((size_t)(nf ? nf : 1), sizeof(field));
        c->numbers = calloc((size_t)(nd ? nd : 1), sizeof(int32_t));
        if (!c->fields || !c->numbers) {
            PyErr_NoMemory();
            goto fail;
        }
        for (Py_ssize_t i = 0; i < nd; i++) {
            PyObject *x = PySequence_GetItem(declared, i);
            c->numbers[i] = x ? (int32_t)PyLong_AsLong(x) : 0;
            Py_XDECREF(x);
            if (PyErr_Occurred())
                goto fail;
        }
        c->ndeclared = (int)nd;
        for (Py_ssize_t i = 0; i < nf; i++) {
            PyObject *fs = PySequence_GetItem(fields, i);
            if (!fs)
                goto fail;
            field *f = &c->fields[i];
            PyObject *sub;
            int ok = PyArg_ParseTuple(fs, "iiiiO", &f->number, &f->wire, &f->rep, &f->presence,
                                      &sub);
            if (ok)
                f->col = compile(sub, depth + 1);
            Py_DECREF(fs);
            c->nfields = (int)i + 1;
            if (!ok || !f->col)
                goto fail;
            if (f->rep == R_MAP && (f->col->kind != K_MESSAGE || f->col->nfields != 2)) {
                PyErr_SetString(PyExc_ValueError, "Program: a map's entry has key and value");
                goto fail;
            }
        }
        /* as the search finds them: the first field of a number */
        for (int n = 0; n < BY_NUMBER; n++)
            c->by_number[n] = -1;
        for (int i = c->nfields - 1; i >= 0; i--)
            if (c->fields[i].number > 0 && c->fields[i].number < BY_NUMBER)
                c->by_number[c->fields[i].number] = i;
    }
    if (kind == K_ENUM) {
        PyObject *names;
        int lo;
        if (!PyArg_ParseTuple(en, "iOiU", &lo, &names, &c->closed, &c->enum_name))
            goto fail;
        Py_INCREF(c->enum_name);
        c->enum_lo = lo;
        Py_ssize_t nn = PySequence_Size(names);
        if (nn < 0)
            goto fail;
        c->names = calloc((size_t)(nn ? nn : 1), sizeof(char *));
        if (!c->names) {
            PyErr_NoMemory();
            goto fail;
        }
        c->nnames = (int)nn;
        for (Py_ssize_t i = 0; i < nn; i++) {
            PyObject *x = PySequence_GetItem(names, i);
            if (!x)
                goto fail;
            if (x != Py_None) {
                const char *u = PyUnicode_AsUTF8(x);
                if (!u || !(c->names[i] = strdup(u))) {
                    Py_DECREF(x);
                    if (!PyErr_Occurred())
                        PyErr_NoMemory();
                    goto fail;
                }
            }
            Py_DECREF(x);
        }
    }
    return c;
fail:
    free_node(c);
    return NULL;
}

/* Room in g for what the last batch's builder held, scaled by `scale` (this
 * batch's rows over its), at most `bound` bytes: an estimate, so a refusal
 * (no memory for it) is no error, the builder grows as it would have. */
static void presize(lb_gbuf *g, size_t last, double scale, size_t bound) {
    double want = (double)last * scale;
    size_t w = want >= (double)bound ? bound : (size_t)want;
    if (w > g->cap)
        (void)lb_gb_room(g, w);
}

/* Builders emptied for a batch, presized from the last one (see presize). */
static void reset(node *c, double scale, size_t bound) {
    c->valid.len = c->values.len = c->offsets.len = c->data.len = 0;
    presize(&c->valid, c->last_valid, scale, bound);
    presize(&c->values, c->last_values, scale, bound);
    presize(&c->offsets, c->last_offsets, scale, bound);
    presize(&c->data, c->last_data, scale, bound);
    c->length = c->nulls = c->owed = 0;
    if (c->kind == K_STRING || c->kind == K_BYTES || c->kind == K_ENUM)
        put_offset(&c->offsets, 0);
    for (int i = 0; i < c->nfields; i++) {
        field *f = &c->fields[i];
        f->offsets.len = 0;
        presize(&f->offsets, f->last_offsets, scale, bound);
        if (f->rep != R_SINGLE)
            put_offset(&f->offsets, 0);
        reset(f->col, scale, bound);
    }
}

/* A column as an Arrow array (lb_arrow.h): its buffers handed over, not
 * copied (the builders start empty again), bools and validity packed into
 * bitmaps; lists and maps as their offsets over their elements' array.
 * 0, or -1 when memory ran out (a released with whatever it holds). */
static int export_node(node *c, struct ArrowArray *a) {
    if (c->owed && settle(c) < 0)
        return -1;
    c->last_valid = c->valid.len;
    c->last_values = c->values.len;
    c->last_offsets = c->offsets.len;
    c->last_data = c->data.len;
    int strings = c->kind == K_STRING || c->kind == K_BYTES || c->kind == K_ENUM;
    int n_buffers = c->kind == K_MESSAGE ? 1 : strings ? 3 : 2;
    if (lb_arrow_init(a, c->length, c->nulls, n_buffers, c->kind == K_MESSAGE ? c->nfields : 0) < 0)
        return -1;
    if (c->nulls) { /* put_valid wrote a byte a slot, the first null's ones included */
        uint8_t *bits = lb_arrow_bitmap(c->valid.p, c->valid.len);
        if (!bits)
            return -1;
        lb_arrow_own(a, 0, bits);
    }
    if (c->kind == K_MESSAGE) {
        for (int i = 0; i < c->nfields; i++) {
            field *f = &c->fields[i];
            struct ArrowArray *child = a->children[i];
            if (f->rep == R_SINGLE) {
                if (export_node(f->col, child) < 0)
                    return -1;
                continue;
            }
            int64_t n = (int64_t)(f->offsets.len / 4) - 1;
            f->last_offsets = f->offsets.len;
            if (lb_arrow_init(child, n, 0, 2, 1) < 0)
                return -1;
            lb_arrow_own(child, 1, lb_gb_detach(&f->offsets));
            if (export_node(f->col, child->children[0]) < 0)
                return -1;
        }
    } else if (c->kind == K_BOOL) {
        uint8_t *bits = lb_arrow_bitmap(c->values.p, c->values.len);
        if (!bits)
            return -1;
        lb_arrow_own(a, 1, bits);
    } else if (strings) {
        lb_arrow_own(a, 1, lb_gb_detach(&c->offsets));
        lb_arrow_own(a, 2, lb_gb_detach(&c->data));
    } else {
        lb_arrow_own(a, 1, lb_gb_detach(&c->values));
    }
    return 0;
}

static int contiguous(PyObject *obj, Py_buffer *view, const char *name) {
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Format(PyExc_TypeError, "%s: a contiguous buffer is needed", name);
        return -1;
    }
    return 0;
}

/* decode(data, starts, ends) -> (ok bytes, address): the column as an Arrow C
 * data interface array, a struct ArrowArray at `address` that the caller
 * imports (pa.Array._import_from_c(address, the column's type)) and then
 * gives back to drop(), which frees it (and what it holds, if not imported). */
static PyObject *Program_decode(Program *self, PyObject *args) {
    PyObject *a[3];
    if (!PyArg_ParseTuple(args, "OOO:decode", &a[0], &a[1], &a[2]))
        return NULL;
    Py_buffer data, starts, ends;
    if (contiguous(a[0], &data, "data") < 0)
        return NULL;
    if (contiguous(a[1], &starts, "starts") < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    if (contiguous(a[2], &ends, "ends") < 0) {
        PyBuffer_Release(&starts);
        PyBuffer_Release(&data);
        return NULL;
    }
    PyObject *result = NULL, *ok = NULL;
    Py_ssize_t k = starts.len / 8;
    const int64_t *s = starts.buf, *e = ends.buf;
    const uint8_t *d = data.buf;
    if (starts.len % 8 || ends.len != starts.len) {
        PyErr_SetString(PyExc_ValueError, "decode: starts and ends need k int64 each");
        goto done;
    }
    size_t bytes = 0; /* the messages' bytes, for presize's bound */
    for (Py_ssize_t i = 0; i < k; i++) {
        if (s[i] < 0 || e[i] < s[i] || e[i] > data.len) {
            PyErr_Format(PyExc_ValueError, "range %zd is [%lld, %lld), outside the %zd bytes "
                         "of data", i, (long long)s[i], (long long)e[i], data.len);
            goto done;
        }
        bytes += (size_t)(e[i] - s[i]);
    }
    ok = PyBytes_FromStringAndSize(NULL, k ? k : 1);
    if (!ok)
        goto done;
    uint8_t *okp = (uint8_t *)PyBytes_AS_STRING(ok);
    node *root = self->root;
    /* A builder seldom needs more than twice the messages' bytes and 16
     * bytes a row: the bound keeps a batch of huge messages from presizing
     * the next one of small ones to their size. Ranges may overlap (the
     * same bytes read twice): never more than the data itself counts, so
     * what is reserved follows the bytes given, whatever the ranges say. */
    size_t given = (size_t)data.len < bytes ? (size_t)data.len : bytes;
    size_t bound = given * 2 + (size_t)k * 16 + 64;
    reset(root, self->last_rows ? (double)k / (double)self->last_rows : 0.0, bound);
    occ o[MAX_STEPS];
    for (Py_ssize_t i = 0; i < k; i++) {
        /* scanned once: the checks and the writing read the same occurrences */
        int n = scan(root, d, s[i], e[i], o);
        okp[i] = (uint8_t)(n >= 0 && check_scanned(root, d, o, n));
        if ((okp[i] ? write_scanned(root, d, o, n) : write_null(root)) < 0)
            goto done;
    }
    struct ArrowArray *array = calloc(1, sizeof *array);
    self->last_rows = k;
    if (!array || export_node(root, array) < 0) {
        if (array && array->release)
            array->release(array);
        free(array);
        PyErr_NoMemory();
        goto done;
    }
    result = Py_BuildValue("(NK)", PyBytes_FromStringAndSize((const char *)okp, k),
                           (unsigned long long)(uintptr_t)array);
    if (!result)
        lb_arrow_drop(array);
done:
    Py_XDECREF(ok);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&data);
    return result;
}

static int Program_init(Program *self, PyObject *args, PyObject *kw) {
    PyObject *spec;
    if (!PyArg_ParseTuple(args, "O:Program", &spec))
        return -1;
    if (self->root) {
        PyErr_SetString(PyExc_RuntimeError, "Program is compiled once");
        return -1;
    }
    self->root = compile(spec, 0);
    if (!self->root)
        return -1;
    if (self->root->kind != K_MESSAGE) {
        PyErr_SetString(PyExc_ValueError, "Program: the root is a message");
        return -1;
    }
    return 0;
}

static void Program_dealloc(Program *self) {
    free_node(self->root);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Program_methods[] = {
    {"decode", (PyCFunction)Program_decode, METH_VARARGS,
     "decode(data, starts, ends) -> (ok: bytes, address of the column's ArrowArray)"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject ProgramType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "lbparse.columnar._structs.Program",
    .tp_basicsize = sizeof(Program),
    .tp_dealloc = (destructor)Program_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Program(spec): a message type compiled for decode() (see _structs.c).",
    .tp_methods = Program_methods,
    .tp_init = (initproc)Program_init,
    .tp_new = PyType_GenericNew,
};

static PyMethodDef module_methods[] = {
    {"drop", lb_arrow_drop_py, METH_O,
     "drop(address): free an array decode() made (released if not imported)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_structs",
                                    "Protobuf into Arrow struct columns in C (see _structs.c).",
                                    -1, module_methods};

PyMODINIT_FUNC PyInit__structs(void) {
    if (PyType_Ready(&ProgramType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&ProgramType);
    if (PyModule_AddObject(m, "Program", (PyObject *)&ProgramType) < 0) {
        Py_DECREF(&ProgramType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
