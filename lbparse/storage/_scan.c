/*
 * The segment reader's entry loop, as C (lbparse/storage/segment.py's fast path).
 *
 * scan(data, pos, end, header, body, crc_kind, entry_cls, entries, positions) -> stop
 *
 *   Reads the commit-log entries of data[pos:end] exactly as
 *   lbparse.codec.commitlog.scan_entries does, appending one `entry_cls` object
 *   (lbparse.codec.commitlog.CommitLogEntry: offset, timestamp, leader_epoch,
 *   size, crc32c, magic, attributes, key, value, headers, _crc_ok) to
 *   `entries` and its byte position to `positions` per whole entry. It
 *   stops at the first entry that is not whole and returns where that
 *   entry starts (end when every entry was whole); the caller reads that
 *   one entry again in Python to learn what is wrong with it.
 *
 *   No layout is written here: the caller passes it from the spec
 *   (lbparse_generated.storage_layouts):
 *     header = (length, (pos, width, signed) for offset, timestamp,
 *               leader_epoch, size; pos -1 for a field the generation lacks)
 *     body   = (min_length, crc_width, magic_width, attributes_width,
 *               then (width, signed) of key_len, value_len, header_count,
 *               header key_len, header value_len)
 *   Integers are big-endian. crc_kind 0 is CRC-32C (Castagnoli), 1 CRC-32
 *   (IEEE), both over the body after its CRC field.
 *
 * jsonl(prefix, positions, entries) -> bytes
 *
 *   The JSON Lines of `lbparse segments --format jsonl` for whole entries
 *   of a generation that stores every field: `prefix` (the object's
 *   opening, its keys about the file) then position and the entry as
 *   segment.entry_json gives it, written as lbparse.codec.jsonform.dumps writes
 *   them (offset, timestamp and leader_epoch as decimal strings, UTF-8 kept).
 *
 * tests/storage/test_storage_native.py holds both equal to the Python code.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "lb_be.h"
#include "lb_crc.h"
/* The JSON Lines buffer never leaves this file: Python's raw allocator,
 * which tracemalloc sees (tests/storage/test_storage_growth.py measures it). */
#define LB_GBUF_REALLOC PyMem_RawRealloc
#define LB_GBUF_FREE PyMem_RawFree
#define LB_GBUF_FIRST ((size_t)1 << 16) /* a segment's lines: many KiB at once */
#include "lb_gbuf.h"

static lb_crc_table tables[2]; /* slicing-by-8: CRC-32C, CRC-32 (IEEE) */
static int have_hw = 0;

static uint32_t crc_of(int kind, const uint8_t *p, size_t n) {
#ifdef LB_CRC32C_HW
    if (kind == 0 && have_hw)
        return lb_crc32c_hw(p, n);
#endif
    return lb_crc_soft(tables[kind], p, n);
}

/* A big-endian integer of 1, 2, 4 or 8 bytes, signed or not, as int64
 * (an unsigned 8-byte value goes back as uint64 through *u). */
static int64_t be(const uint8_t *p, int width, int is_signed, uint64_t *u) {
    uint64_t v = lb_be(p, width);
    if (u)
        *u = v;
    if (is_signed && width < 8 && (v >> (width * 8 - 1)) & 1)
        v |= ~0ull << (width * 8);
    return (int64_t)v;
}

typedef struct {
    Py_ssize_t pos;
    int width, is_signed;
} field_t;

typedef struct {
    Py_ssize_t length;
    field_t offset, timestamp, epoch, size;
} header_t;

typedef struct {
    Py_ssize_t min_length;
    int crc_w, magic_w, attr_w;
    field_t key_len, value_len, count, hkey_len, hvalue_len; /* pos unused */
} body_t;

static PyObject *names[11]; /* interned attribute names, see init_names */
static PyObject *crc_ok_name;

static int init_names(void) {
    static const char *s[] = {"offset", "timestamp", "leader_epoch", "size", "crc32c", "magic",
                              "attributes", "key", "value", "headers", "_crc_ok"};
    for (int i = 0; i < 11; i++)
        if (!(names[i] = PyUnicode_InternFromString(s[i])))
            return -1;
    return (crc_ok_name = PyUnicode_InternFromString("crc_ok")) ? 0 : -1;
}

