/*
 * hashicorp/raft's transport RPCs read in C: the native fast path of
 * lbparse.raft.transport's _read_request and _read_response (the Python reader
 * is the reference; tests/raft/test_transport_native.py holds the two equal,
 * RPC for RPC, on the real captures' streams, hypothesis-made and hostile
 * bytes).
 *
 * Reader(structs, requests, responses): the struct layouts of spec/raft.ksy,
 * handed over by transport.py from the generated tables (no key, type or RPC
 * number is written here): structs[i] is a tuple of fields (key, type code,
 * written by every version, sub-struct index); requests maps an RPC type byte
 * to its request struct; responses lists the response structs in the order
 * transport.py tries them.
 *
 * Reader.read_request(buf, pos, limit) and read_response(buf, pos, limit)
 * return None when the bytes end inside the RPC (the reference says the same:
 * wait for more), (type byte or response number, [error bytes,] fields, end)
 * for an RPC that is exactly what a hashicorp/raft version writes, or False
 * for anything else -- an unknown key or type, a missing key, a duplicate
 * key, a value of another type, an ext, a count past the limit, deep nesting,
 * bytes that are not msgpack -- which the reference then reads (and words
 * its error or warning). So this file holds no message of its own: every
 * answer it gives is one the reference gives too.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "lb_gbuf.h"
#include "lb_msgpack.h"
#include <stdint.h>
#include <string.h>

/* Field type codes, as transport.py's _NATIVE_TYPES numbers them. */
enum { T_UINT = 0, T_INT = 1, T_BOOL = 2, T_BYTES = 3, T_TIME = 4, T_LIST = 5, T_OTHER = 6 };
#define MAX_FIELDS 32
#define MAX_STRUCTS 64
/* msgpack_structs.MAX_PENDING_ITEMS: the reference's Unpacker bounds every
 * array and map count by min(limit, this). Passed in at init. */

typedef struct {
    PyObject *name;     /* the key as a str (the fields dict's key) */
    const char *key;    /* its UTF-8 bytes, as they are on the wire */
    Py_ssize_t keylen;
    int type;
    int base;           /* written by every version: a missing one is not plain */
    int sub;            /* T_LIST: the elements' struct */
} fspec;

typedef struct {
    int nfields;
    fspec fields[MAX_FIELDS];
} sspec;

typedef struct {
    PyObject_HEAD
    int nstructs;
    sspec structs[MAX_STRUCTS];
    int request[256];   /* struct index by RPC type byte, -1: none */
    int nresponses;
    int responses[MAX_STRUCTS];
    uint64_t max_pending;
    int ready;          /* initialised: a failed or missing __init__ leaves it 0 */
    PyObject *keep;     /* the init arguments: they own the key strings */
    /* Reader.rows (init's `rows`): the names a row holds, all borrowed from keep */
    int rows_ready;
    PyObject *role[2];            /* [0] a response's role, [1] a request's */
    PyObject *req_name[256];      /* the RPC's name by type byte (NULL: none) */
    int req_whole[256];           /* 1: a request rows leaves to Python (a trailer follows it) */
    PyObject *resp_name[MAX_STRUCTS];
    PyObject *row_key[6];         /* role, rpc, term, node, error, entries */
    int term_field[MAX_STRUCTS];  /* the Term field's index in each struct, -1: none */
    int node_field[MAX_STRUCTS][3]; /* the node's fields by precedence, -1: none */
    /* stream_rows' log entries: the entries field of each request struct (-1:
     * none), and the Index, Term, Type and Data fields of each struct (-1) */
    int entries_field[MAX_STRUCTS];
    int log_field[MAX_STRUCTS][4];
    uint64_t log_command;         /* the LogCommand type: its Data is a command */
} Reader;

enum { RD_OK = 0, RD_SHORT = 1, RD_OTHER = 2, RD_ERR = 3 /* a Python exception is set */ };

static int value_of(Reader *r, const fspec *f, const uint8_t *b, size_t n, size_t *pos,
                    PyObject **out);

/* The keys of the map at *pos: the field each is (-1: none) and where its
 * value starts. RD_OTHER for a key that is not a str or bin, or a map of more
 * entries than the struct has fields (an extra or duplicate key). */
static int map_keys(const sspec *s, const uint8_t *b, size_t n, size_t *pos, int *which,
                    size_t *vals, uint64_t *count) {
    lb_mp_head h = {0};
    if (lb_mp_head_at(b, n, *pos, &h) != LB_MP_OK || h.kind != LB_MP_MAP)
        return RD_OTHER;
    if (h.u > (uint64_t)s->nfields)
        return RD_OTHER;
    *count = h.u;
    size_t p = h.body;
    for (uint64_t k = 0; k < h.u; k++) {
        lb_mp_head kh = {0};
        if (lb_mp_head_at(b, n, p, &kh) != LB_MP_OK || (kh.kind != LB_MP_STR && kh.kind != LB_MP_BIN) ||
            lb_mp_body(n, &kh) != LB_MP_OK)
            return RD_OTHER;
        which[k] = -1;
        for (int i = 0; i < s->nfields; i++) {
            if ((uint64_t)s->fields[i].keylen == kh.u &&
                memcmp(s->fields[i].key, b + kh.body, (size_t)kh.u) == 0) {
                which[k] = i;
                break;
            }
        }
        p = kh.body + (size_t)kh.u;
        vals[k] = p;
        size_t end;
        /* the whole object was checked by lb_mp_skip: this only moves on */
        if (lb_mp_skip(b, n, p, UINT64_MAX, &end) != LB_MP_OK)
            return RD_OTHER;
        p = end;
    }
    *pos = p;
    return RD_OK;
}

/* Whether the keys are exactly a version of s: each a distinct field of it,
 * every field all versions write among them. */
static int keys_fit(const sspec *s, const int *which, uint64_t count, int *slot) {
    for (int i = 0; i < s->nfields; i++)
        slot[i] = -1;
    for (uint64_t k = 0; k < count; k++) {
        if (which[k] < 0 || slot[which[k]] >= 0)
            return 0;
        slot[which[k]] = (int)k;
    }
    for (int i = 0; i < s->nfields; i++)
        if (s->fields[i].base && slot[i] < 0)
            return 0;
    return 1;
}

/* The fields dict of the struct (keys already matched: slot[i] is field i's
 * entry, -1 when a later version's field is absent), in declaration order as
 * read_struct makes it. */
static int struct_fields(Reader *r, const sspec *s, const uint8_t *b, size_t n, const size_t *vals,
                         const int *slot, PyObject **out) {
    PyObject *d = PyDict_New();
    if (!d)
        return RD_ERR;
    for (int i = 0; i < s->nfields; i++) {
        if (slot[i] < 0)
            continue;
        size_t p = vals[slot[i]];
        PyObject *v = NULL;
        int rc = value_of(r, &s->fields[i], b, n, &p, &v);
        if (rc != RD_OK) {
            Py_DECREF(d);
            return rc;
        }
        int bad = PyDict_SetItem(d, s->fields[i].name, v);
        Py_DECREF(v);
        if (bad) {
            Py_DECREF(d);
            return RD_ERR;
        }
    }
    *out = d;
    return RD_OK;
}

