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
 * strings(codes, table_offsets, table_data, offsets) -> data
 *   An Arrow string column of small codes into a table of strings (see below).
 *
 * binary(items) -> (offsets, data, validity, nulls) or None
 *   An Arrow binary column of a list of bytes and None (see below).
 *
 * A range outside data, or with end < start, raises ValueError naming it;
 * nothing is read out of bounds. crc.py and wirescan.py are the Python side
 * and fall back to Python when this module is not built;
 * tests/columnar/test_kernels.py holds the two equal.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "lb_arrow.h"
#include "lb_be.h"
#include "lb_crc.h"
#include "lb_gbuf.h"
#include "lb_varint.h"

static lb_crc_table table; /* CRC-32C, slicing-by-8 */

static uint32_t crc_soft(const uint8_t *p, size_t n) { return lb_crc_soft(table, p, n); }

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
        if (step == max_steps || !lb_varint(d, pos, end, &tag, &p) || tag > 0xFFFFFFFFu || tag < 8 ||
            p - pos > MAX_SIZE_BYTES)
            return 0;
        int wt = (int)(tag & 7);
        if (wt == 0 || wt == 2) {
            if (!lb_varint(d, p, end, &v, &b))
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

/* ---- envelope headers ------------------------------------------------------ */

/* headers(data, starts, ends, todo, spec, known, verify_crc,
 *         lens, magic, version, hl, flags, byte7, crc, has_crc, take, crc_ok)
 * decode_arrow's _headers and _v0_rows in one pass (their numpy code is the
 * reference; tests/columnar/test_envelope_pass.py holds the two equal). spec, from
 * lbparse.codec.wire: (magic bytes, version offset, header length offset, flags
 * offset, msg type offset, crc offset, crc size, header size, crc header
 * length, crc flag, version, max payload). A byte past a row's end reads
 * as the byte there, or the buffer's last (as the numpy gather does); it
 * is only used where the row is long enough. known: uint8[256], byte 7 ->
 * a MsgType of v0. todo: uint8 per row (rows to take from). Outputs: int64
 * lens and crc, uint8 magic, has_crc and take, int32 version, hl, flags,
 * byte7, int8 crc_ok (-1 where no CRC was checked). */
/* What headers() reads and writes, for header_rows. */
typedef struct {
    const uint8_t *d;
    Py_ssize_t dlen;
    const int64_t *s, *e;
    const uint8_t *todo, *known, *magic;
    int64_t *lens;
    uint8_t *mg;
    int32_t *ver, *hl, *fl, *b7;
    int64_t *crcs;
    uint8_t *hc, *take;
    int8_t *cok;
    long long voff, hloff, foff, toff, coff, hsize, chlen, cflag, version, maxp;
    int verify;
} hdr_rows;

/* headers()' loop over n rows. Inlined into each call with span, nmagic
 * and csize as given: constants where the caller knows them. */
static inline __attribute__((always_inline)) void header_rows(const hdr_rows *r, Py_ssize_t n,
                                                              long long span, Py_ssize_t nmagic,
                                                              long long csize) {
    const uint8_t *d = r->d;
    Py_ssize_t dlen = r->dlen;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint8_t b[64];
        int64_t si = r->s[i], len = r->e[i] - si;
        if (si + span <= dlen) {
            memcpy(b, d + si, (size_t)span);
        } else {
            for (long long j = 0; j < span; j++)
                b[j] = d[si + j < dlen ? si + j : dlen - 1];
        }
        int m = len >= r->hsize && memcmp(b, r->magic, (size_t)nmagic) == 0;
        uint8_t version = b[r->voff], hlen = b[r->hloff], flags = b[r->foff], t7 = b[r->toff];
        int64_t crcv = (int64_t)lb_be(b + r->coff, (int)csize);
        r->lens[i] = len;
        r->mg[i] = (uint8_t)m;
        r->ver[i] = version;
        r->hl[i] = hlen;
        r->fl[i] = flags;
        r->b7[i] = t7;
        r->crcs[i] = crcv;
        int flag = (flags & r->cflag) != 0;
        r->hc[i] = (uint8_t)(m && flag && len >= r->chlen);
        r->cok[i] = -1;
        int t = r->todo[i] && m && version == r->version &&
                hlen == (flag ? r->chlen : r->hsize) && len >= hlen && len - hlen <= r->maxp &&
                r->known[t7];
        if (t && flag) {
            int match = crc(d + si + r->chlen, (size_t)(len - r->chlen)) == (uint32_t)crcv;
            r->cok[i] = (int8_t)match;
            if (r->verify && !match)
                t = 0;
        }
        r->take[i] = (uint8_t)t;
    }
}