static int parse_field(PyObject *t, field_t *f, int with_pos) {
    if (with_pos)
        return PyArg_ParseTuple(t, "nip", &f->pos, &f->width, &f->is_signed) ? 0 : -1;
    f->pos = 0;
    return PyArg_ParseTuple(t, "ip", &f->width, &f->is_signed) ? 0 : -1;
}

static int ok_width(int w) { return w == 1 || w == 2 || w == 4 || w == 8; }

static int parse_layout(PyObject *h, PyObject *b, header_t *hd, body_t *bd) {
    PyObject *fo, *ft, *fe, *fs, *k, *v, *c, *hk, *hv;
    if (!PyArg_ParseTuple(h, "nOOOO", &hd->length, &fo, &ft, &fe, &fs) ||
        parse_field(fo, &hd->offset, 1) || parse_field(ft, &hd->timestamp, 1) ||
        parse_field(fe, &hd->epoch, 1) || parse_field(fs, &hd->size, 1))
        return -1;
    if (!PyArg_ParseTuple(b, "niiiOOOOO", &bd->min_length, &bd->crc_w, &bd->magic_w, &bd->attr_w,
                          &k, &v, &c, &hk, &hv) ||
        parse_field(k, &bd->key_len, 0) || parse_field(v, &bd->value_len, 0) ||
        parse_field(c, &bd->count, 0) || parse_field(hk, &bd->hkey_len, 0) ||
        parse_field(hv, &bd->hvalue_len, 0))
        return -1;
    field_t *hf[] = {&hd->offset, &hd->timestamp, &hd->epoch, &hd->size};
    for (int i = 0; i < 4; i++)
        if (hf[i]->pos >= 0 && (!ok_width(hf[i]->width) || hf[i]->pos + hf[i]->width > hd->length)) {
            PyErr_SetString(PyExc_ValueError, "header field outside the header");
            return -1;
        }
    field_t *bf[] = {&bd->key_len, &bd->value_len, &bd->count, &bd->hkey_len, &bd->hvalue_len};
    for (int i = 0; i < 5; i++)
        if (!ok_width(bf[i]->width)) {
            PyErr_SetString(PyExc_ValueError, "body length field width");
            return -1;
        }
    if (hd->offset.pos < 0 || hd->size.pos < 0 || !ok_width(bd->crc_w) || bd->crc_w > 4 ||
        !ok_width(bd->magic_w) || !ok_width(bd->attr_w)) {
        PyErr_SetString(PyExc_ValueError, "layout without offset, size or CRC");
        return -1;
    }
    return 0;
}

/* A length-prefixed byte string at *p (the length already read): its bytes,
 * Py_None for -1 when nil_ok, NULL (no exception set) when it does not fit. */
static PyObject *sized(const uint8_t *d, Py_ssize_t *p, Py_ssize_t end, int64_t len, int nil_ok) {
    if (len == -1 && nil_ok) {
        Py_RETURN_NONE;
    }
    if (len < 0 || len > end - *p)
        return NULL;
    PyObject *out = PyBytes_FromStringAndSize((const char *)d + *p, (Py_ssize_t)len);
    *p += (Py_ssize_t)len;
    return out;
}

/* The body's fields after its head: key, value, headers. Returns a new list
 * of headers and sets *key, *value; NULL when the body is not whole (with an
 * exception set only for a Python error, e.g. memory). */