/* The map at *pos as the struct s, when it is plainly one. */
static int read_map(Reader *r, int si, const uint8_t *b, size_t n, size_t *pos, PyObject **out) {
    const sspec *s = &r->structs[si];
    int which[MAX_FIELDS], slot[MAX_FIELDS];
    size_t vals[MAX_FIELDS];
    uint64_t count;
    int rc = map_keys(s, b, n, pos, which, vals, &count);
    if (rc != RD_OK)
        return rc;
    if (!keys_fit(s, which, count, slot))
        return RD_OTHER;
    return struct_fields(r, s, b, n, vals, slot, out);
}

/* One field's value, converted as msgpack_structs._CONVERT does for a value
 * of the declared type; RD_OTHER for any other (the reference words it). */
static int value_of(Reader *r, const fspec *f, const uint8_t *b, size_t n, size_t *pos,
                    PyObject **out) {
    lb_mp_head h = {0};
    if (lb_mp_head_at(b, n, *pos, &h) != LB_MP_OK)
        return RD_OTHER;
    switch (f->type) {
    case T_UINT:
    case T_INT:
        if (h.kind == LB_MP_UINT)
            *out = PyLong_FromUnsignedLongLong(h.u);
        else if (h.kind == LB_MP_NEG && (f->type == T_INT || h.i >= 0))
            *out = PyLong_FromLongLong(h.i);
        else
            return RD_OTHER;
        *pos = h.body;
        return *out ? RD_OK : RD_ERR;
    case T_BOOL:
        if (h.kind != LB_MP_BOOL)
            return RD_OTHER;
        *out = PyBool_FromLong((long)h.u);
        *pos = h.body;
        return RD_OK;
    case T_BYTES:
    case T_TIME: /* raw: transport.py converts it with go_time_ns */
        if (h.kind == LB_MP_NIL) {
            Py_INCREF(Py_None);
            *out = Py_None;
            *pos = h.body;
            return RD_OK;
        }
        if ((h.kind != LB_MP_STR && h.kind != LB_MP_BIN) || lb_mp_body(n, &h) != LB_MP_OK)
            return RD_OTHER;
        *out = PyBytes_FromStringAndSize((const char *)b + h.body, (Py_ssize_t)h.u);
        *pos = h.body + (size_t)h.u;
        return *out ? RD_OK : RD_ERR;
    case T_LIST: {
        if (h.kind == LB_MP_NIL) {
            *out = PyList_New(0);
            *pos = h.body;
            return *out ? RD_OK : RD_ERR;
        }
        if (h.kind != LB_MP_ARRAY)
            return RD_OTHER;
        PyObject *list = PyList_New((Py_ssize_t)h.u); /* h.u <= max_pending: lb_mp_skip */
        if (!list)
            return RD_ERR;
        size_t p = h.body;
        for (uint64_t k = 0; k < h.u; k++) {
            PyObject *item = NULL;
            int rc = read_map(r, f->sub, b, n, &p, &item);
            if (rc != RD_OK) {
                Py_DECREF(list);
                return rc;
            }
            PyList_SET_ITEM(list, (Py_ssize_t)k, item);
        }
        *out = list;
        *pos = p;
        return RD_OK;
    }
    default:
        return RD_OTHER;
    }
}

static PyObject *answer(int rc) {
    if (rc == RD_SHORT)
        Py_RETURN_NONE;
    if (rc == RD_OTHER)
        Py_RETURN_FALSE;
    return NULL;
}

/* The object at pos, whole: RD_OK with its end, RD_SHORT, or RD_OTHER. */
static int whole(Reader *r, const uint8_t *b, size_t n, size_t pos, uint64_t items, size_t *end) {
    int rc = lb_mp_skip(b, n, pos, items, end);
    return rc == LB_MP_OK ? RD_OK : rc == LB_MP_SHORT ? RD_SHORT : RD_OTHER;
}

static int parse_args(Reader *r, PyObject *args, Py_buffer *view, size_t *pos, uint64_t *items) {
    Py_ssize_t p, limit;
    if (!r->ready) {
        PyErr_SetString(PyExc_RuntimeError, "the Reader has no tables (its __init__ failed)");
        return 0;
    }
    if (!PyArg_ParseTuple(args, "y*nn", view, &p, &limit))
        return 0;
    if (p < 0 || p > view->len || limit < 0) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "pos out of the buffer, or a negative limit");
        return 0;
    }
    *pos = (size_t)p;
    *items = (uint64_t)limit < r->max_pending ? (uint64_t)limit : r->max_pending;
    return 1;
}

/* Where an RPC's struct lies, once its keys are matched to a struct version:
 * each field's entry (slot) and value (vals) for struct_fields or row_scalars. */
typedef struct {
    int si;                   /* the struct */
    int slot[MAX_FIELDS];
    size_t vals[MAX_FIELDS];
    size_t end;               /* where the RPC ends */
} matched;

/* The request at pos (type byte, map), whole and its keys a version of its
 * struct: RD_OK (*type, m), RD_SHORT or RD_OTHER. */
static int match_request(Reader *r, const uint8_t *b, size_t n, size_t pos, uint64_t items,
                         int *type, matched *m) {
    if (pos >= n)
        return RD_SHORT;
    *type = b[pos];
    if (r->request[*type] < 0)
        return RD_OTHER; /* unknown RPC type: the reference's error */
    int rc = whole(r, b, n, pos + 1, items, &m->end);
    if (rc != RD_OK)
        return rc;
    m->si = r->request[*type];
    int which[MAX_FIELDS];
    uint64_t count;
    size_t p = pos + 1;
    rc = map_keys(&r->structs[m->si], b, n, &p, which, m->vals, &count);
    if (rc != RD_OK)
        return rc;
    return keys_fit(&r->structs[m->si], which, count, m->slot) ? RD_OK : RD_OTHER;
}

/* The response at pos (error string, map), whole and its keys a version of
 * one of the response structs, the first in transport.py's order: RD_OK
 * (*number, *err its error string's head, m), RD_SHORT or RD_OTHER. */
static int match_response(Reader *r, const uint8_t *b, size_t n, size_t pos, uint64_t items,
                          int *number, lb_mp_head *err, matched *m) {
    size_t mid;
    int rc = whole(r, b, n, pos, items, &mid);
    if (rc != RD_OK)
        return rc;
    lb_mp_head_at(b, n, pos, err);
    if (err->kind != LB_MP_STR && err->kind != LB_MP_BIN)
        return RD_OTHER;
    rc = whole(r, b, n, mid, items, &m->end);
    if (rc != RD_OK)
        return rc;
    int which[MAX_FIELDS];
    uint64_t count;
    for (int k = 0; k < r->nresponses; k++) {
        const sspec *s = &r->structs[r->responses[k]];
        size_t p = mid;
        if (map_keys(s, b, n, &p, which, m->vals, &count) == RD_OK &&
            keys_fit(s, which, count, m->slot)) {
            *number = k;
            m->si = r->responses[k];
            return RD_OK;
        }
    }
    return RD_OTHER;
}