static PyObject *headers(PyObject *self, PyObject *args) {
    (void)self;
    enum { NIN = 5, NOUT = 10 };
    PyObject *o[NIN + NOUT], *spec;
    int verify;
    const char *magic;
    Py_ssize_t nmagic;
    long long voff, hloff, foff, toff, coff, csize, hsize, chlen, cflag, version, maxp;
    if (!PyArg_ParseTuple(args, "OOOOOOpOOOOOOOOOO:headers", &o[0], &o[1], &o[2], &o[3], &spec,
                          &o[4], &verify, &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11],
                          &o[12], &o[13], &o[14]))
        return NULL;
    if (!PyArg_ParseTuple(spec, "y#LLLLLLLLLLL:headers spec", &magic, &nmagic, &voff, &hloff,
                          &foff, &toff, &coff, &csize, &hsize, &chlen, &cflag, &version, &maxp))
        return NULL;
    long long span = coff + csize; /* bytes read of every row */
    long long offs[] = {voff, hloff, foff, toff, coff};
    for (int j = 0; j < 5; j++)
        if (offs[j] < 0 || offs[j] >= span || span > 64 || csize < 1 || csize > 8 ||
            nmagic > span) {
            PyErr_SetString(PyExc_ValueError, "headers: the spec's offsets are outside its header");
            return NULL;
        }
    static const char *names[] = {"data", "starts", "ends", "todo", "known", "lens", "magic",
                                  "version", "hl", "flags", "byte7", "crc", "has_crc", "take",
                                  "crc_ok"};
    static const int widths[] = {0, 8, 8, 1, 1, 8, 1, 4, 4, 4, 4, 8, 1, 1, 1};
    Py_buffer v[NIN + NOUT];
    int held = 0;
    PyObject *result = NULL;
    for (; held < NIN + NOUT; held++)
        if (contiguous(o[held], &v[held], held >= NIN ? PyBUF_WRITABLE : PyBUF_SIMPLE,
                       names[held]) < 0)
            goto done;
    Py_ssize_t n = v[1].len / 8;
    for (int j = 1; j < NIN + NOUT; j++) {
        Py_ssize_t want = j == 4 ? 256 : n * widths[j];
        if (v[j].len != want) {
            PyErr_Format(PyExc_ValueError, "headers: %s has %zd bytes, not %zd", names[j],
                         v[j].len, want);
            goto done;
        }
    }
    const int64_t *s = v[1].buf, *e = v[2].buf;
    const uint8_t *d = v[0].buf, *todo = v[3].buf, *known = v[4].buf;
    Py_ssize_t dlen = v[0].len;
    if (dlen < 1) {
        PyErr_SetString(PyExc_ValueError, "headers: data is empty (one byte at least)");
        goto done;
    }
    if (check_ranges(s, e, n, dlen) < 0)
        goto done;
    hdr_rows r = {d, dlen, s, e, todo, known, (const uint8_t *)magic, v[5].buf, v[6].buf,
                  v[7].buf, v[8].buf, v[9].buf, v[10].buf, v[11].buf, v[12].buf, v[13].buf,
                  v[14].buf, voff, hloff, foff, toff, coff, hsize, chlen, cflag, version, maxp,
                  verify};
    Py_BEGIN_ALLOW_THREADS
    /* v0's header (12 bytes read, a 4-byte magic and CRC) with its sizes as
     * constants: the copies, the magic's compare and the CRC's read inline
     * (decode_tables a tenth less a header-only row); any other spec by the
     * same code, its sizes read. */
    if (span == 12 && nmagic == 4 && csize == 4)
        header_rows(&r, n, 12, 4, 4);
    else
        header_rows(&r, n, span, nmagic, csize);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    while (held-- > 0)
        PyBuffer_Release(&v[held]);
    return result;
}

/* group(codes, ncodes, order, bounds): a stable counting sort of the rows
 * by code. codes: int32, one per row, -1 (or any value outside
 * 0..ncodes-1) for rows in no group; bounds: int64[ncodes + 1], order: int64
 * with room for every row. Afterwards order[bounds[c]:bounds[c+1]] are the
 * rows of code c, ascending; returns how many rows are grouped. */
static PyObject *group(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[3];
    Py_ssize_t ncodes;
    if (!PyArg_ParseTuple(args, "OnOO:group", &o[0], &ncodes, &o[1], &o[2]))
        return NULL;
    Py_buffer codes, order, bounds;
    if (contiguous(o[0], &codes, PyBUF_SIMPLE, "codes") < 0)
        return NULL;
    if (contiguous(o[1], &order, PyBUF_WRITABLE, "order") < 0) {
        PyBuffer_Release(&codes);
        return NULL;
    }
    if (contiguous(o[2], &bounds, PyBUF_WRITABLE, "bounds") < 0) {
        PyBuffer_Release(&order);
        PyBuffer_Release(&codes);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n = codes.len / 4;
    if (codes.len % 4 || ncodes < 0 || bounds.len != (ncodes + 1) * 8 || order.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "group: codes need n int32, order n int64 and bounds "
                        "ncodes + 1 int64");
        goto done;
    }
    const int32_t *c = codes.buf;
    int64_t *b = bounds.buf, *out = order.buf;
    memset(b, 0, (size_t)bounds.len);
    for (Py_ssize_t i = 0; i < n; i++)
        if (c[i] >= 0 && c[i] < ncodes)
            b[c[i] + 1]++;
    for (Py_ssize_t j = 0; j < ncodes; j++)
        b[j + 1] += b[j];
    int64_t *next = malloc((size_t)(ncodes ? ncodes : 1) * 8);
    if (!next) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(next, b, (size_t)ncodes * 8);
    for (Py_ssize_t i = 0; i < n; i++)
        if (c[i] >= 0 && c[i] < ncodes)
            out[next[c[i]]++] = i;
    free(next);
    result = PyLong_FromLongLong((long long)b[ncodes]);
done:
    PyBuffer_Release(&bounds);
    PyBuffer_Release(&order);
    PyBuffer_Release(&codes);
    return result;
}