static PyObject *body_rest(const uint8_t *d, Py_ssize_t p, Py_ssize_t end, const body_t *b,
                           PyObject **key, PyObject **value) {
    *key = *value = NULL;
    if (p + b->key_len.width > end)
        return NULL;
    int64_t klen = be(d + p, b->key_len.width, b->key_len.is_signed, NULL);
    p += b->key_len.width;
    if (!(*key = sized(d, &p, end, klen, 1)))
        return NULL;
    if (p + b->value_len.width > end)
        goto fail;
    int64_t vlen = be(d + p, b->value_len.width, b->value_len.is_signed, NULL);
    p += b->value_len.width;
    if (!(*value = sized(d, &p, end, vlen, 1)))
        goto fail;
    if (p + b->count.width > end)
        goto fail;
    int64_t count = be(d + p, b->count.width, b->count.is_signed, NULL);
    p += b->count.width;
    PyObject *headers = PyList_New(0);
    if (!headers)
        goto fail;
    for (int64_t i = 0; i < count; i++) {
        if (p + b->hkey_len.width > end)
            goto fail_h;
        int64_t hk = be(d + p, b->hkey_len.width, b->hkey_len.is_signed, NULL);
        p += b->hkey_len.width;
        if (hk < 0 || hk > end - p)
            goto fail_h;
        PyObject *k = PyUnicode_DecodeUTF8((const char *)d + p, (Py_ssize_t)hk, NULL);
        if (!k) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                PyErr_Clear(); /* not UTF-8: the entry is malformed, not an error of ours */
            goto fail_h;
        }
        p += (Py_ssize_t)hk;
        if (p + b->hvalue_len.width > end) {
            Py_DECREF(k);
            goto fail_h;
        }
        int64_t hv = be(d + p, b->hvalue_len.width, b->hvalue_len.is_signed, NULL);
        p += b->hvalue_len.width;
        PyObject *v = sized(d, &p, end, hv, 0);
        if (!v) {
            Py_DECREF(k);
            goto fail_h;
        }
        PyObject *pair = PyTuple_Pack(2, k, v);
        Py_DECREF(k);
        Py_DECREF(v);
        if (!pair || PyList_Append(headers, pair) < 0) {
            Py_XDECREF(pair);
            goto fail_h;
        }
        Py_DECREF(pair);
    }
    return headers;
fail_h:
    Py_DECREF(headers);
fail:
    Py_CLEAR(*key);
    Py_CLEAR(*value);
    return NULL;
}

static PyObject *int_of(const uint8_t *d, const field_t *f) {
    uint64_t u;
    int64_t s = be(d + f->pos, f->width, f->is_signed, &u);
    return f->is_signed ? PyLong_FromLongLong(s) : PyLong_FromUnsignedLongLong(u);
}

/* One entry object with its attributes set; NULL with an exception on failure. */
static PyObject *make_entry(PyTypeObject *cls, PyObject *values[11]) {
    PyObject *obj = cls->tp_alloc(cls, 0);
    if (!obj)
        return NULL;
    for (int i = 0; i < 11; i++)
        if (PyObject_GenericSetAttr(obj, names[i], values[i]) < 0) {
            Py_DECREF(obj);
            return NULL;
        }
    return obj;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, end;
    PyObject *hobj, *bobj, *cls, *entries, *positions;
    int kind;
    if (!PyArg_ParseTuple(args, "y*nnOOiO!O!O!", &view, &pos, &end, &hobj, &bobj, &kind,
                          &PyType_Type, &cls, &PyList_Type, &entries, &PyList_Type, &positions))
        return NULL;
    header_t h;
    body_t b;
    if (parse_layout(hobj, bobj, &h, &b) < 0 || kind < 0 || kind > 1 || pos < 0 ||
        end > view.len || pos > end) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "scan: bad arguments");
        PyBuffer_Release(&view);
        return NULL;
    }
    const uint8_t *d = view.buf;
    PyObject *zero = PyLong_FromLong(0);
    while (pos < end) {
        if (end - pos < h.length)
            break;
        const uint8_t *e = d + pos;
        uint64_t size;
        be(e + h.size.pos, h.size.width, 0, &size);
        Py_ssize_t body = pos + h.length;
        if (size > (uint64_t)(end - body) || (Py_ssize_t)size < b.min_length)
            break;
        Py_ssize_t bend = body + (Py_ssize_t)size;
        Py_ssize_t p = body + b.crc_w + b.magic_w + b.attr_w;
        PyObject *key, *value;
        PyObject *headers = body_rest(d, p, bend, &b, &key, &value);
        if (!headers) {
            if (PyErr_Occurred())
                goto error;
            break;
        }
        uint64_t stored;
        be(d + body, b.crc_w, 0, &stored);
        uint32_t computed = crc_of(kind, d + body + b.crc_w, (size_t)(bend - body - b.crc_w));
        PyObject *v[11] = {
            int_of(e, &h.offset),
            h.timestamp.pos >= 0 ? int_of(e, &h.timestamp) : (Py_INCREF(zero), zero),
            h.epoch.pos >= 0 ? int_of(e, &h.epoch) : (Py_INCREF(zero), zero),
            PyLong_FromUnsignedLongLong(size),
            PyLong_FromUnsignedLongLong(stored),
            PyLong_FromLongLong(be(d + body + b.crc_w, b.magic_w, 0, NULL)),
            PyLong_FromLongLong(be(d + body + b.crc_w + b.magic_w, b.attr_w, 0, NULL)),
            key, value, headers,
            PyBool_FromLong(computed == (uint32_t)stored)};
        int failed = 0;
        for (int i = 0; i < 11; i++)
            failed |= v[i] == NULL;
        PyObject *obj = failed ? NULL : make_entry((PyTypeObject *)cls, v);
        for (int i = 0; i < 11; i++)
            Py_XDECREF(v[i]);
        if (!obj)
            goto error;
        PyObject *at = PyLong_FromSsize_t(pos);
        int bad = !at || PyList_Append(entries, obj) < 0 || PyList_Append(positions, at) < 0;
        Py_DECREF(obj);
        Py_XDECREF(at);
        if (bad)
            goto error;
        pos = bend;
    }
    Py_DECREF(zero);
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(pos);
error:
    Py_DECREF(zero);
    PyBuffer_Release(&view);
    return NULL;
}