static PyObject *Reader_read_request(Reader *r, PyObject *args) {
    Py_buffer view;
    size_t pos;
    uint64_t items;
    if (!parse_args(r, args, &view, &pos, &items))
        return NULL;
    const uint8_t *b = view.buf;
    size_t n = (size_t)view.len;
    PyObject *result = NULL, *fields = NULL;
    int type;
    matched m;
    int rc = match_request(r, b, n, pos, items, &type, &m);
    if (rc == RD_OK)
        rc = struct_fields(r, &r->structs[m.si], b, n, m.vals, m.slot, &fields);
    if (rc == RD_OK) {
        result = Py_BuildValue("(iNn)", type, fields, (Py_ssize_t)m.end);
        if (!result)
            rc = RD_ERR;
    }
    PyBuffer_Release(&view);
    return rc == RD_OK ? result : answer(rc);
}

static PyObject *Reader_read_response(Reader *r, PyObject *args) {
    Py_buffer view;
    size_t pos;
    uint64_t items;
    if (!parse_args(r, args, &view, &pos, &items))
        return NULL;
    const uint8_t *b = view.buf;
    size_t n = (size_t)view.len;
    PyObject *result = NULL, *fields = NULL;
    int number;
    lb_mp_head h = {0};
    matched m;
    int rc = match_response(r, b, n, pos, items, &number, &h, &m);
    if (rc == RD_OK)
        rc = struct_fields(r, &r->structs[m.si], b, n, m.vals, m.slot, &fields);
    if (rc == RD_OK) {
        result = Py_BuildValue("(iy#Nn)", number, (const char *)b + h.body, (Py_ssize_t)h.u,
                               fields, (Py_ssize_t)m.end);
        if (!result)
            rc = RD_ERR;
    }
    PyBuffer_Release(&view);
    return rc == RD_OK ? result : answer(rc);
}

/* -- rows: feed_rows' raft_rpcs rows of one message, in C --------------------
 *
 * transport.StreamDecoder.feed_rows asks for the rows of a message that starts
 * an RPC of a stream whose role is known (its most common case). The rows are
 * those transport._row makes of the RPCs read_request and read_response give
 * here: role, rpc, term (a uint64 above 2**63 wrapped, as Spark's bigint holds
 * it), node (the first non-empty of the struct's node fields, as UTF-8 text,
 * errors replaced), error (a response's error string so read; None for a
 * request) and entries (always empty here). Any RPC these readers leave to
 * the reference (False), a request followed by snapshot bytes, a list field
 * that is not empty (log entries) or a time field make the whole message
 * False: transport.py then reads it the way it reads any other, so every
 * answer given here is one the reference gives too. */

/* An unsigned field's value as value_of reads it (a signed encoding of a
 * non-negative value too): RD_OK, else RD_OTHER. */
static int uint_of(const lb_mp_head *h, int type, int64_t *v) {
    if (h->kind == LB_MP_UINT)
        *v = (int64_t)h->u; /* above 2**63: less 2**64, as _bigint */
    else if (h->kind == LB_MP_NEG && (type == T_INT || h->i >= 0))
        *v = h->i;
    else
        return RD_OTHER;
    return RD_OK;
}

/* The scalars a row takes of a matched struct, its fields read as value_of
 * reads them, with no object made: RD_OTHER where value_of answers that, for
 * a list that is not empty (log entries: made into rows by transport.py), a
 * time (go_time_ns's) and a Term that is no integer (the reference's to
 * word); the Term as transport._bigint gives it (above 2**63, less 2**64);
 * the node, the first of its fields by precedence that is non-empty bytes. */
static int row_scalars(Reader *r, int si, const uint8_t *b, size_t n, const size_t *vals,
                       const int *slot, int64_t *term, int *has_term, const uint8_t **node,
                       size_t *node_len, size_t *entries_at) {
    const sspec *s = &r->structs[si];
    const uint8_t *nodes[3] = {NULL, NULL, NULL};
    size_t lens[3] = {0, 0, 0};
    *has_term = 0;
    *node = NULL;
    for (int i = 0; i < s->nfields; i++) {
        const fspec *f = &s->fields[i];
        if (f->type == T_TIME)
            return RD_OTHER;
        if (slot[i] < 0)
            continue;
        lb_mp_head h = {0};
        if (lb_mp_head_at(b, n, vals[slot[i]], &h) != LB_MP_OK)
            return RD_OTHER;
        int is_int = 0;
        int64_t v = 0;
        switch (f->type) {
        case T_UINT:
        case T_INT:
            if (uint_of(&h, f->type, &v) != RD_OK)
                return RD_OTHER;
            is_int = 1;
            break;
        case T_BOOL:
            if (h.kind != LB_MP_BOOL)
                return RD_OTHER;
            break;
        case T_BYTES:
            if (h.kind == LB_MP_NIL)
                break;
            if ((h.kind != LB_MP_STR && h.kind != LB_MP_BIN) || lb_mp_body(n, &h) != LB_MP_OK)
                return RD_OTHER;
            for (int k = 0; k < 3; k++)
                if (i == r->node_field[si][k]) {
                    nodes[k] = b + h.body;
                    lens[k] = (size_t)h.u;
                }
            break;
        case T_LIST:
            if (h.kind == LB_MP_NIL)
                break;
            if (h.kind != LB_MP_ARRAY)
                return RD_OTHER;
            if (h.u > 0) {
                /* log entries: stream_rows' (entries_at: where they start), else
                 * made into rows by transport.py */
                if (!entries_at || i != r->entries_field[si])
                    return RD_OTHER;
                *entries_at = vals[slot[i]];
            }
            break;
        default:
            return RD_OTHER;
        }
        if (i == r->term_field[si]) {
            if (!is_int)
                return RD_OTHER; /* a Term of another type: the reference's to word */
            *term = v;
            *has_term = 1;
        }
    }
    for (int k = 0; k < 3 && !*node; k++)
        if (nodes[k] && lens[k] > 0) {
            *node = nodes[k];
            *node_len = lens[k];
        }
    return RD_OK;
}

/* One RPC at pos, matched and its row's scalars read (row_scalars): RD_OK
 * (*which the type byte or the response's number, *err the response's error
 * string's head, *end), RD_SHORT, RD_OTHER (a request a snapshot's bytes
 * follow is left to transport.py too) or RD_ERR. */
