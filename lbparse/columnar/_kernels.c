/*
 * The pipeline's two per-byte loops, as C: one call per Arrow batch each.
 *
 * ranges(data, starts, ends, out[, portable])
 *   CRC-32C (Castagnoli) of many byte ranges of one buffer: out[i] is the
 *   CRC of data[starts[i]:ends[i]]. Calling crc32c.crc32c once per row costs
 *   about 0.4 us a row, nearly all of it the call and the slice; here the GIL
 *   is released and x86-64 CPUs with SSE 4.2 use their crc32 instruction
 *   (portable=True forces the table-driven code, so tests check both).
 *   data: any contiguous buffer; starts, ends: int64; out: writable uint32.
 *
 * scan(data, starts, ends, max_steps, slot_of, counts, next, rows, fields, wires, a, b, bad)
 *   The protobuf wire-format scan of wirescan._Scan (its Python reference,
 *   which documents the rules): every field occurrence of the messages
 *   data[starts[i]:ends[i]], grouped by field without a sort. slot_of
 *   (int32) maps the field numbers the caller asks for to slots 0..n-2; any
 *   other number goes to slot n-1. A first call (counts: int64[n], the rest
 *   None) counts each slot's occurrences; the second (counts None; next:
 *   int64[n], each slot's first index; rows int64, fields int32, wires int8,
 *   a int64, b int64 of the total length; bad uint8, one per message)
 *   writes every occurrence at its slot's next index, so each group is in
 *   message order, and flags the messages that break a rule.
 *
 * A range outside data, or with end < start, raises ValueError naming it;
 * nothing is read out of bounds. crc.py and wirescan.py are the Python side
 * and fall back to Python when this module is not built;
 * tests/test_kernels.py holds the two equal.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define POLY 0x82F63B78u /* CRC-32C, reflected */

static uint32_t table[8][256]; /* slicing-by-8 tables */

static void make_tables(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (POLY & (0u - (c & 1u)));
        table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int t = 1; t < 8; t++)
            table[t][n] = (table[t - 1][n] >> 8) ^ table[0][table[t - 1][n] & 0xFF];
}

static uint32_t crc_soft(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        /* The tables index bytes in memory order: little-endian words only. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        uint32_t lo = (uint32_t)w ^ c, hi = (uint32_t)(w >> 32);
        c = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^
            table[4][lo >> 24] ^ table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^
            table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
        p += 8;
        n -= 8;
#else
        break;
#endif
    }
    while (n--)
        c = (c >> 8) ^ table[0][(c ^ *p++) & 0xFF];
    return c ^ 0xFFFFFFFFu;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_HW 1
__attribute__((target("sse4.2"))) static uint32_t crc_hw(const uint8_t *p, size_t n) {
    uint64_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32 ^ 0xFFFFFFFFu;
}
#endif

static uint32_t (*crc)(const uint8_t *, size_t) = crc_soft;

static int contiguous(PyObject *obj, Py_buffer *view, int flags, const char *name) {
    if (PyObject_GetBuffer(obj, view, flags | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Format(PyExc_TypeError, "%s: a contiguous buffer is needed", name);
        return -1;
    }
    return 0;
}

/* Every range inside data, else ValueError naming the first that is not. */
static int check_ranges(const int64_t *s, const int64_t *e, Py_ssize_t n, Py_ssize_t len) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < 0 || e[i] < s[i] || e[i] > len) {
            PyErr_Format(PyExc_ValueError,
                         "range %zd is [%lld, %lld), outside the %zd bytes of data", i,
                         (long long)s[i], (long long)e[i], len);
            return -1;
        }
    }
    return 0;
}

static PyObject *ranges(PyObject *self, PyObject *args) {
    PyObject *a[4];
    int portable = 0;
    if (!PyArg_ParseTuple(args, "OOOO|p:ranges", &a[0], &a[1], &a[2], &a[3], &portable))
        return NULL;
    uint32_t (*f)(const uint8_t *, size_t) = portable ? crc_soft : crc;
    Py_buffer data, starts, ends, out;
    if (contiguous(a[0], &data, PyBUF_SIMPLE, "data") < 0)
        return NULL;
    if (contiguous(a[1], &starts, PyBUF_SIMPLE, "starts") < 0)
        goto fail_data;
    if (contiguous(a[2], &ends, PyBUF_SIMPLE, "ends") < 0)
        goto fail_starts;
    if (contiguous(a[3], &out, PyBUF_WRITABLE, "out") < 0)
        goto fail_ends;
    Py_ssize_t n = starts.len / 8;
    if (starts.len % 8 || ends.len != starts.len || out.len != n * 4) {
        PyErr_Format(PyExc_ValueError,
                     "ranges: starts and ends need n int64 each and out n uint32 "
                     "(got %zd, %zd and %zd bytes)", starts.len, ends.len, out.len);
        goto fail;
    }
    const int64_t *s = starts.buf, *e = ends.buf;
    const uint8_t *d = data.buf;
    uint32_t *o = out.buf;
    if (check_ranges(s, e, n, data.len) < 0)
        goto fail;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++)
        o[i] = f(d + s[i], (size_t)(e[i] - s[i]));
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&out);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&data);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&out);
fail_ends:
    PyBuffer_Release(&ends);