/* ---- strings from codes --------------------------------------------------------- */

/* strings(codes, table_offsets, table_data, offsets) -> data: the Arrow string
 * column of codes into a small table of strings (the decoder's layout,
 * msg_type_name and payload_type). codes: int32, -1 a null (an empty slot);
 * table_offsets: int32[k + 1] into table_data; offsets: writable int32[n + 1],
 * filled. A code past the table, or a column over Arrow's 2 GiB of string
 * data, raises ValueError. Arrow's take is the reference (decode_arrow._Names). */
static PyObject *strings(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[4];
    if (!PyArg_ParseTuple(args, "OOOO:strings", &o[0], &o[1], &o[2], &o[3]))
        return NULL;
    Py_buffer v[4];
    int held = 0;
    PyObject *result = NULL;
    static const char *names[] = {"codes", "table_offsets", "table_data", "offsets"};
    for (; held < 4; held++)
        if (contiguous(o[held], &v[held], held == 3 ? PyBUF_WRITABLE : PyBUF_SIMPLE,
                       names[held]) < 0)
            goto done;
    Py_ssize_t n = v[0].len / 4, k = v[1].len / 4 - 1;
    if (v[0].len % 4 || v[1].len % 4 || k < 0 || v[3].len != (n + 1) * 4) {
        PyErr_SetString(PyExc_ValueError, "strings: codes need n int32, table_offsets k + 1 "
                        "int32 and offsets n + 1 int32");
        goto done;
    }
    const int32_t *c = v[0].buf, *to = v[1].buf;
    int32_t *off = v[3].buf;
    for (Py_ssize_t j = 0; j < k; j++)
        if (to[j] < 0 || to[j + 1] < to[j] || to[j + 1] > v[2].len) {
            PyErr_Format(PyExc_ValueError, "strings: table entry %zd is outside the table data",
                         j);
            goto done;
        }
    /* One name in every row (a batch's layout, the MsgType of a batch of one
     * type): its offsets by multiplication and its bytes copied in doubling
     * runs, where the general loops below cost ~40 instructions a row. */
    int32_t diff = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        diff |= c[i] ^ c[0];
    if (n && !diff && c[0] >= 0 && c[0] < k) {
        int64_t len = to[c[0] + 1] - to[c[0]];
        if (len * (int64_t)n > INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "strings: over 2 GiB of string data in %zd rows", n);
            goto done;
        }
        for (Py_ssize_t i = 0; i <= n; i++)
            off[i] = (int32_t)(len * (int64_t)i);
        result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(len * n));
        if (result && len) {
            uint8_t *out = (uint8_t *)PyBytes_AS_STRING(result);
            size_t have = (size_t)len, want = (size_t)(len * n);
            memcpy(out, (const uint8_t *)v[2].buf + to[c[0]], (size_t)len);
            while (have < want) {
                size_t more = have < want - have ? have : want - have;
                memcpy(out + have, out, more);
                have += more;
            }
        }
        goto done;
    }
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (c[i] >= k || c[i] < -1) {
            PyErr_Format(PyExc_ValueError, "strings: code %d at row %zd, for a table of %zd",
                         (int)c[i], i, k);
            goto done;
        }
        off[i] = (int32_t)total;
        if (c[i] >= 0)
            total += to[c[i] + 1] - to[c[i]];
        if (total > INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "strings: over 2 GiB of string data by row %zd", i);
            goto done;
        }
    }
    off[n] = (int32_t)total;
    /* Each value of up to STRINGS_WIDE bytes is copied as that many, from a
     * copy of the table with that much slack after it, into an output with
     * as much slack, cut after: a copy of a constant size is a few moves,
     * where one of each value's size was a call (a third of the column).
     * The bytes past a value are those the next value overwrites. */
    enum { STRINGS_WIDE = 32 };
    Py_ssize_t tlen = v[2].len;
    uint8_t *tab = malloc((size_t)tlen + STRINGS_WIDE);
    if (!tab) {
        PyErr_NoMemory();
        goto done;
    }
    if (tlen)
        memcpy(tab, v[2].buf, (size_t)tlen);
    memset(tab + tlen, 0, STRINGS_WIDE);
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total + STRINGS_WIDE);
    if (result) {
        uint8_t *out = (uint8_t *)PyBytes_AS_STRING(result);
        for (Py_ssize_t i = 0; i < n; i++) {
            if (c[i] < 0)
                continue;
            size_t len = (size_t)(off[i + 1] - off[i]);
            if (len <= STRINGS_WIDE)
                memcpy(out + off[i], tab + to[c[i]], STRINGS_WIDE);
            else
                memcpy(out + off[i], tab + to[c[i]], len);
        }
        if (_PyBytes_Resize(&result, (Py_ssize_t)total) < 0)
            result = NULL; /* freed, MemoryError set */
    }
    free(tab);