static int row_read(Reader *r, int request, const uint8_t *b, size_t n, size_t pos,
                    uint64_t items, int *which, lb_mp_head *err, int64_t *term, int *has_term,
                    const uint8_t **node, size_t *node_len, size_t *entries_at, size_t *end) {
    matched m;
    int rc;
    *node_len = 0;
    if (request) {
        if (pos < n && r->req_whole[b[pos]])
            return RD_OTHER;
        rc = match_request(r, b, n, pos, items, which, &m);
    } else {
        rc = match_response(r, b, n, pos, items, which, err, &m);
    }
    if (rc == RD_OK)
        rc = row_scalars(r, m.si, b, n, m.vals, m.slot, term, has_term, node, node_len,
                         request ? entries_at : NULL);
    if (rc == RD_OK)
        *end = m.end;
    return rc;
}

/* The row {role, rpc, term, node, error, entries: []}; steals term and node
 * (NULL: None). */
static PyObject *make_row(Reader *r, int request, PyObject *rpc, PyObject *term, PyObject *node,
                          PyObject *error) {
    PyObject *row = PyDict_New(), *entries = PyList_New(0);
    PyObject *vals[6] = {r->role[request],   rpc, term ? term : Py_None, node ? node : Py_None,
                         error ? error : Py_None, entries};
    int bad = !row || !entries;
    for (int k = 0; k < 6 && !bad; k++)
        bad = PyDict_SetItem(row, r->row_key[k], vals[k]) < 0;
    Py_XDECREF(term);
    Py_XDECREF(node);
    Py_XDECREF(entries);
    if (bad) {
        Py_XDECREF(row);
        return NULL;
    }
    return row;
}

/* One RPC at pos as a row: RD_OK (*row, *end), RD_SHORT, RD_OTHER or RD_ERR. */
static int row_at(Reader *r, int request, const uint8_t *b, size_t n, size_t pos, uint64_t items,
                  PyObject **row, size_t *end) {
    PyObject *term = NULL, *node = NULL, *error = NULL;
    lb_mp_head h = {0};
    int which, has_term;
    int64_t t;
    const uint8_t *name;
    size_t name_len, stop;
    int rc = row_read(r, request, b, n, pos, items, &which, &h, &t, &has_term, &name, &name_len,
                      NULL, &stop);
    if (rc != RD_OK)
        return rc;
    term = has_term ? PyLong_FromLongLong(t) : NULL;
    node = name ? PyUnicode_DecodeUTF8((const char *)name, (Py_ssize_t)name_len, "replace") : NULL;
    if (!request)
        error = PyUnicode_DecodeUTF8((const char *)b + h.body, (Py_ssize_t)h.u, "replace");
    if ((has_term && !term) || (name && !node) || (!request && !error)) {
        Py_XDECREF(term);
        Py_XDECREF(node);
        Py_XDECREF(error);
        return RD_ERR;
    }
    *row = make_row(r, request, request ? r->req_name[which] : r->resp_name[which], term, node,
                    error);
    Py_XDECREF(error);
    *end = stop;
    return *row ? RD_OK : RD_ERR;
}

static PyObject *Reader_rows(Reader *r, PyObject *args) {
    Py_buffer view;
    int request;
    Py_ssize_t limit;
    if (!r->ready || !r->rows_ready) {
        PyErr_SetString(PyExc_RuntimeError, "the Reader has no row tables (init's rows)");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "y*pn", &view, &request, &limit))
        return NULL;
    if (limit < 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "a negative limit");
        return NULL;
    }
    uint64_t items = (uint64_t)limit < r->max_pending ? (uint64_t)limit : r->max_pending;
    const uint8_t *b = view.buf;
    size_t n = (size_t)view.len, pos = 0, first = 0;
    PyObject *rows = PyList_New(0), *result = NULL;
    int rc = rows ? RD_OK : RD_ERR;
    while (rc == RD_OK && pos < n) {
        PyObject *row = NULL;
        size_t end;
        rc = row_at(r, request, b, n, pos, items, &row, &end);
        if (rc == RD_SHORT)
            break; /* the rest is an RPC the next messages finish */
        if (rc != RD_OK)
            break;
        int bad = PyList_Append(rows, row);
        Py_DECREF(row);
        if (bad)
            rc = RD_ERR;
        pos = end;
        if (!first)
            first = end;
    }
    if (rc == RD_OK || rc == RD_SHORT) {
        if (first)
            result = Py_BuildValue("(Onn)", rows, (Py_ssize_t)first, (Py_ssize_t)pos);
        else
            result = Py_BuildValue("(OOn)", rows, Py_None, (Py_ssize_t)pos);
    }
    else if (rc == RD_OTHER) {
        Py_INCREF(Py_False);
        result = Py_False;
    }
    Py_XDECREF(rows);
    PyBuffer_Release(&view);
    return result;
}

/* -- Reader.stream_rows: a batch of stream messages, their rows as columns --------
 *
 * The columns' short way (lbparse.capture.traffic.TrafficReader.stream_batch
 * calls it): each message in order, on the stream its (src, dst, subject)
 * names in `streams`, read here when the decoder is in step, its role known
 * and nothing pending (no RPC unfinished, no snapshot bytes owed), every
 * RPC of the message whole and plain (Reader.rows' kind, no snapshot bytes
 * after it, but log entries are read too: entries_cols) and its node and
 * error strings ASCII; its rows go into columns with no Python object made
 * (but for a LogCommand's name: its Data is handed over), and the decoder's `rpcs` is
 * moved on as feed_rows moves it, the rest of its state being as feed_rows
 * leaves it. Any other message is handed to `fallback(j)`, in
 * its turn, which reads it as TrafficReader.read does. So the answer is
 * feed_rows' (tests/columnar/test_raft_rows.py holds the tables equal, and
 * tests/support/hostile.check_raft_native the streams, message by message).
 */

typedef struct {
    lb_gbuf offsets;              /* int32 per message and one: its rows' range */
    lb_gbuf which;                /* uint16 per row: type byte, or 256 + response number */
    lb_gbuf term, term_valid;     /* int64, uint8 */
    lb_gbuf node_offsets, node, node_valid; /* int32, bytes, uint8 */
    lb_gbuf err_offsets, err, err_valid;
    /* the rows' log entries: int32 per row and one (its entries' range);
     * per entry index and term (int64, wrapped as _bigint), type (uint64),
     * and the command's data (LogCommand with Data: offsets, bytes, valid) */
    lb_gbuf ent_offsets, ent_index, ent_term, ent_type, cmd_offsets, cmd, cmd_valid;
    int32_t rows, entries;
} cols;

/* Every buffer but `offsets` (a message's, written after it) in one list:
 * marks and rollbacks go over them all, so a new column cannot be missed. */
#define COLS_MARKED 16
static lb_gbuf *cols_marked(cols *c, int k) {
    lb_gbuf *all[COLS_MARKED] = {&c->which,       &c->term,      &c->term_valid, &c->node_offsets,
                                 &c->node,        &c->node_valid, &c->err_offsets, &c->err,
                                 &c->err_valid,   &c->ent_offsets, &c->ent_index, &c->ent_term,
                                 &c->ent_type,    &c->cmd_offsets, &c->cmd,       &c->cmd_valid};
    return all[k];
}