fail_starts:
    PyBuffer_Release(&starts);
fail_data:
    PyBuffer_Release(&data);
    return NULL;
}


/* ---- protobuf scan -------------------------------------------------------- */

#define MAX_SIZE_BYTES 5 /* longest tag or length varint upb reads (wirescan.MAX_SIZE_BYTES) */

/* A varint at p (before lim): its value and the position after it; 0 if it
 * runs past lim, is longer than 10 bytes or has bits past 64. */
static inline int varint(const uint8_t *d, int64_t p, int64_t lim, uint64_t *val, int64_t *next) {
    uint64_t v = 0;
    for (int j = 0; j < 10; j++, p++) {
        if (p >= lim)
            return 0;
        uint8_t byte = d[p];
        if (j == 9 && byte > 1)
            return 0;
        v |= (uint64_t)(byte & 0x7F) << (7 * j);
        if (byte < 0x80) {
            *val = v;
            *next = p + 1;
            return 1;
        }
    }
    return 0;
}

/* Where the occurrences go: grouped by slot (the caller's field numbers,
 * the last slot for any other), each group in scan order. Counting only
 * when rows is NULL: then counts[slot] is incremented instead. */
typedef struct {
    const int32_t *slot_of; /* field number -> slot, for numbers < nslot_of */
    Py_ssize_t nslot_of, other;
    int64_t *counts;        /* counting: occurrences per slot */
    int64_t *next;          /* filling: where each slot's next occurrence goes */
    int64_t *rows, *a, *b, cap;
    int32_t *fields;
    int8_t *wires;
    uint8_t *bad;
} sink;

static inline Py_ssize_t slot(const sink *o, uint64_t field) {
    if (field < (uint64_t)o->nslot_of && o->slot_of[field] >= 0)
        return o->slot_of[field];
    return o->other;
}

/* One message's fields (as wirescan._Scan reads them); 0 if it breaks a rule. */
static int scan_message(const uint8_t *d, int64_t pos, int64_t end, int64_t row,
                        Py_ssize_t max_steps, sink *o) {
    for (Py_ssize_t step = 0; pos < end; step++) {
        uint64_t tag, v;
        int64_t p, a, b;
        /* A tag of more than MAX_SIZE_BYTES bytes is corrupt for upb (wirescan.py). */
        if (step == max_steps || !varint(d, pos, end, &tag, &p) || tag > 0xFFFFFFFFu || tag < 8 ||
            p - pos > MAX_SIZE_BYTES)
            return 0;
        int wt = (int)(tag & 7);
        if (wt == 0 || wt == 2) {
            if (!varint(d, p, end, &v, &b))
                return 0;
            if (wt == 2) {
                int64_t n = (int64_t)v; /* a huge length turns negative: refused */
                if (n < 0 || n > end - b || b - p > MAX_SIZE_BYTES)
                    return 0;
                a = b;
                b += n;
            } else {
                a = (int64_t)v;
            }
        } else if (wt == 1 || wt == 5) {
            a = p;
            b = p + (wt == 1 ? 8 : 4);
            if (b > end)
                return 0;
        } else {
            return 0; /* groups, 6 and 7: left to upb */
        }
        Py_ssize_t s = slot(o, tag >> 3);
        if (o->rows == NULL) {
            o->counts[s]++;
        } else {
            int64_t i = o->next[s]++;
            if (i < o->cap) { /* past cap: the caller raises */
                o->rows[i] = row;
                o->fields[i] = (int32_t)(tag >> 3);
                o->wires[i] = (int8_t)wt;
                o->a[i] = a;
                o->b[i] = b;
            }
        }
        pos = b;
    }
    return 1;
}

/* scan(data, starts, ends, max_steps, slot_of, counts, next, rows, fields, wires, a, b, bad)
 * counts is given (the rest None) to count, next and the rest to fill. */
