/*
 * CRC-32C (Castagnoli) of many byte ranges of one buffer, in one call.
 *
 * The pipeline checks the CRC of every envelope of an Arrow batch. Calling
 * crc32c.crc32c once per row costs about 0.4 us a row, nearly all of it the
 * Python call and the slice; here the whole batch is one call, the GIL is
 * released, and x86-64 CPUs with SSE 4.2 use their crc32 instruction.
 *
 *   ranges(data, starts, ends, out[, portable])
 *     data:   any contiguous buffer (the batch's Arrow data buffer)
 *     starts, ends: contiguous int64 buffers of equal length
 *     out:    a writable contiguous uint32 buffer of that length
 *   out[i] = crc32c(data[starts[i]:ends[i]]); a range outside data, or with
 *   end < start, raises ValueError naming it (nothing is read out of bounds).
 *   portable=True uses the table-driven code even where the CPU has crc32
 *   (so that tests check both on any machine).
 *
 * lbparse/pipeline/crc.py is the Python side: it falls back to crc32c.crc32c
 * per row when this module is not built, and tests/test_crc_ranges.py holds
 * the two equal.
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
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < 0 || e[i] < s[i] || e[i] > data.len) {
            PyErr_Format(PyExc_ValueError,
                         "ranges: range %zd is [%lld, %lld), outside the %zd bytes of data",
                         i, (long long)s[i], (long long)e[i], data.len);
            goto fail;
        }
    }
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

static PyObject *implementation(PyObject *self, PyObject *unused) {
    return PyUnicode_FromString(crc == crc_soft ? "slicing-by-8" : "sse4.2");
}

static PyMethodDef methods[] = {
    {"ranges", ranges, METH_VARARGS,
     "ranges(data, starts, ends, out[, portable]): out[i] = CRC-32C of data[starts[i]:ends[i]]."},
    {"implementation", implementation, METH_NOARGS,
     "implementation(): which CRC code this CPU runs: 'sse4.2' or 'slicing-by-8'."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_crc32c_ranges",
                                    "CRC-32C of many ranges of one buffer (see crc.py).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__crc32c_ranges(void) {
    make_tables();
#ifdef HAVE_HW
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2"))
        crc = crc_hw;
#endif
    return PyModule_Create(&module);
}