/* ---- JSON Lines of entries (lbparse segments --format jsonl) -------------- */

static int put(lb_gbuf *o, const char *s, Py_ssize_t n) { return lb_gb_put_py(o, s, (size_t)n); }

/* Room for k * n + 2 bytes (a string of n escaped k bytes each, quoted). */
static int room_quoted(lb_gbuf *o, Py_ssize_t n, size_t k) {
    if ((size_t)n > (LB_GBUF_MAX - 2) / k) {
        PyErr_NoMemory();
        return -1;
    }
    return lb_gb_reserve_py(o, k * (size_t)n + 2);
}

/* The end of what is written: where the next byte goes. */
static char *tail(lb_gbuf *o) { return (char *)o->p + o->len; }

#define PUTS(o, lit) put(o, lit, (Py_ssize_t)(sizeof(lit) - 1))

/* An int attribute as decimal (any size: Python's own conversion beyond 64 bits). */
static int put_int(lb_gbuf *o, PyObject *v) {
    char tmp[32];
    int overflow = 0;
    long long s = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (s == -1 && PyErr_Occurred())
        return -1;
    if (!overflow) {
        int n = snprintf(tmp, sizeof tmp, "%lld", s);
        return put(o, tmp, n);
    }
    PyObject *text = PyObject_Str(v);
    if (!text)
        return -1;
    Py_ssize_t n;
    const char *t = PyUnicode_AsUTF8AndSize(text, &n);
    int rc = t ? put(o, t, n) : -1;
    Py_DECREF(text);
    return rc;
}

static int put_hex(lb_gbuf *o, PyObject *b) {
    static const char digits[] = "0123456789abcdef";
    if (b == Py_None)
        return PUTS(o, "null");
    char *p;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(b, &p, &n) < 0)
        return -1;
    if (room_quoted(o, n, 2) < 0)
        return -1;
    char *w = tail(o);
    *w++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        *w++ = digits[c >> 4];
        *w++ = digits[c & 15];
    }
    *w++ = '"';
    o->len = (size_t)(w - (char *)o->p);
    return 0;
}