static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[12];
    Py_ssize_t max_steps;
    if (!PyArg_ParseTuple(args, "OOOnOOOOOOOOO:scan", &o[0], &o[1], &o[2], &max_steps, &o[3],
                          &o[4], &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11]))
        return NULL;
    static const char *names[] = {"data", "starts", "ends", "slot_of", "counts", "next", "rows",
                                  "fields", "wires", "a", "b", "bad"};
    int filling = o[4] == Py_None;
    Py_buffer v[12];
    int held[12] = {0};
    PyObject *result = NULL;
    for (int i = 0; i < 12; i++) {
        if (i >= 5 && !filling)
            break;
        if (i == 4 && filling)
            continue;
        if (contiguous(o[i], &v[i], i >= 4 ? PyBUF_WRITABLE : PyBUF_SIMPLE, names[i]) < 0)
            goto done;
        held[i] = 1;
    }
    Py_ssize_t k = v[1].len / 8, nslots = (filling ? v[5].len : v[4].len) / 8;
    if (v[1].len % 8 || v[2].len != v[1].len || v[3].len % 4 || nslots < 1) {
        PyErr_SetString(PyExc_ValueError, "scan: starts and ends need k int64 each, slot_of "
                        "int32, and counts or next one int64 per slot (at least one)");
        goto done;
    }
    sink out = {v[3].buf, v[3].len / 4, nslots - 1, NULL, NULL, NULL, NULL, NULL, 0,
                NULL, NULL, NULL};
    for (Py_ssize_t j = 0; j < out.nslot_of; j++)
        if (out.slot_of[j] >= nslots) {
            PyErr_Format(PyExc_ValueError, "scan: slot_of[%zd] is %d, past the %zd slots", j,
                         (int)out.slot_of[j], nslots);
            goto done;
        }
    if (filling) {
        Py_ssize_t m = v[6].len / 8;
        static const int widths[] = {8, 4, 1, 8, 8};
        for (int i = 6; i < 11; i++)
            if (v[i].len != m * widths[i - 6]) {
                PyErr_Format(PyExc_ValueError, "scan: %s has %zd bytes, not %zd", names[i],
                             v[i].len, m * widths[i - 6]);
                goto done;
            }
        if (v[11].len != k) {
            PyErr_Format(PyExc_ValueError, "scan: bad has %zd bytes, not %zd", v[11].len, k);
            goto done;
        }
        out.next = v[5].buf;
        out.rows = v[6].buf;
        out.fields = v[7].buf;
        out.wires = v[8].buf;
        out.a = v[9].buf;
        out.b = v[10].buf;
        out.bad = v[11].buf;
        out.cap = m;
        for (Py_ssize_t j = 0; j < nslots; j++)
            if (out.next[j] < 0 || out.next[j] > m) {
                PyErr_Format(PyExc_ValueError, "scan: next[%zd] is outside the %zd occurrences",
                             j, m);
                goto done;
            }
    } else {
        out.counts = v[4].buf;
    }
    const int64_t *s = v[1].buf, *e = v[2].buf;
    if (check_ranges(s, e, k, v[0].len) < 0)
        goto done;
    int overflow = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < k; i++)
        if (!scan_message(v[0].buf, s[i], e[i], i, max_steps, &out) && out.bad)
            out.bad[i] = 1;
    if (filling)
        for (Py_ssize_t j = 0; j < nslots; j++)
            overflow |= out.next[j] > out.cap;
    Py_END_ALLOW_THREADS
    if (overflow)
        PyErr_SetString(PyExc_RuntimeError, "scan: more occurrences than the buffers hold");
    else
        result = Py_None, Py_INCREF(Py_None);
done:
    for (int i = 0; i < 12; i++)
        if (held[i])
            PyBuffer_Release(&v[i]);
    return result;
}

static PyObject *implementation(PyObject *self, PyObject *unused) {
    return PyUnicode_FromString(crc == crc_soft ? "slicing-by-8" : "sse4.2");
}

static PyMethodDef methods[] = {
    {"ranges", ranges, METH_VARARGS,
     "ranges(data, starts, ends, out[, portable]): out[i] = CRC-32C of data[starts[i]:ends[i]]."},
    {"scan", scan, METH_VARARGS,
     "scan(data, starts, ends, max_steps, slot_of, counts, next, rows, fields, wires, a, b, "
     "bad): protobuf field occurrences, counted per slot (counts given) or written grouped "
     "by slot (next and the rest given)."},
    {"implementation", implementation, METH_NOARGS,
     "implementation(): which CRC code this CPU runs: 'sse4.2' or 'slicing-by-8'."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernels",
                                    "The pipeline's per-byte loops in C (see _kernels.c).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__kernels(void) {
    make_tables();
#ifdef HAVE_HW
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2"))
        crc = crc_hw;
#endif
    return PyModule_Create(&module);
}