done:
    while (held-- > 0)
        PyBuffer_Release(&v[held]);
    return result;
}

/* ---- a binary column of Python bytes ------------------------------------------- */

/* binary(items) -> (offsets, data, validity, nulls) or None: the Arrow binary
 * column of a list or tuple whose items are all exact bytes or None, in one
 * pass and one copy of each value (pyarrow's conversion, the reference in
 * api._binary, looks at each item's type and costs ~40 ns an item: a fifth
 * of decode_tables' cost per header-only envelope). offsets: int32[n + 1];
 * validity: the bitmap (LSB first), None when no item is None. None when an
 * item is anything else (bytearray, a bytes subclass, str...) or the values
 * pass Arrow's 2 GiB: the caller converts those with pyarrow, which knows
 * every input it takes. No Python code runs during the loops (no item is
 * called or converted), so the list cannot change under them. */
static PyObject *binary(PyObject *self, PyObject *arg) {
    (void)self;
    if (!PyList_CheckExact(arg) && !PyTuple_CheckExact(arg)) {
        PyErr_SetString(PyExc_TypeError, "binary: a list or a tuple");
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(arg), nulls = 0;
    PyObject **items = PySequence_Fast_ITEMS(arg);
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = items[i];
        if (it == Py_None)
            nulls++;
        else if (PyBytes_CheckExact(it))
            total += PyBytes_GET_SIZE(it);
        else
            Py_RETURN_NONE;
        if (total > INT32_MAX)
            Py_RETURN_NONE;
    }
    PyObject *offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * 4);
    PyObject *data = offsets ? PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total) : NULL;
    PyObject *validity = NULL;
    if (data && nulls)
        validity = PyBytes_FromStringAndSize(NULL, (n + 7) / 8);
    if (!data || (nulls && !validity)) {
        Py_XDECREF(offsets);
        Py_XDECREF(data);
        return NULL;
    }
    int32_t *off = (int32_t *)PyBytes_AS_STRING(offsets);
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(data);
    uint8_t *bits = validity ? (uint8_t *)PyBytes_AS_STRING(validity) : NULL;
    if (bits)
        memset(bits, 0, (size_t)(n + 7) / 8);
    int32_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = items[i];
        off[i] = at;
        if (it == Py_None)
            continue;
        Py_ssize_t len = PyBytes_GET_SIZE(it);
        memcpy(out + at, PyBytes_AS_STRING(it), (size_t)len);
        at += (int32_t)len;
        if (bits)
            bits[i >> 3] |= (uint8_t)(1u << (i & 7));
    }
    off[n] = at;
    if (!validity) {
        Py_INCREF(Py_None);
        validity = Py_None;
    }
    return Py_BuildValue("(NNNn)", offsets, data, validity, nulls); /* N: each one's ours */
}

/* ---- ReplicationResponse ------------------------------------------------------ */

/* The outputs grow without the GIL: lb_gb_put, no MemoryError set there. */
static int gb_i64(lb_gbuf *g, int64_t v) { return lb_gb_put(g, &v, 8); }
static int gb_i32(lb_gbuf *g, int32_t v) { return lb_gb_put(g, &v, 4); }

/* A field of a fixed layout: where, how wide, whether signed. */
typedef struct {
    long long off, width, sign;
} fld;

static int parse_fld(PyObject *t, fld *f) {
    if (!PyArg_ParseTuple(t, "LLL", &f->off, &f->width, &f->sign))
        return -1;
    if (f->off < 0 || f->off > 64 || f->width < 1 || f->width > 8) {
        PyErr_SetString(PyExc_ValueError, "replication: a field's offset or width is out of range");
        return -1;
    }
    return 0;
}

/* The integer of field f at p, as int64 (unsigned 64-bit wraps, as Spark's bigint). */
static inline int64_t rd(const uint8_t *p, fld f) {
    uint64_t u = lb_be(p + f.off, (int)f.width);
    if (f.sign && f.width < 8 && (u >> (8 * f.width - 1)) & 1)
        u |= ~0ull << (8 * f.width);
    return (int64_t)u;
}