typedef struct {
    size_t len[COLS_MARKED];
    int32_t rows, entries;
} cols_mark;

static void cols_free(cols *c) {
    lb_gb_free(&c->offsets);
    for (int k = 0; k < COLS_MARKED; k++)
        lb_gb_free(cols_marked(c, k));
}

static cols_mark cols_at(cols *c) {
    cols_mark m;
    for (int k = 0; k < COLS_MARKED; k++)
        m.len[k] = cols_marked(c, k)->len;
    m.rows = c->rows;
    m.entries = c->entries;
    return m;
}

static void cols_back(cols *c, cols_mark m) {
    for (int k = 0; k < COLS_MARKED; k++)
        cols_marked(c, k)->len = m.len[k];
    c->rows = m.rows;
    c->entries = m.entries;
}

static int ascii(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] & 0x80)
            return 0;
    return 1;
}

/* A string column's next value (NULL: null). Offsets are int32: a batch's
 * strings past 2 GiB are not plain (the caller's fallback takes the message). */
static int put_text(lb_gbuf *offsets, lb_gbuf *data, lb_gbuf *valid, const uint8_t *s, size_t n) {
    if (data->len + n > (size_t)INT32_MAX)
        return RD_OTHER;
    uint8_t v = s != NULL;
    int32_t end = (int32_t)(data->len + (s ? n : 0));
    if (lb_gb_put_py(valid, &v, 1) < 0 || (s && lb_gb_put_py(data, s, n) < 0) ||
        lb_gb_put_py(offsets, &end, sizeof end) < 0)
        return RD_ERR;
    return RD_OK;
}

/* The log entries of the array at pos (not empty) into the columns, each
 * read as read_map and value_of read the Log struct and _native_struct then
 * converts it: RD_OTHER for any entry they would not read plainly -- its keys
 * not a version of the struct, a value of another type, a list in it, a time
 * go_time_ns refuses or a msgpack timestamp -- so transport.py reads the
 * message. Each entry's row is _log_row's but the command's name: its Data
 * (a LogCommand's, when not nil), which rpc_lists labels. */
static int entries_cols(Reader *r, int si, int field, const uint8_t *b, size_t n, size_t pos,
                        cols *c) {
    const sspec *s = &r->structs[r->structs[si].fields[field].sub];
    const int *lf = r->log_field[r->structs[si].fields[field].sub];
    if (lf[0] < 0 || lf[1] < 0 || lf[2] < 0 || lf[3] < 0)
        return RD_OTHER;
    lb_mp_head h = {0};
    if (lb_mp_head_at(b, n, pos, &h) != LB_MP_OK || h.kind != LB_MP_ARRAY)
        return RD_OTHER;
    size_t p = h.body;
    for (uint64_t k = 0; k < h.u; k++) {
        int which[MAX_FIELDS], slot[MAX_FIELDS];
        size_t vals[MAX_FIELDS];
        uint64_t count;
        if (map_keys(s, b, n, &p, which, vals, &count) != RD_OK || !keys_fit(s, which, count, slot))
            return RD_OTHER;
        int64_t num[3] = {0, 0, 0}; /* Index, Term, Type */
        const uint8_t *data = NULL;
        size_t data_len = 0;
        for (int i = 0; i < s->nfields; i++) {
            if (slot[i] < 0)
                continue;
            lb_mp_head v = {0};
            if (lb_mp_head_at(b, n, vals[slot[i]], &v) != LB_MP_OK)
                return RD_OTHER;
            int64_t x = 0;
            switch (s->fields[i].type) {
            case T_UINT:
            case T_INT:
                if (uint_of(&v, s->fields[i].type, &x) != RD_OK)
                    return RD_OTHER;
                for (int q = 0; q < 3; q++)
                    if (i == lf[q])
                        num[q] = x;
                break;
            case T_BOOL:
                if (v.kind != LB_MP_BOOL)
                    return RD_OTHER;
                break;
            case T_BYTES:
            case T_TIME:
                if (v.kind == LB_MP_NIL)
                    break;
                if ((v.kind != LB_MP_STR && v.kind != LB_MP_BIN) || lb_mp_body(n, &v) != LB_MP_OK)
                    return RD_OTHER;
                if (s->fields[i].type == T_TIME) {
                    /* go_time_ns: MarshalBinary's bytes, version 1 (15) or 2 (16) */
                    uint8_t version = v.u ? b[v.body] : 0;
                    if (!((v.u == 15 && version == 1) || (v.u == 16 && version == 2)))
                        return RD_OTHER;
                } else if (i == lf[3]) {
                    data = b + v.body;
                    data_len = (size_t)v.u;
                }
                break;
            default:
                return RD_OTHER;
            }
        }
        if (c->entries == INT32_MAX)
            return RD_OTHER;
        uint64_t type = (uint64_t)num[2];
        int command = data && type == r->log_command;
        if (lb_gb_put_py(&c->ent_index, &num[0], sizeof num[0]) < 0 ||
            lb_gb_put_py(&c->ent_term, &num[1], sizeof num[1]) < 0 ||
            lb_gb_put_py(&c->ent_type, &type, sizeof type) < 0)
            return RD_ERR;
        int rc = put_text(&c->cmd_offsets, &c->cmd, &c->cmd_valid, command ? data : NULL,
                          data_len);
        if (rc != RD_OK)
            return rc;
        c->entries++;
    }
    return RD_OK;
}

/* One RPC at pos into the columns: as row_at reads it. */
static int row_cols_at(Reader *r, int request, const uint8_t *b, size_t n, size_t pos,
                       uint64_t items, cols *c, size_t *end) {
    lb_mp_head h = {0};
    int which, has_term;
    int64_t term;
    const uint8_t *node;
    size_t node_len, stop, entries_at = SIZE_MAX;
    int rc = row_read(r, request, b, n, pos, items, &which, &h, &term, &has_term, &node, &node_len,
                      &entries_at, &stop);
    if (rc != RD_OK)
        return rc;
    if ((node && !ascii(node, node_len)) || (!request && !ascii(b + h.body, (size_t)h.u)))
        return RD_OTHER; /* decoded with "replace" by the reference */
    if (c->rows == INT32_MAX)
        return RD_OTHER;
    uint16_t code = (uint16_t)(request ? which : 256 + which);
    uint8_t valid = (uint8_t)has_term;
    if (lb_gb_put_py(&c->which, &code, sizeof code) < 0 ||
        lb_gb_put_py(&c->term, &term, sizeof term) < 0 ||
        lb_gb_put_py(&c->term_valid, &valid, 1) < 0)
        return RD_ERR;
    rc = put_text(&c->node_offsets, &c->node, &c->node_valid, node, node_len);
    if (rc == RD_OK)
        rc = put_text(&c->err_offsets, &c->err, &c->err_valid, request ? NULL : b + h.body,
                      request ? 0 : (size_t)h.u);
    if (rc == RD_OK && entries_at != SIZE_MAX) {
        int si = r->request[which];
        rc = entries_cols(r, si, r->entries_field[si], b, n, entries_at, c);
    }
    if (rc != RD_OK)
        return rc;
    if (lb_gb_put_py(&c->ent_offsets, &c->entries, sizeof c->entries) < 0)
        return RD_ERR;
    c->rows++;
    *end = stop;
    return RD_OK;
}