/* A string as json.dumps(s, ensure_ascii=False) writes it. */
static int put_str(lb_gbuf *o, PyObject *s) {
    Py_ssize_t n;
    const char *t = PyUnicode_AsUTF8AndSize(s, &n);
    if (!t || room_quoted(o, n, 6) < 0)
        return -1;
    char *w = tail(o);
    *w++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)t[i];
        switch (c) {
        case '"': *w++ = '\\'; *w++ = '"'; break;
        case '\\': *w++ = '\\'; *w++ = '\\'; break;
        case '\n': *w++ = '\\'; *w++ = 'n'; break;
        case '\r': *w++ = '\\'; *w++ = 'r'; break;
        case '\t': *w++ = '\\'; *w++ = 't'; break;
        case '\b': *w++ = '\\'; *w++ = 'b'; break;
        case '\f': *w++ = '\\'; *w++ = 'f'; break;
        default:
            if (c < 0x20) {
                w += snprintf(w, 7, "\\u%04x", c);
            } else {
                *w++ = (char)c;
            }
        }
    }
    *w++ = '"';
    o->len = (size_t)(w - (char *)o->p);
    return 0;
}

/* headers_hex: a JSON object of key -> hex value; a repeated key keeps its
 * first place and its last value, as a Python dict built from the list does. */
/* The headers as an object, as Python's dict(headers) makes it: each key once,
 * where it first comes, with its last value. A dict finds the repeated keys
 * (comparing every pair made one entry of 32,767 keys take 28.5 s). */
static int put_headers(lb_gbuf *o, PyObject *headers) {
    if (!PyList_Check(headers)) {
        PyErr_SetString(PyExc_TypeError, "headers: a list is needed");
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(headers);
    PyObject *last = PyDict_New();
    if (!last)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(headers, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "headers: (key, value) pairs are needed");
            Py_DECREF(last);
            return -1;
        }
        if (PyDict_SetItem(last, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1)) < 0) {
            Py_DECREF(last);
            return -1;
        }
    }
    int rc = PUTS(o, "{");
    Py_ssize_t at = 0;
    PyObject *k, *v;
    for (int first = 1; rc >= 0 && PyDict_Next(last, &at, &k, &v); first = 0)
        if ((!first && PUTS(o, ", ") < 0) || put_str(o, k) < 0 || PUTS(o, ": ") < 0 ||
            put_hex(o, v) < 0)
            rc = -1;
    Py_DECREF(last);
    return rc < 0 ? -1 : PUTS(o, "}");
}

static int put_attr_int(lb_gbuf *o, PyObject *e, int name) {
    PyObject *v = PyObject_GetAttr(e, names[name]);
    if (!v)
        return -1;
    int rc = v == Py_None ? PUTS(o, "null") : put_int(o, v);
    Py_DECREF(v);
    return rc;
}

/* A 64-bit field as lbparse's JSON writes it (lbparse.codec.jsonform): a decimal string. */
static int put_attr_int64(lb_gbuf *o, PyObject *e, int name) {
    PyObject *v = PyObject_GetAttr(e, names[name]);
    if (!v)
        return -1;
    int rc = v == Py_None ? PUTS(o, "null")
                          : (PUTS(o, "\"") < 0 || put_int(o, v) < 0) ? -1 : PUTS(o, "\"");
    Py_DECREF(v);
    return rc;
}

static int put_attr(lb_gbuf *o, PyObject *e, int name, int (*f)(lb_gbuf *, PyObject *)) {
    PyObject *v = PyObject_GetAttr(e, names[name]);
    if (!v)
        return -1;
    int rc = f(o, v);
    Py_DECREF(v);
    return rc;
}

/* Indexes in names[] (init_names's order). */
enum { N_OFFSET, N_TIMESTAMP, N_EPOCH, N_SIZE, N_CRC, N_MAGIC, N_ATTRS, N_KEY, N_VALUE,
       N_HEADERS };