/* Standard UTF-8, as Arrow validates it. */
static int utf8(const uint8_t *p, int64_t n) {
    int64_t i = 0;
    while (i < n) {
        uint8_t c = p[i];
        if (c < 0x80) {
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
        if (i + k >= n)
            return 0;
        for (int j = 1; j <= k; j++) {
            if ((p[i + j] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (p[i + j] & 0x3F);
        }
        if ((k == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += k + 1;
    }
    return 1;
}

enum { E_OFFSET, E_TIMESTAMP, E_EPOCH, E_SIZE, E_CRC, E_CRC_OK, E_MAGIC, E_ATTR, E_KEY_VALID,
       E_KEY_OFF, E_KEY, E_VAL_VALID, E_VAL_OFF, E_VAL, E_H_OFF, E_HK_OFF, E_HK, E_HV_OFF, E_HV,
       E_N };

typedef struct {
    fld epoch, hw, e_offset, e_ts, e_epoch, e_size, b_crc, b_magic, b_attr, b_klen, vlen, hcount,
        hklen, hvlen;
    long long prefix, ehead, bhead, body_min, nil, crc_skip, max_entries, max_headers;
} rr_layout;

/* Lengths of the growable outputs, to cut a payload's entries off again. */
typedef struct {
    size_t len[E_N];
} mark;

/* One payload's entries appended to g; 0 when it is left to lbparse
 * (then the caller cuts what was appended). */
static int rr_payload(const rr_layout *L, const uint8_t *d, int64_t pos, int64_t end, lb_gbuf *g,
                      uint32_t (*f)(const uint8_t *, size_t), int *nomem) {
    int64_t entries = 0;
    while (pos < end) {
        if (pos + L->ehead > end)
            return 0;
        int64_t size = rd(d + pos, L->e_size);
        int64_t body = pos + L->ehead, bend = body + size;
        if (size < 0 || size > end - body || size < L->body_min)
            return 0;
        int64_t klen = rd(d + body, L->b_klen);
        int64_t p = body + L->bhead;
        if (!(klen == L->nil || (klen >= 0 && klen <= bend - p)))
            return 0;
        int64_t kstart = p;
        p += klen > 0 ? klen : 0;
        if (p + L->vlen.width > bend)
            return 0;
        int64_t vlen = rd(d + p, L->vlen);
        p += L->vlen.width;
        if (!(vlen == L->nil || (vlen >= 0 && vlen <= bend - p)))
            return 0;
        int64_t vstart = p;
        p += vlen > 0 ? vlen : 0;
        if (p + L->hcount.width > bend)
            return 0;
        int64_t hcount = rd(d + p, L->hcount);
        p += L->hcount.width;
        if (hcount < 0)
            hcount = 0;
        if (hcount >= L->max_headers)
            return 0;
        for (int64_t j = 0; j < hcount; j++) {
            if (p + L->hklen.width > bend)
                return 0;
            int64_t hk = rd(d + p, L->hklen);
            int64_t ks = p + L->hklen.width;
            if (hk < 0 || hk > bend - ks - L->hvlen.width)
                return 0;
            int64_t hv = rd(d + ks + hk, L->hvlen);
            int64_t vs = ks + hk + L->hvlen.width;
            if (hv < 0 || hv > bend - vs)
                return 0;
            if (!utf8(d + ks, hk))
                return 0;
            if (lb_gb_put(&g[E_HK], d + ks, (size_t)hk) || gb_i32(&g[E_HK_OFF], (int32_t)g[E_HK].len) ||
                lb_gb_put(&g[E_HV], d + vs, (size_t)hv) || gb_i32(&g[E_HV_OFF], (int32_t)g[E_HV].len))
                goto nomem;
            p = vs + hv;
        }
        if (p != bend)
            return 0; /* bytes after the headers: unusual, left to lbparse */
        int64_t crc_v = rd(d + body, L->b_crc);
        uint8_t ok = (int64_t)f(d + body + L->crc_skip, (size_t)(bend - body - L->crc_skip)) ==
                     crc_v;
        uint8_t kv = klen != L->nil, vv = vlen != L->nil;
        if (gb_i64(&g[E_OFFSET], rd(d + pos, L->e_offset)) ||
            gb_i64(&g[E_TIMESTAMP], rd(d + pos, L->e_ts)) ||
            gb_i64(&g[E_EPOCH], rd(d + pos, L->e_epoch)) || gb_i64(&g[E_SIZE], size) ||
            gb_i64(&g[E_CRC], crc_v) || lb_gb_put(&g[E_CRC_OK], &ok, 1) ||
            gb_i32(&g[E_MAGIC], (int32_t)rd(d + body, L->b_magic)) ||
            gb_i32(&g[E_ATTR], (int32_t)rd(d + body, L->b_attr)) ||
            lb_gb_put(&g[E_KEY_VALID], &kv, 1) ||
            (kv && lb_gb_put(&g[E_KEY], d + kstart, (size_t)klen)) ||
            gb_i32(&g[E_KEY_OFF], (int32_t)g[E_KEY].len) || lb_gb_put(&g[E_VAL_VALID], &vv, 1) ||
            (vv && lb_gb_put(&g[E_VAL], d + vstart, (size_t)vlen)) ||
            gb_i32(&g[E_VAL_OFF], (int32_t)g[E_VAL].len) ||
            gb_i32(&g[E_H_OFF], (int32_t)(g[E_HK_OFF].len / 4 - 1)))
            goto nomem;
        pos = bend;
        if (++entries == L->max_entries)
            return 0; /* as many as the numpy walk's steps: left to lbparse */
    }
    return 1;
nomem:
    *nomem = 1;
    return 0;
}

static int parse_layout(PyObject *spec, rr_layout *L) {
    PyObject *f[14];
    if (!PyArg_ParseTuple(spec, "(OO)(OOOO)(OOOO)OOOOLLLLLLLL:replication layout", &f[0], &f[1],
                          &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9], &f[10], &f[11],
                          &f[12], &f[13], &L->prefix, &L->ehead, &L->bhead, &L->body_min, &L->nil,
                          &L->crc_skip, &L->max_entries, &L->max_headers))
        return -1;
    fld *dst[] = {&L->epoch, &L->hw, &L->e_offset, &L->e_ts, &L->e_epoch, &L->e_size,
                  &L->b_crc, &L->b_magic, &L->b_attr, &L->b_klen, &L->vlen, &L->hcount,
                  &L->hklen, &L->hvlen};
    for (int j = 0; j < 14; j++)
        if (parse_fld(f[j], dst[j]) < 0)
            return -1;
    /* every fixed field inside its part, the body's head inside the shortest body */
    if (L->epoch.off + L->epoch.width > L->prefix || L->hw.off + L->hw.width > L->prefix ||
        L->e_offset.off + L->e_offset.width > L->ehead || L->e_ts.off + L->e_ts.width > L->ehead ||
        L->e_epoch.off + L->e_epoch.width > L->ehead || L->e_size.off + L->e_size.width > L->ehead ||
        L->b_crc.off + L->b_crc.width > L->bhead || L->b_magic.off + L->b_magic.width > L->bhead ||
        L->b_attr.off + L->b_attr.width > L->bhead || L->b_klen.off + L->b_klen.width > L->bhead ||
        L->body_min < L->bhead || L->crc_skip < 0 || L->crc_skip > L->body_min ||
        L->vlen.off || L->hcount.off || L->hklen.off || L->hvlen.off) {
        PyErr_SetString(PyExc_ValueError, "replication: the layout's fields do not fit its parts");
        return -1;
    }
    return 0;
}

/* What one replication pass made: the payloads' four columns (ok, epoch,
 * hw, e_off) and the entries' (E_*), as rr_walk leaves them. */
typedef struct {
    lb_gbuf pay[4];
    lb_gbuf g[E_N];
    Py_ssize_t k;
} rr_out;

static void rr_free(rr_out *r) {
    for (int j = 0; j < E_N; j++)
        lb_gb_free(&r->g[j]);
    for (int j = 0; j < 4; j++)
        lb_gb_free(&r->pay[j]);
}

/* The walk: every payload of (data, starts, ends) into r
 * (zeroed by the caller); 0, or -1 with an exception set. */
static int rr_walk(PyObject *const *o, PyObject *spec, int portable, rr_out *r) {
    rr_layout L;
    if (parse_layout(spec, &L) < 0)
        return -1;
    uint32_t (*f)(const uint8_t *, size_t) = portable ? crc_soft : crc;
    Py_buffer v[3];
    int held = 0, rc = -1;
    static const char *names[] = {"data", "starts", "ends"};
    lb_gbuf *g = r->g, *pay = r->pay;
    for (; held < 3; held++)
        if (contiguous(o[held], &v[held], PyBUF_SIMPLE, names[held]) < 0)
            goto done;
    Py_ssize_t k = v[1].len / 8;
    if (v[1].len % 8 || v[2].len != v[1].len) {
        PyErr_SetString(PyExc_ValueError, "replication: starts and ends need k int64 each");
        goto done;
    }
    r->k = k;
    const int64_t *s = v[1].buf, *e = v[2].buf;
    const uint8_t *d = v[0].buf;
    if (check_ranges(s, e, k, v[0].len) < 0)
        goto done;
    int nomem = 0;
    if (gb_i32(&g[E_KEY_OFF], 0) || gb_i32(&g[E_VAL_OFF], 0) || gb_i32(&g[E_H_OFF], 0) ||
        gb_i32(&g[E_HK_OFF], 0) || gb_i32(&g[E_HV_OFF], 0))
        nomem = 1;
    /* A row's four payload values go straight into buffers sized once: the
     * commonest payload of an idle cluster is the 16-byte header-only one,
     * whose whole cost these puts and the entries' marks were. */
    if (lb_gb_room(&pay[0], (size_t)k + 1) || lb_gb_room(&pay[1], (size_t)k * 8 + 8) ||
        lb_gb_room(&pay[2], (size_t)k * 8 + 8) || lb_gb_room(&pay[3], (size_t)k * 4 + 4))
        nomem = 1;
    uint8_t *okv = pay[0].p;
    int64_t *epv = (int64_t *)(void *)pay[1].p, *hwv = (int64_t *)(void *)pay[2].p;
    int32_t *eoff = (int32_t *)(void *)pay[3].p;
    Py_BEGIN_ALLOW_THREADS
    if (!nomem)
        eoff[0] = 0;
    for (Py_ssize_t i = 0; i < k && !nomem; i++) {
        int64_t len = e[i] - s[i];
        uint8_t ok = len >= L.prefix;
        int64_t ep = ok ? rd(d + s[i], L.epoch) : 0, hw = ok ? rd(d + s[i], L.hw) : 0;
        if (ok && len > L.prefix) { /* entries: cut again if the payload is left to lbparse */
            mark m;
            for (int j = 0; j < E_N; j++)
                m.len[j] = g[j].len;
            ok = (uint8_t)rr_payload(&L, d, s[i] + L.prefix, e[i], g, f, &nomem);
            if (!ok)
                for (int j = 0; j < E_N; j++)
                    g[j].len = m.len[j];
        }
        okv[i] = ok;
        epv[i] = ep;
        hwv[i] = hw;
        eoff[i + 1] = (int32_t)(g[E_OFFSET].len / 8);
    }
    Py_END_ALLOW_THREADS
    if (nomem) {
        PyErr_NoMemory();
        goto done;
    }
    pay[0].len = (size_t)k;
    pay[1].len = pay[2].len = (size_t)k * 8;
    pay[3].len = (size_t)k * 4 + 4;
    if (g[E_KEY].len > INT32_MAX || g[E_VAL].len > INT32_MAX || g[E_HK].len > INT32_MAX ||
        g[E_HV].len > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "replication: a column passed 2 GiB in one batch");
        goto done;
    }
    rc = 0;
done:
    while (held-- > 0)
        PyBuffer_Release(&v[held]);
    return rc;
}

/* The column of a walk as an Arrow struct array, through the C data interface
 * (lb_arrow.h): its buffers handed over, not copied. The fields' order is
 * the caller's type's: top[] names, for each field of the struct, which of
 * (leader epoch, high watermark, entries) it is; entry[] the same of an
 * entry's fields in E_* order of the eleven columns (offset, timestamp,
 * leader epoch, size, crc32c, crc_ok, magic, attributes, key, value,
 * headers); header[] of a header's (key, value). */
enum { R_EPOCH, R_HW, R_ENTRIES };
enum { F_OFFSET, F_TIMESTAMP, F_EPOCH, F_SIZE, F_CRC, F_CRC_OK, F_MAGIC, F_ATTR, F_KEY, F_VALUE,
       F_HEADERS, F_N };

/* A binary or string child: offsets and bytes, with its validity when some is null. */
static int rr_bytes(struct ArrowArray *a, int64_t n, lb_gbuf *valid, lb_gbuf *off, lb_gbuf *data) {
    int64_t nulls = 0;
    if (valid)
        for (size_t i = 0; i < valid->len; i++)
            nulls += !valid->p[i];
    if (lb_arrow_init(a, n, nulls, 3, 0) < 0)
        return -1;
    if (nulls) {
        uint8_t *bits = lb_arrow_bitmap(valid->p, valid->len);
        if (!bits)
            return -1;
        lb_arrow_own(a, 0, bits);
    }
    lb_arrow_own(a, 1, lb_gb_detach(off));
    lb_arrow_own(a, 2, lb_gb_detach(data));
    return 0;
}

static int rr_fixed(struct ArrowArray *a, int64_t n, lb_gbuf *values) {
    if (lb_arrow_init(a, n, 0, 2, 0) < 0)
        return -1;
    lb_arrow_own(a, 1, lb_gb_detach(values));
    return 0;
}

static int rr_export(rr_out *r, const int *top, const int *entry, const int *header,
                     struct ArrowArray *a) {
    lb_gbuf *g = r->g, *pay = r->pay;
    int64_t k = r->k, m = (int64_t)(g[E_OFFSET].len / 8), nh = (int64_t)(g[E_HK_OFF].len / 4) - 1;
    int64_t bad = 0;
    for (int64_t i = 0; i < k; i++)
        bad += !pay[0].p[i];
    if (lb_arrow_init(a, k, bad, 1, 3) < 0)
        return -1;
    if (bad) { /* a payload left to lbparse: a null row */
        uint8_t *bits = lb_arrow_bitmap(pay[0].p, (size_t)k);
        if (!bits)
            return -1;
        lb_arrow_own(a, 0, bits);
    }
    for (int t = 0; t < 3; t++) {
        struct ArrowArray *c = a->children[t];
        if (top[t] == R_EPOCH || top[t] == R_HW) {
            if (rr_fixed(c, k, &pay[top[t] == R_EPOCH ? 1 : 2]) < 0)
                return -1;
            continue;
        }
        if (lb_arrow_init(c, k, 0, 2, 1) < 0)
            return -1;
        lb_arrow_own(c, 1, lb_gb_detach(&pay[3]));
        struct ArrowArray *es = c->children[0];
        if (lb_arrow_init(es, m, 0, 1, F_N) < 0)
            return -1;
        for (int j = 0; j < F_N; j++) {
            struct ArrowArray *x = es->children[j];
            int rc = 0;
            switch (entry[j]) {
            case F_OFFSET:
            case F_TIMESTAMP:
            case F_EPOCH:
            case F_SIZE:
            case F_CRC:
            case F_MAGIC:
            case F_ATTR: {
                static const int col[] = {E_OFFSET, E_TIMESTAMP, E_EPOCH, E_SIZE, E_CRC, 0,
                                          E_MAGIC, E_ATTR};
                rc = rr_fixed(x, m, &g[col[entry[j]]]);
                break;
            }
            case F_CRC_OK: {
                if ((rc = lb_arrow_init(x, m, 0, 2, 0)) < 0)
                    break;
                uint8_t *bits = lb_arrow_bitmap(g[E_CRC_OK].p, g[E_CRC_OK].len);
                if (!bits)
                    return -1;
                lb_arrow_own(x, 1, bits);
                break;
            }
            case F_KEY:
                rc = rr_bytes(x, m, &g[E_KEY_VALID], &g[E_KEY_OFF], &g[E_KEY]);
                break;
            case F_VALUE:
                rc = rr_bytes(x, m, &g[E_VAL_VALID], &g[E_VAL_OFF], &g[E_VAL]);
                break;
            default: { /* F_HEADERS */
                if ((rc = lb_arrow_init(x, m, 0, 2, 1)) < 0)
                    break;
                lb_arrow_own(x, 1, lb_gb_detach(&g[E_H_OFF]));
                struct ArrowArray *hs = x->children[0];
                if ((rc = lb_arrow_init(hs, nh, 0, 1, 2)) < 0)
                    break;
                for (int h = 0; h < 2 && rc == 0; h++)
                    rc = header[h] == 0
                             ? rr_bytes(hs->children[h], nh, NULL, &g[E_HK_OFF], &g[E_HK])
                             : rr_bytes(hs->children[h], nh, NULL, &g[E_HV_OFF], &g[E_HV]);
            }
            }
            if (rc < 0)
                return -1;
        }
    }
    return 0;
}

/* The orders of replication's fields: a permutation of 0..n-1 each. */
static int parse_order(PyObject *t, int *out, int n) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != n)
        goto bad;
    int seen = 0;
    for (int i = 0; i < n; i++) {
        long v = PyLong_AsLong(PyTuple_GET_ITEM(t, i));
        if (v < 0 || v >= n || (seen >> v) & 1)
            goto bad;
        seen |= 1 << v;
        out[i] = (int)v;
    }
    return 0;
bad:
    if (!PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "replication: an order is %d distinct codes", n);
    return -1;
}

/* replication(data, starts, ends, layout, (top, entry, header)[, portable])
 * -> (ok, address): commitscan.decode_replication's walk (its numpy code is
 * the reference): every payload's entries and their headers, each entry's
 * CRC-32C checked, into one Arrow struct column, a struct ArrowArray at
 * `address` that the caller imports with its type (pa.Array._import_from_c)
 * and gives back to drop(); the orders say which of the type's fields each
 * column is (see rr_export). A payload left to lbparse is a null row with
 * no entries (ok 0). */
static PyObject *replication(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[3], *spec, *orders;
    int portable = 0;
    if (!PyArg_ParseTuple(args, "OOOOO|p:replication", &o[0], &o[1], &o[2], &spec, &orders,
                          &portable))
        return NULL;
    int top[3], entry[F_N], header[2];
    if (!PyTuple_Check(orders) || PyTuple_GET_SIZE(orders) != 3) {
        PyErr_SetString(PyExc_ValueError, "replication: (top, entry, header) orders");
        return NULL;
    }
    if (parse_order(PyTuple_GET_ITEM(orders, 0), top, 3) < 0 ||
        parse_order(PyTuple_GET_ITEM(orders, 1), entry, F_N) < 0 ||
        parse_order(PyTuple_GET_ITEM(orders, 2), header, 2) < 0)
        return NULL;
    rr_out r;
    memset(&r, 0, sizeof r);
    PyObject *result = NULL;
    if (rr_walk(o, spec, portable, &r) < 0)
        goto done;
    PyObject *ok = PyBytes_FromStringAndSize(r.pay[0].p ? (const char *)r.pay[0].p : "",
                                             (Py_ssize_t)r.pay[0].len);
    if (!ok)
        goto done;
    struct ArrowArray *array = calloc(1, sizeof *array);
    if (!array || rr_export(&r, top, entry, header, array) < 0) {
        lb_arrow_drop(array);
        Py_DECREF(ok);
        PyErr_NoMemory();
        goto done;
    }
    result = Py_BuildValue("(NK)", ok, (unsigned long long)(uintptr_t)array);
    if (!result)
        lb_arrow_drop(array);
done:
    rr_free(&r);
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
    {"headers", headers, METH_VARARGS,
     "headers(data, starts, ends, todo, spec, known, verify_crc, lens, magic, version, hl, "
     "flags, byte7, crc, has_crc, take, crc_ok): every row's envelope header and CRC."},
    {"group", group, METH_VARARGS,
     "group(codes, ncodes, order, bounds) -> grouped: the rows by code, a counting sort."},
    {"strings", strings, METH_VARARGS,
     "strings(codes, table_offsets, table_data, offsets) -> data: an Arrow string column "
     "of codes into a table of strings (-1: null)."},
    {"binary", binary, METH_O,
     "binary(items) -> (offsets, data, validity, nulls) or None: an Arrow binary column of "
     "a list or tuple of bytes and None (None: another item, for pyarrow)."},
    {"replication", replication, METH_VARARGS,
     "replication(data, starts, ends, layout, orders[, portable]) -> (ok, address): "
     "ReplicationResponse payloads as one Arrow struct column (C data interface)."},
    {"drop", lb_arrow_drop_py, METH_O, "drop(address): free an array replication made"},
    {"implementation", implementation, METH_NOARGS,
     "implementation(): which CRC code this CPU runs: 'sse4.2' or 'slicing-by-8'."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernels",
                                    "The pipeline's per-byte loops in C (see _kernels.c).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__kernels(void) {
    lb_crc_tables(table, LB_CRC32C_POLY);
#ifdef LB_CRC32C_HW
    if (lb_crc32c_has_hw())
        crc = lb_crc32c_hw;
#endif
    return PyModule_Create(&module);
}