/* The decoder's attribute names, interned once (PyInit__transport): a str
 * made from C text per message and attribute was most of a message's cost. */
enum { A_ROWS, A_ROLE, A_IN_STEP, A_BUF, A_TRAILER, A_MAX_RPC, A_RPCS, A_COUNT };
static PyObject *attr_name[A_COUNT];

/* Whether StreamDecoder `dec` reads its next message where it starts, with
 * nothing before it (the C reader in use, in step, its role known, nothing
 * pending or owed): 1 (*request, *limit its max_rpc), 0, or -1 (an exception). */

static int whole_ready(Reader *r, PyObject *dec, int *request, Py_ssize_t *limit) {
    PyObject *v[6] = {NULL};
    int ready = -1;
    for (int k = 0; k < 6; k++)
        if (!(v[k] = PyObject_GetAttr(dec, attr_name[k])))
            goto done;
    ready = 0;
    if (v[0] == Py_None)
        goto done;
    int req = PyObject_RichCompareBool(v[1], r->role[1], Py_EQ);
    int resp = req == 0 ? PyObject_RichCompareBool(v[1], r->role[0], Py_EQ) : 0;
    if (req < 0 || resp < 0) {
        ready = -1;
        goto done;
    }
    if (!req && !resp)
        goto done; /* the role not known yet: the reference learns it */
    *request = req;
    int step = PyObject_IsTrue(v[2]);
    Py_ssize_t pending = PyObject_Length(v[3]);
    int owed = PyObject_IsTrue(v[4]);
    *limit = PyLong_AsSsize_t(v[5]);
    if (step < 0 || pending < 0 || owed < 0 || PyErr_Occurred()) {
        ready = -1;
        goto done;
    }
    ready = step && pending == 0 && !owed && *limit >= 0;
done:
    for (int k = 0; k < 6; k++)
        Py_XDECREF(v[k]);
    return ready;
}

static PyObject *bytes_of(lb_gbuf *g) {
    return PyBytes_FromStringAndSize((const char *)g->p, (Py_ssize_t)g->len);
}

/* n RPCs added to the decoder's `rpcs` (feed_rows' count): 0, or -1 (an
 * exception). */
static int add_rpcs(PyObject *dec, long n) {
    PyObject *before = PyObject_GetAttr(dec, attr_name[A_RPCS]);
    PyObject *more = before ? PyLong_FromLong(n) : NULL;
    PyObject *after = more ? PyNumber_Add(before, more) : NULL;
    int bad = !after || PyObject_SetAttr(dec, attr_name[A_RPCS], after) < 0;
    Py_XDECREF(before);
    Py_XDECREF(more);
    Py_XDECREF(after);
    return bad ? -1 : 0;
}

/* The decoders stream_rows found ready (whole_ready) since the fallback last
 * ran, and the RPCs each has read since (its `rpcs` owed): a decoder's state
 * changes only in the fallback (the C reading of a message leaves it in step
 * with nothing pending), so whole_ready's answer holds until then. Owed
 * counts are added to `rpcs` before the fallback runs and at the end. */
#define READY_KEPT 64
typedef struct {
    int n;
    struct {
        PyObject *dec; /* a reference */
        int request;
        Py_ssize_t limit;
        long owed;
    } at[READY_KEPT];
} ready_cache;

/* Each decoder's owed RPCs added to its `rpcs`, and the cache emptied: 0, or
 * -1 (an exception; the cache emptied all the same). */
static int ready_settle(ready_cache *k) {
    int bad = 0;
    for (int i = 0; i < k->n; i++) {
        if (!bad && k->at[i].owed)
            bad = add_rpcs(k->at[i].dec, k->at[i].owed) < 0;
        Py_DECREF(k->at[i].dec);
    }
    k->n = 0;
    return bad ? -1 : 0;
}

/* One message of stream_rows, on the decoder `key` names: read into the
 * columns (1: requests, 2: responses; the decoder's rpcs owed in the cache),
 * left to the fallback (3: the columns as they were), or -1 (an exception). */
static int stream_one(Reader *r, PyObject *streams, PyObject *key, PyObject *data, cols *c,
                      ready_cache *k) {
    int request = 0, ready = 0, got = 3, slot = -1;
    Py_ssize_t limit = 0;
    PyObject *dec = PyDict_GetItemWithError(streams, key); /* borrowed */
    if (!dec)
        return PyErr_Occurred() ? -1 : 3;
    Py_INCREF(dec);
    for (int i = 0; i < k->n && slot < 0; i++)
        if (k->at[i].dec == dec)
            slot = i;
    if (slot >= 0) {
        ready = 1;
        request = k->at[slot].request;
        limit = k->at[slot].limit;
    } else {
        ready = whole_ready(r, dec, &request, &limit);
        if (ready > 0 && k->n < READY_KEPT) {
            slot = k->n++;
            Py_INCREF(dec);
            k->at[slot].dec = dec;
            k->at[slot].request = request;
            k->at[slot].limit = limit;
            k->at[slot].owed = 0;
        }
    }
    if (ready < 0)
        got = -1;
    else if (ready && PyBytes_Check(data) && PyBytes_GET_SIZE(data) > 0) {
        const uint8_t *b = (const uint8_t *)PyBytes_AS_STRING(data);
        size_t n = (size_t)PyBytes_GET_SIZE(data), pos = 0;
        uint64_t items = (uint64_t)limit < r->max_pending ? (uint64_t)limit : r->max_pending;
        cols_mark mark = cols_at(c);
        int rc = RD_OK;
        while (rc == RD_OK && pos < n) {
            size_t end;
            rc = row_cols_at(r, request, b, n, pos, items, c, &end);
            if (rc == RD_OK)
                pos = end;
        }
        if (rc == RD_ERR)
            got = -1;
        else if (rc == RD_OK && pos == n) {
            got = request ? 1 : 2;
            if (slot >= 0)
                k->at[slot].owed += c->rows - mark.rows;
            else if (add_rpcs(dec, c->rows - mark.rows) < 0) /* the cache is full: at once */
                got = -1;
        } else
            cols_back(c, mark);
    }
    Py_DECREF(dec);
    return got;
}