static int put_entry(lb_gbuf *o, PyObject *prefix, PyObject *pos, PyObject *e) {
    char *p;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(prefix, &p, &n) < 0 || put(o, p, n) < 0 ||
        PUTS(o, "\"position\": ") < 0 || put_int(o, pos) < 0 ||
        PUTS(o, ", \"attributes\": ") < 0 || put_attr_int(o, e, N_ATTRS) < 0 ||
        PUTS(o, ", \"crc32c\": ") < 0 || put_attr_int(o, e, N_CRC) < 0 ||
        PUTS(o, ", \"headers_hex\": ") < 0 || put_attr(o, e, N_HEADERS, put_headers) < 0 ||
        PUTS(o, ", \"key_hex\": ") < 0 || put_attr(o, e, N_KEY, put_hex) < 0 ||
        PUTS(o, ", \"leader_epoch\": ") < 0 || put_attr_int64(o, e, N_EPOCH) < 0 ||
        PUTS(o, ", \"magic\": ") < 0 || put_attr_int(o, e, N_MAGIC) < 0 ||
        PUTS(o, ", \"offset\": ") < 0 || put_attr_int64(o, e, N_OFFSET) < 0 ||
        PUTS(o, ", \"size\": ") < 0 || put_attr_int(o, e, N_SIZE) < 0 ||
        PUTS(o, ", \"timestamp\": ") < 0 || put_attr_int64(o, e, N_TIMESTAMP) < 0 ||
        PUTS(o, ", \"value_hex\": ") < 0 || put_attr(o, e, N_VALUE, put_hex) < 0 ||
        PUTS(o, ", \"crc_ok\": ") < 0)
        return -1;
    PyObject *ok = PyObject_GetAttr(e, crc_ok_name); /* the property: None when not read */
    if (!ok)
        return -1;
    int rc = ok == Py_None ? PUTS(o, "null}\n") : ok == Py_True ? PUTS(o, "true}\n")
                                                               : PUTS(o, "false}\n");
    Py_DECREF(ok);
    return rc;
}

static PyObject *jsonl(PyObject *self, PyObject *args) {
    PyObject *prefix, *positions, *entries;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyBytes_Type, &prefix, &PyList_Type, &positions,
                          &PyList_Type, &entries))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(entries);
    if (PyList_GET_SIZE(positions) != n) {
        PyErr_SetString(PyExc_ValueError, "jsonl: as many positions as entries are needed");
        return NULL;
    }
    lb_gbuf o = {NULL, 0, 0};
    for (Py_ssize_t i = 0; i < n; i++)
        if (put_entry(&o, prefix, PyList_GET_ITEM(positions, i), PyList_GET_ITEM(entries, i)) < 0) {
            lb_gb_free(&o);
            return NULL;
        }
    PyObject *result = PyBytes_FromStringAndSize(o.p ? (const char *)o.p : "", (Py_ssize_t)o.len);
    lb_gb_free(&o);
    return result;
}

static PyObject *implementation(PyObject *self, PyObject *unused) {
#ifdef LB_CRC32C_HW
    if (have_hw)
        return PyUnicode_FromString("sse4.2");
#endif
    return PyUnicode_FromString("slicing-by-8");
}

static PyObject *crc(PyObject *self, PyObject *args) {
    Py_buffer view;
    int kind;
    if (!PyArg_ParseTuple(args, "y*i", &view, &kind))
        return NULL;
    if (kind < 0 || kind > 1) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "crc kind is 0 (CRC-32C) or 1 (CRC-32)");
        return NULL;
    }
    uint32_t c = crc_of(kind, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(c);
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(data, pos, end, header, body, crc_kind, entry_cls, entries, positions) -> stop: "
     "the whole entries of data[pos:end] appended; where the first that is not whole starts."},
    {"crc", crc, METH_VARARGS, "crc(data, kind): CRC-32C (kind 0) or CRC-32 (kind 1) of data."},
    {"jsonl", jsonl, METH_VARARGS,
     "jsonl(prefix, positions, entries) -> bytes: one JSON line per entry, `prefix` (the "
     "opening of each object) then position and the entry's fields."},
    {"implementation", implementation, METH_NOARGS,
     "implementation(): which CRC-32C code this CPU runs: 'sse4.2' or 'slicing-by-8'."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan",
                                    "The segment reader's entry loop in C (see _scan.c).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__scan(void) {
    lb_crc_tables(tables[0], LB_CRC32C_POLY);
    lb_crc_tables(tables[1], LB_CRC32_IEEE_POLY);
    have_hw = lb_crc32c_has_hw();
    if (init_names() < 0)
        return NULL;
    return PyModule_Create(&module);
}