static PyObject *Reader_stream_rows(Reader *r, PyObject *args) {
    PyObject *streams, *src, *dst, *subject, *payload, *fallback, *result = NULL;
    if (!r->ready || !r->rows_ready) {
        PyErr_SetString(PyExc_RuntimeError, "the Reader has no row tables (init's rows)");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O:stream_rows", &PyDict_Type, &streams, &PyList_Type,
                          &src, &PyList_Type, &dst, &PyList_Type, &subject, &PyList_Type,
                          &payload, &fallback))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(payload);
    if (PyList_GET_SIZE(src) != count || PyList_GET_SIZE(dst) != count ||
        PyList_GET_SIZE(subject) != count) {
        PyErr_SetString(PyExc_ValueError, "stream_rows: the four lists differ in length");
        return NULL;
    }
    cols c = {0};
    ready_cache cache; /* 2 KiB, on the stack */
    ready_cache *k = &cache;
    k->n = 0;
    PyObject *codes = PyBytes_FromStringAndSize(NULL, count);
    int32_t zero = 0;
    if (!codes || lb_gb_put_py(&c.offsets, &zero, sizeof zero) < 0 ||
        lb_gb_put_py(&c.node_offsets, &zero, sizeof zero) < 0 ||
        lb_gb_put_py(&c.err_offsets, &zero, sizeof zero) < 0 ||
        lb_gb_put_py(&c.ent_offsets, &zero, sizeof zero) < 0 ||
        lb_gb_put_py(&c.cmd_offsets, &zero, sizeof zero) < 0)
        goto fail;
    uint8_t *code = (uint8_t *)PyBytes_AS_STRING(codes);
    for (Py_ssize_t j = 0; j < count; j++) {
        /* the lists may change under a fallback: each item is read in its turn */
        if (j >= PyList_GET_SIZE(payload) || j >= PyList_GET_SIZE(src) ||
            j >= PyList_GET_SIZE(dst) || j >= PyList_GET_SIZE(subject)) {
            PyErr_SetString(PyExc_RuntimeError, "stream_rows: a list shrank during the batch");
            goto fail;
        }
        PyObject *data = PyList_GET_ITEM(payload, j);
        int got = 0;
        if (data != Py_None) {
            PyObject *key = PyTuple_Pack(3, PyList_GET_ITEM(src, j), PyList_GET_ITEM(dst, j),
                                         PyList_GET_ITEM(subject, j));
            Py_INCREF(data); /* held while the message is read: a fallback may change the list */
            got = key ? stream_one(r, streams, key, data, &c, k) : -1;
            Py_XDECREF(key);
            Py_DECREF(data);
            if (got == 3 && ready_settle(k) < 0) /* the fallback sees every rpcs moved on */
                got = -1;
            if (got == 3) {
                PyObject *done = PyObject_CallFunction(fallback, "n", j);
                Py_XDECREF(done);
                if (!done)
                    got = -1;
            }
        }
        if (got < 0 || lb_gb_put_py(&c.offsets, &c.rows, sizeof c.rows) < 0)
            goto fail;
        code[j] = (uint8_t)got;
    }
    if (ready_settle(k) < 0)
        goto fail;
    result = Py_BuildValue(
        "(NNNNNNNNNNNNNNNNNN)", codes, bytes_of(&c.offsets), bytes_of(&c.which), bytes_of(&c.term),
        bytes_of(&c.term_valid), bytes_of(&c.node_offsets), bytes_of(&c.node),
        bytes_of(&c.node_valid), bytes_of(&c.err_offsets), bytes_of(&c.err),
        bytes_of(&c.err_valid), bytes_of(&c.ent_offsets), bytes_of(&c.ent_index),
        bytes_of(&c.ent_term), bytes_of(&c.ent_type), bytes_of(&c.cmd_offsets), bytes_of(&c.cmd),
        bytes_of(&c.cmd_valid));
    cols_free(&c);
    return result;
fail:
    /* the RPCs read so far moved on, as when each message moved its own */
    if (PyErr_Occurred()) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        if (ready_settle(k) < 0)
            PyErr_Clear();
        PyErr_Restore(type, value, tb);
    } else {
        ready_settle(k);
    }
    Py_XDECREF(codes);
    cols_free(&c);
    return NULL;
}

/* The index of the field named `key` in s, -1: none (or -2: an exception). */
static int field_named(const sspec *s, PyObject *key) {
    for (int i = 0; i < s->nfields; i++) {
        int eq = PyUnicode_Compare(s->fields[i].name, key);
        if (eq == -1 && PyErr_Occurred())
            return -2;
        if (eq == 0)
            return i;
    }
    return -1;
}

/* init's `rows`: (request role, response role, {type byte: RPC name}, (type
 * bytes of requests a trailer follows), (RPC name of each response, in
 * responses' order), (the six row keys), the Term key, (node keys by
 * precedence), a request's log entries' key, (a log entry's Index, Term, Type
 * and Data keys), the LogCommand type). */
static int rows_init(Reader *r, PyObject *spec) {
    PyObject *names, *whole_types, *resp_names, *keys, *term_key, *node_keys, *entries_key,
        *log_keys;
    unsigned long long log_command;
    if (!PyArg_ParseTuple(spec, "UUO!O!O!O!UO!UO!K:rows", &r->role[1], &r->role[0], &PyDict_Type,
                          &names, &PyTuple_Type, &whole_types, &PyTuple_Type, &resp_names,
                          &PyTuple_Type, &keys, &term_key, &PyTuple_Type, &node_keys,
                          &entries_key, &PyTuple_Type, &log_keys, &log_command))
        return -1;
    if (PyTuple_GET_SIZE(keys) != 6 || PyTuple_GET_SIZE(resp_names) != r->nresponses ||
        PyTuple_GET_SIZE(node_keys) > 3 || PyTuple_GET_SIZE(log_keys) != 4) {
        PyErr_SetString(PyExc_ValueError,
                        "rows: six keys, a name per response, <= 3 node keys, 4 log keys");
        return -1;
    }
    r->log_command = log_command;
    for (int si = 0; si < r->nstructs; si++) {
        const sspec *s = &r->structs[si];
        r->entries_field[si] = -1;
        if ((r->term_field[si] = field_named(s, term_key)) == -2)
            return -1;
        for (Py_ssize_t k = 0; k < 3; k++) {
            int i = k < PyTuple_GET_SIZE(node_keys) ? field_named(s, PyTuple_GET_ITEM(node_keys, k))
                                                    : -1;
            if (i == -2)
                return -1;
            r->node_field[si][k] = i;
        }
        for (int q = 0; q < 4; q++) {
            int i = field_named(s, PyTuple_GET_ITEM(log_keys, q));
            if (i == -2)
                return -1;
            /* Index, Term and Type are integers, Data bytes: a struct whose
             * fields are not has no entries read here */
            int type = i >= 0 ? s->fields[i].type : -1;
            int fits = q < 3 ? type == T_UINT || type == T_INT : type == T_BYTES;
            r->log_field[si][q] = fits ? i : -1;
        }
    }
    for (int t = 0; t < 256; t++) {
        int si = r->request[t];
        if (si < 0)
            continue;
        int i = field_named(&r->structs[si], entries_key);
        if (i == -2)
            return -1;
        r->entries_field[si] = i >= 0 && r->structs[si].fields[i].type == T_LIST ? i : -1;
    }
    for (int k = 0; k < 6; k++)
        r->row_key[k] = PyTuple_GET_ITEM(keys, k);
    for (int k = 0; k < r->nresponses; k++)
        r->resp_name[k] = PyTuple_GET_ITEM(resp_names, k);
    for (int t = 0; t < 256; t++) {
        r->req_name[t] = NULL;
        r->req_whole[t] = 0;
    }
    PyObject *key, *value;
    Py_ssize_t at = 0;
    while (PyDict_Next(names, &at, &key, &value)) {
        long t = PyLong_AsLong(key);
        if (PyErr_Occurred())
            return -1;
        if (t < 0 || t > 255 || r->request[t] < 0 || !PyUnicode_Check(value)) {
            PyErr_SetString(PyExc_ValueError, "rows: a name for an RPC type with no request");
            return -1;
        }
        r->req_name[t] = value;
    }
    for (int t = 0; t < 256; t++)
        if (r->request[t] >= 0 && !r->req_name[t]) {
            PyErr_SetString(PyExc_ValueError, "rows: an RPC type without a name");
            return -1;
        }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(whole_types); k++) {
        long t = PyLong_AsLong(PyTuple_GET_ITEM(whole_types, k));
        if (PyErr_Occurred())
            return -1;
        if (t < 0 || t > 255) {
            PyErr_SetString(PyExc_ValueError, "rows: a type byte out of range");
            return -1;
        }
        r->req_whole[t] = 1;
    }
    r->rows_ready = 1;
    return 0;
}

static int Reader_init(Reader *r, PyObject *args, PyObject *kw) {
    PyObject *structs, *requests, *responses, *rows = NULL;
    unsigned long long max_pending;
    if (!PyArg_ParseTuple(args, "O!O!O!K|O!", &PyTuple_Type, &structs, &PyDict_Type, &requests,
                          &PyTuple_Type, &responses, &max_pending, &PyTuple_Type, &rows))
        return -1;
    r->ready = 0;
    r->rows_ready = 0;
    if (PyTuple_GET_SIZE(structs) > MAX_STRUCTS || PyTuple_GET_SIZE(responses) > MAX_STRUCTS) {
        PyErr_SetString(PyExc_ValueError, "too many structs");
        return -1;
    }
    Py_CLEAR(r->keep);
    r->keep = Py_BuildValue("(OOOO)", structs, requests, responses, rows ? rows : Py_None);
    if (!r->keep)
        return -1;
    r->max_pending = max_pending;
    r->nstructs = (int)PyTuple_GET_SIZE(structs);
    for (int i = 0; i < r->nstructs; i++) {
        PyObject *fs = PyTuple_GET_ITEM(structs, i);
        if (!PyTuple_Check(fs) || PyTuple_GET_SIZE(fs) > MAX_FIELDS) {
            PyErr_SetString(PyExc_ValueError, "a struct is a tuple of at most 32 fields");
            return -1;
        }
        sspec *s = &r->structs[i];
        s->nfields = (int)PyTuple_GET_SIZE(fs);
        for (int j = 0; j < s->nfields; j++) {
            fspec *f = &s->fields[j];
            PyObject *fd = PyTuple_GET_ITEM(fs, j);
            if (!PyTuple_Check(fd)) {
                PyErr_SetString(PyExc_TypeError, "a field is (key, type, base, sub)");
                return -1;
            }
            if (!PyArg_ParseTuple(fd, "Uiii", &f->name, &f->type, &f->base, &f->sub))
                return -1;
            f->key = PyUnicode_AsUTF8AndSize(f->name, &f->keylen);
            if (!f->key)
                return -1;
            if (f->type == T_LIST && (f->sub < 0 || f->sub >= r->nstructs)) {
                PyErr_SetString(PyExc_ValueError, "a list's struct index is out of range");
                return -1;
            }
        }
    }
    for (int t = 0; t < 256; t++)
        r->request[t] = -1;
    PyObject *key, *value;
    Py_ssize_t at = 0;
    while (PyDict_Next(requests, &at, &key, &value)) {
        long t = PyLong_AsLong(key), si = PyLong_AsLong(value);
        if (PyErr_Occurred())
            return -1;
        if (t < 0 || t > 255 || si < 0 || si >= r->nstructs) {
            PyErr_SetString(PyExc_ValueError, "an RPC type byte or struct index is out of range");
            return -1;
        }
        r->request[t] = (int)si;
    }
    r->nresponses = (int)PyTuple_GET_SIZE(responses);
    for (int k = 0; k < r->nresponses; k++) {
        long si = PyLong_AsLong(PyTuple_GET_ITEM(responses, k));
        if (PyErr_Occurred())
            return -1;
        if (si < 0 || si >= r->nstructs) {
            PyErr_SetString(PyExc_ValueError, "a response struct index is out of range");
            return -1;
        }
        r->responses[k] = (int)si;
    }
    if (rows && rows_init(r, rows) < 0)
        return -1;
    r->ready = 1;
    return 0;
}

static void Reader_dealloc(Reader *r) {
    Py_CLEAR(r->keep);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyMethodDef Reader_methods[] = {
    {"read_request", (PyCFunction)Reader_read_request, METH_VARARGS,
     "read_request(buf, pos, limit) -> None | False | (type byte, fields, end)"},
    {"read_response", (PyCFunction)Reader_read_response, METH_VARARGS,
     "read_response(buf, pos, limit) -> None | False | (response number, error, fields, end)"},
    {"rows", (PyCFunction)Reader_rows, METH_VARARGS,
     "rows(buf, request, limit) -> False | (raft_rpcs rows, end of the first RPC or None, "
     "end of the last)"},
    {"stream_rows", (PyCFunction)Reader_stream_rows, METH_VARARGS,
     "stream_rows(streams, src, dst, subject, payload, fallback) -> (codes, offsets, which, "
     "term, term_valid, node_offsets, node, node_valid, err_offsets, err, err_valid, "
     "entry_offsets, index, term, type, command_offsets, command_data, command_valid)"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "lbparse.raft._transport.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Reader(structs, requests, responses, max_pending[, rows]): the transport's RPCs in C.",
    .tp_methods = Reader_methods,
    .tp_init = (initproc)Reader_init,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)Reader_dealloc,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_transport",
                                    "hashicorp/raft's transport RPCs read in C (see _transport.c).",
                                    -1, NULL};

PyMODINIT_FUNC PyInit__transport(void) {
    static const char *names[A_COUNT] = {"_rows",   "role",    "in_step", "buf",
                                         "trailer", "max_rpc", "rpcs"};
    for (int k = 0; k < A_COUNT; k++)
        if (!attr_name[k] && !(attr_name[k] = PyUnicode_InternFromString(names[k])))
            return NULL;
    if (PyType_Ready(&ReaderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&ReaderType);
    if (PyModule_AddObject(m, "Reader", (PyObject *)&ReaderType) < 0) {
        Py_DECREF(&ReaderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
