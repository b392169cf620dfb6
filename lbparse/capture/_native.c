/*
 * The capture loop in C: pcap/pcapng records, link layers, TCP reassembly
 * and NATS framing, straight into the columns of the pipeline's record
 * batches (lbparse/capture/native_batches.py wraps them as Arrow arrays).
 *
 * This is a port of the Python reference (pcap.py, pcapng.py, linktypes.py,
 * tcp.py, nats.py and the packet loop of reader.py), rule for rule and in
 * the same order of events: the same records, the same notices (as problem
 * rows, with the same messages) in the same order. tests/capture/test_native_capture.py
 * holds the two equal on every shared capture, every damaged capture, the
 * real cluster capture and hypothesis-made streams. When the reference
 * changes, this file changes with it: the differential tests are the contract.
 *
 * Safety: every read of input is bounds-checked against the bytes actually
 * held (never a length field); memory follows the bytes read, as in the
 * reference (records up to max_record, a message up to max_frame, segments
 * behind a hole up to max_reassembly). The rare paths (notice messages,
 * non-ASCII names, IPv6 endpoints, size fields that are not plain digits)
 * call the Python runtime, so that their text is Python's own.
 *
 * Reader(path, name, max_frame, max_reassembly, rules)
 *   rules: the loop's limits, named as in RULES below, each read from the
 *   Python reference's constant when the reader is made (native_batches.rules());
 *   one outside the range this file takes is a ValueError.
 *   .next_batch(max_rows, max_bytes) -> tuple of column buffers, or None at
 *   the end; a file that cannot be read raises CaptureError (through the
 *   `raise_error` callable given to configure()), after the rows before it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "lb_gbuf.h"

#define HALF (1u << 31)

/* ---- the loop's limits, handed over by the reference --------------------- */
/* Each is the Python constant named in lbparse/capture/native_batches.py's rules(),
 * read when a Reader is made, so that the two loops cannot disagree (a test
 * that lowers one lowers it for both). The ranges are what this file's
 * arithmetic takes (int64 and uint32 sums, 2 * max_flows). */
typedef struct {
    int64_t block;                /* pcap.BLOCK: bytes per read */
    int64_t max_record;           /* pcap.MAX_RECORD */
    int64_t min_max_record;       /* pcap.MIN_MAX_RECORD */
    int64_t max_line;             /* nats.MAX_LINE */
    int64_t max_pending_segments; /* tcp.MAX_PENDING_SEGMENTS */
    int64_t max_flows;            /* reader.MAX_FLOWS */
    int64_t max_connect_bytes;    /* connects.MAX_CONNECT_BYTES */
} rules;

static const struct {
    const char *name;
    size_t at;
    int64_t lo, hi;
} RULES[] = {
    {"block", offsetof(rules, block), 16, 1 << 30},
    {"max_record", offsetof(rules, max_record), 16, 1 << 30},
    {"min_max_record", offsetof(rules, min_max_record), 16, 1 << 30},
    {"max_line", offsetof(rules, max_line), 1, 1 << 30},
    {"max_pending_segments", offsetof(rules, max_pending_segments), 0, 1 << 24},
    {"max_flows", offsetof(rules, max_flows), 0, 1 << 30},
    {"max_connect_bytes", offsetof(rules, max_connect_bytes), 0, 1 << 30},
};
#define N_RULES (sizeof RULES / sizeof RULES[0])

/* `rules` (a dict of exactly RULES' names to ints in their ranges) into *out. */
static int parse_rules(PyObject *d, rules *out) {
    if (!PyDict_Check(d) || PyDict_Size(d) != (Py_ssize_t)N_RULES) {
        PyErr_Format(PyExc_TypeError, "rules: a dict of the %d limits is needed", (int)N_RULES);
        return -1;
    }
    for (size_t k = 0; k < N_RULES; k++) {
        PyObject *v = PyDict_GetItemString(d, RULES[k].name); /* borrowed */
        if (!v || !PyLong_Check(v)) {
            PyErr_Format(PyExc_TypeError, "rules: %s needs an int", RULES[k].name);
            return -1;
        }
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred())
            return -1;
        if (overflow || x < RULES[k].lo || x > RULES[k].hi) {
            PyErr_Format(PyExc_ValueError, "rules: %s %R is outside %lld..%lld, what the C loop takes",
                         RULES[k].name, v, (long long)RULES[k].lo, (long long)RULES[k].hi);
            return -1;
        }
        *(int64_t *)((char *)out + RULES[k].at) = (int64_t)x;
    }
    return 0;
}

/* ---- growable buffers: lb_gbuf (lbparse/_c/lb_gbuf.h) ------------------------ */

/* A Python object owning a malloc'd block: what a batch's columns are handed
 * out as (pyarrow wraps any buffer without a copy). */
typedef struct {
    PyObject_HEAD
    uint8_t *p;
    Py_ssize_t len;
} Block;

static void Block_dealloc(Block *b) {
    free(b->p);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static int Block_getbuffer(Block *b, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)b, b->p ? b->p : (uint8_t *)"", b->len, 1, flags);
}

static PyBufferProcs Block_as_buffer = {(getbufferproc)Block_getbuffer, NULL};

static PyTypeObject BlockType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "lbparse.capture._native.Block",
    .tp_basicsize = sizeof(Block),
    .tp_dealloc = (destructor)Block_dealloc,
    .tp_as_buffer = &Block_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Bytes of one column buffer (the buffer protocol, read-only).",
};

/* The bytes of g as a Block; g is left empty. */
static PyObject *gb_take(lb_gbuf *g) {
    Block *b = PyObject_New(Block, &BlockType);
    if (!b)
        return NULL;
    b->len = (Py_ssize_t)g->len;
    b->p = lb_gb_detach(g);
    return (PyObject *)b;
}

/* ---- columns --------------------------------------------------------------- */
typedef struct {
    lb_gbuf off;   /* int32 offsets, n + 1 of them */
    lb_gbuf data;
    lb_gbuf valid; /* one byte per row, packed into a bitmap at the end */
    Py_ssize_t nulls;
} varcol;

static int vc_init(varcol *c) {
    int32_t z = 0;
    c->off.len = c->data.len = c->valid.len = 0;
    c->nulls = 0;
    return lb_gb_put_py(&c->off, &z, 4);
}

static int vc_end(varcol *c, uint8_t valid) {
    if (c->data.len > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a column of one batch passed 2 GiB");
        return -1;
    }
    int32_t o = (int32_t)c->data.len;
    if (lb_gb_put_py(&c->off, &o, 4) < 0 || lb_gb_put_py(&c->valid, &valid, 1) < 0)
        return -1;
    c->nulls += !valid;
    return 0;
}

static int vc_null(varcol *c) { return vc_end(c, 0); }

static int vc_bytes(varcol *c, const uint8_t *s, Py_ssize_t n) {
    if (lb_gb_put_py(&c->data, s, (size_t)n) < 0)
        return -1;
    return vc_end(c, 1);
}

static int vc_cstr(varcol *c, const char *s) { return vc_bytes(c, (const uint8_t *)s, (Py_ssize_t)strlen(s)); }

static int put_utf8_of(varcol *c, PyObject *str) {
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(str, &n);
    if (u)
        return vc_bytes(c, (const uint8_t *)u, n);
    /* A str Arrow cannot hold as UTF-8 (lone surrogates from a file name). */
    PyErr_Clear();
    PyObject *b = PyUnicode_AsEncodedString(str, "utf-8", "backslashreplace");
    if (!b)
        return -1;
    int r = vc_bytes(c, (const uint8_t *)PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b));
    Py_DECREF(b);
    return r;
}

static int ascii(const uint8_t *s, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (s[i] >= 0x80)
            return 0;
    return 1;
}

/* bytes decoded as UTF-8 with errors="replace", as nats._name does. */
static PyObject *name_str(const uint8_t *s, Py_ssize_t n) {
    return PyUnicode_DecodeUTF8((const char *)s, n, "replace");
}

static int vc_name(varcol *c, const uint8_t *s, Py_ssize_t n) {
    if (ascii(s, n))
        return vc_bytes(c, s, n);
    PyObject *u = name_str(s, n);
    if (!u)
        return -1;
    int r = put_utf8_of(c, u);
    Py_DECREF(u);
    return r;
}

/* repr(bytes) */
static PyObject *brepr(const uint8_t *s, Py_ssize_t n) {
    PyObject *b = PyBytes_FromStringAndSize((const char *)s, n < 0 ? 0 : n);
    if (!b)
        return NULL;
    PyObject *r = PyObject_Repr(b);
    Py_DECREF(b);
    return r;
}

/* ---- NATS ------------------------------------------------------------------ */
enum { V_NONE = 0, V_PUB = 1, V_HPUB, V_MSG, V_HMSG };
static const char *VERB_NAME[] = {"", "PUB", "HPUB", "MSG", "HMSG"};
static const char *DIRECTION_NAME[] = {"", "client_to_server", "client_to_server",
                                       "server_to_client", "server_to_client"};
#define N_CONTROLS 8
static const char *CONTROL_NAME[N_CONTROLS] = {"INFO", "CONNECT", "SUB", "UNSUB", "PING",
                                               "PONG", "+OK", "-ERR"};
#define C_CONNECT 1                    /* CONTROL_NAME's index of CONNECT */

struct direction;

/* What a parser completed: a message (verb 1..4) or a problem (verb 0,
 * `text` its message, `limit` the limit's name or NULL). Byte pointers are
 * into memory that lives until the reader has turned the frame into a row:
 * the source block, or a buffer the reader keeps for the packet. */
typedef struct {
    int verb;
    struct direction *d;
    const uint8_t *subj, *reply, *sid, *hdr, *pay;
    Py_ssize_t subj_n, reply_n, sid_n, hdr_n, pay_n; /* -1: None */
    PyObject *text;
    const char *limit;
} frame;

typedef struct reader reader;

typedef struct {
    lb_gbuf rest;              /* a control line not yet ended by LF (rest + parts) */
    Py_ssize_t rest0;       /* the length of its first piece (nats: _rest) */
    int waiting;            /* a message line whose payload is still arriving */
    int w_verb;
    lb_gbuf w_subj, w_reply, w_sid;
    int w_has_reply, w_has_sid;
    Py_ssize_t w_hsize;
    lb_gbuf held;              /* the payload bytes that came so far */
    Py_ssize_t need;
    int resync, here;
    int64_t max_frame;
    int ending;             /* abandon's pass: the stream ends with the bytes parsed */
    int64_t ending_ts;      /* its time, for the messages it loses */
} parser;

/* ---- TCP ------------------------------------------------------------------- */
#define RETRANSMIT_WINDOW 4096      /* tcp.RETRANSMIT_WINDOW */

typedef struct {
    int64_t pos;
    uint8_t *data;
    Py_ssize_t len;
    int64_t missing;
} pending_seg;

typedef struct direction {
    char *src, *dst;          /* host:port, UTF-8 */
    int has_next;
    uint32_t next_seq;
    pending_seg *heap;        /* by pos: a heap, as tcp.py's order + pending */
    Py_ssize_t npending, cap_pending;
    int64_t pending_bytes, next_pos, max_pending;
    parser p;
    struct direction *peer;
    int has_ack;
    uint32_t ack;
    int closed;
    /* bytes a record claimed the capture cut right after next_seq: the next
     * segment's sequence number settles the claim (tcp.py's module doc) */
    int64_t cut;
    /* the last bytes delivered, to compare a retransmission with (tcp.py's
     * window): a ring of RETRANSMIT_WINDOW bytes, allocated at the first
     * byte, win_len of them held, the newest ending at win_end; told: a
     * retransmission that differed was reported (nothing more compared) */
    uint8_t *win;
    Py_ssize_t win_len, win_end;
    int told;
    struct conn *conn;
} direction;

typedef struct conn {
    direction d[2];
    int refs;                 /* keys of the flow table that point at it */
    int64_t mark;             /* a snapshot's number for it, while one is written */
    struct conn *next_free;
} conn;

/* ---- the flow table: an ordered dict of key -> direction ------------------- */
typedef struct {
    uint8_t key[36];
    uint8_t klen;             /* 0: deleted */
    direction *d;
    uint64_t hash;
} entry;

typedef struct {
    entry *entries;
    Py_ssize_t nentries, cap_entries, used;
    int64_t *index;           /* -1 empty, -2 deleted, else entry number */
    Py_ssize_t mask;          /* index size - 1 */
} flowtab;

/* ---- the reader -------------------------------------------------------------- */
/* A capture time: integer nanoseconds since the Unix epoch, as the Python
 * reader has it. TS_NONE: a time 64 bits do not hold (a damaged clock),
 * null in the output as there; INT64_MIN itself is NaT to numpy and pandas. */
typedef int64_t tsns;
#define TS_NONE INT64_MIN
#define NS_PER_S 1000000000LL

enum { K_GAP, K_INCOMPLETE, K_PROTOCOL, K_TRUNCATED, K_LIMIT, K_BAD_BLOCK, K_RETRANSMISSION,
       N_KINDS };
static const char *KIND_NAME[N_KINDS] = {"gap", "incomplete", "protocol", "truncated", "limit",
                                         "bad_block", "retransmission"};

typedef struct {
    int kind;
    PyObject *message;
    int has_ts;
    tsns ts;
    direction *d;             /* src and dst, or NULL */
    int64_t nbytes;
    int has_nbytes;
    const char *limit;
} notice;

typedef struct {
    /* source */
    FILE *f;
    int fmt;                  /* 1 pcap, 2 pcapng */
    lb_gbuf buf;              /* the file's bytes held: buf.p[0:buf.len] */
    int64_t base;
    size_t pos;
    int eof;
    int64_t bad_at;
    int started, finished_src;
    int64_t bytes_read;
    size_t block;
    /* pcap */
    int big;                  /* byte order */
    int64_t tick;             /* nanoseconds per unit of the fraction field */
    uint32_t linktype, snaplen, max_record, frac_limit;
    int64_t record_limit;     /* pcap.MAX_RECORD, for pcapng's blocks as well */
    /* pcapng */
    int ng_big;
    /* ts = units * num / den + offset_s seconds; den_inf: a unit finer than
     * 10^-47 s, nothing at all in 64 bits of units */
    struct { uint32_t linktype, snaplen; uint64_t num; unsigned __int128 den; int den_inf;
             int64_t offset_s; } *ifaces;
    Py_ssize_t nifaces, cap_ifaces;
} source;

struct reader {
    PyObject_HEAD
    source s;
    PyObject *name;           /* str: the file's name in messages */
    char *name_utf8;
    int64_t max_frame, max_reassembly;
    flowtab flows;
    conn *dead;               /* connections no key points at, freed after the packet */
    /* this packet's frames and notices */
    frame *frames;
    Py_ssize_t nframes, cap_frames;
    notice *notices;
    Py_ssize_t nnotices, cap_notices;
    lb_gbuf *keep;               /* buffers the frames point into */
    Py_ssize_t nkeep, cap_keep;
    tsns ts;
    uint8_t unsupported[65536 / 8];
    /* output */
    varcol src, dst, direction, verb, subject, reply, sid, hdr, payload, ekind, emsg;
    lb_gbuf ts_col, ts_valid;
    Py_ssize_t rows;
    /* stats */
    int64_t packets, skipped, gap_bytes, controls[N_CONTROLS], notice_counts[N_KINDS];
    int64_t limit_frame, limit_reassembly;
    int state;                /* 0 reading, 1 flows finished, 2 done */
    int count_only;           /* the index pass: rows counted, no columns built */
    int64_t total_rows;       /* rows so far in the whole file (positions) */
    int64_t flow_cap;         /* the table size at which idle connections are forgotten */
    rules rules;              /* the loop's limits (the reference's constants) */
    int64_t stop;             /* a range's end: the record offset to stop before, or -1 */
    PyObject *error;          /* a CaptureError to raise once its rows are out */
    /* packets(): the last packet read and not given (its time ends the reading) */
    lb_gbuf last;
    tsns last_ts;
    uint32_t last_lt;
    int64_t last_wirelen;
    int last_held;
    int oom_guard;
    /* CONNECT lines: [(src, text after the verb)], for the clients' names
     * (lbparse.capture.connects); bounded in bytes kept */
    PyObject *connects;
    Py_ssize_t connect_bytes;
};

static PyObject *capture_error = NULL; /* callable(kind, message, offset) -> exception */
static PyObject *endpoint_fn = NULL;   /* callable(addr bytes, port) -> str, for IPv6 */

/* ---- notices ------------------------------------------------------------------ */
static int out_notice(reader *r, notice *nt);

/* A notice the reference passes to on_notice at once (source, "!" frames). */
static int notice_now(reader *r, int kind, PyObject *msg, int has_ts, tsns ts, direction *d,
                      int has_nbytes, int64_t nbytes, const char *limit) {
    if (!msg)
        return -1;
    notice nt = {kind, msg, has_ts, ts, d, nbytes, has_nbytes, limit};
    int rc = out_notice(r, &nt);
    Py_DECREF(msg);
    return rc;
}

/* A notice the reference collects in the packet loop's list (tcp.py). */
static int notice_later(reader *r, int kind, PyObject *msg, tsns ts, direction *d,
                        int has_nbytes, int64_t nbytes, const char *limit) {
    if (!msg)
        return -1;
    if (r->nnotices == r->cap_notices) {
        Py_ssize_t c = r->cap_notices ? 2 * r->cap_notices : 16;
        notice *q = realloc(r->notices, (size_t)c * sizeof(notice));
        if (!q) {
            Py_DECREF(msg);
            PyErr_NoMemory();
            return -1;
        }
        r->notices = q;
        r->cap_notices = c;
    }
    notice nt = {kind, msg, 1, ts, d, nbytes, has_nbytes, limit};
    r->notices[r->nnotices++] = nt;
    return 0;
}

static int flush_notices(reader *r) {
    int rc = 0;
    for (Py_ssize_t i = 0; i < r->nnotices; i++) {
        if (rc == 0)
            rc = out_notice(r, &r->notices[i]);
        Py_DECREF(r->notices[i].message);
    }
    r->nnotices = 0;
    return rc;
}

/* ---- frames --------------------------------------------------------------------- */
static frame *new_frame(reader *r) {
    if (r->nframes == r->cap_frames) {
        Py_ssize_t c = r->cap_frames ? 2 * r->cap_frames : 64;
        frame *q = realloc(r->frames, (size_t)c * sizeof(frame));
        if (!q) {
            PyErr_NoMemory();
            return NULL;
        }
        r->frames = q;
        r->cap_frames = c;
    }
    frame *f = &r->frames[r->nframes++];
    memset(f, 0, sizeof(*f));
    f->reply_n = f->sid_n = f->hdr_n = -1;
    return f;
}

static void drop_frames(reader *r, Py_ssize_t from) {
    for (Py_ssize_t i = from; i < r->nframes; i++)
        Py_XDECREF(r->frames[i].text);
    r->nframes = from;
}

/* Keep a buffer alive until this packet's frames are rows; g is left empty. */
static const uint8_t *keep(reader *r, lb_gbuf *g) {
    if (r->nkeep == r->cap_keep) {
        Py_ssize_t c = r->cap_keep ? 2 * r->cap_keep : 8;
        lb_gbuf *q = realloc(r->keep, (size_t)c * sizeof(lb_gbuf));
        if (!q) {
            PyErr_NoMemory();
            return NULL;
        }
        r->keep = q;
        r->cap_keep = c;
    }
    r->keep[r->nkeep++] = *g;
    const uint8_t *p = lb_gb_detach(g);
    return p ? p : (const uint8_t *)"";
}

static void free_kept(reader *r) {
    for (Py_ssize_t i = 0; i < r->nkeep; i++)
        lb_gb_free(&r->keep[i]);
    r->nkeep = 0;
}

static int problem(reader *r, direction *d, PyObject *text, const char *limit) {
    if (!text)
        return -1;
    frame *f = new_frame(r);
    if (!f) {
        Py_DECREF(text);
        return -1;
    }
    f->verb = V_NONE;
    f->d = d;
    f->text = text;
    f->limit = limit;
    return 0;
}

/* ---- the NATS parser (nats.py) ------------------------------------------------- */
static void parser_init(parser *p, int resync, int64_t max_frame) {
    p->rest.len = 0;
    p->rest0 = 0;
    p->waiting = 0;
    p->held.len = 0;
    p->need = 0;
    p->resync = p->here = resync;
    p->max_frame = max_frame;
    p->w_subj.len = p->w_reply.len = p->w_sid.len = 0;
    p->ending = 0;
}

static void parser_free(parser *p) {
    lb_gb_free(&p->rest);
    lb_gb_free(&p->held);
    lb_gb_free(&p->w_subj);
    lb_gb_free(&p->w_reply);
    lb_gb_free(&p->w_sid);
}

static int parser_busy(const parser *p) { return p->waiting || p->rest0 > 0; }

static inline int is_space(uint8_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == 0x0b || c == 0x0c;
}

static inline uint8_t upper(uint8_t c) { return (c >= 'a' && c <= 'z') ? (uint8_t)(c - 32) : c; }

static const char *ALT[] = {"HPUB", "PUB", "HMSG", "MSG", "INFO", "CONNECT", "SUB", "UNSUB",
                            "PING", "PONG", "+OK", "-ERR"};

/* nats._ALT matches at q: a verb (any case) and then space, tab, CR or LF. */
static int alt_at(const uint8_t *b, Py_ssize_t n, Py_ssize_t q) {
    for (int k = 0; k < 12; k++) {
        Py_ssize_t m = (Py_ssize_t)strlen(ALT[k]);
        if (q + m >= n)
            continue;
        Py_ssize_t j = 0;
        while (j < m && upper(b[q + j]) == (uint8_t)ALT[k][j])
            j++;
        if (j == m) {
            uint8_t c = b[q + m];
            if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
                return 1;
        }
    }
    return 0;
}

/* _find_line: the offset of the next line starting with a verb, or -1. */
static Py_ssize_t find_line(parser *P, const uint8_t *b, Py_ssize_t n, Py_ssize_t p, int *err) {
    *err = 0;
    Py_ssize_t found = -1;
    if (P->here && alt_at(b, n, p))
        found = p;
    if (found < 0) {
        for (Py_ssize_t q = p; q < n; q++) {
            if (q > 0 && b[q - 1] == '\n' && alt_at(b, n, q)) {
                found = q;
                break;
            }
        }
    }
    if (found >= 0) {
        P->resync = P->here = 0;
        return found;
    }
    Py_ssize_t nl = -1;
    for (Py_ssize_t q = n - 1; q >= p; q--)
        if (b[q] == '\n') {
            nl = q;
            break;
        }
    if (nl >= 0 || P->here) {
        Py_ssize_t start = nl >= 0 ? nl + 1 : p;
        Py_ssize_t n_keep = n - start;
        if (n_keep && n_keep <= 16) {
            if (lb_gb_set_py(&P->rest, b + start, (size_t)n_keep) < 0) {
                *err = 1;
                return -1;
            }
            P->rest0 = n_keep;
            P->here = 1;
            return -1;
        }
        P->here = n_keep == 0;
        return -1;
    }
    return -1;
}

/* A size field: plain digits (1 to 18) read here, anything else by int(). */
typedef struct {
    int ok;            /* 0: ValueError */
    int big;           /* value did not fit: obj holds it */
    int64_t v;
    PyObject *obj;
} size_t_;

static int read_size(const uint8_t *s, Py_ssize_t n, size_t_ *out) {
    out->ok = 1;
    out->big = 0;
    out->obj = NULL;
    if (n > 0 && n <= 18) {
        int64_t v = 0;
        Py_ssize_t i = 0;
        for (; i < n; i++) {
            if (s[i] < '0' || s[i] > '9')
                break;
            v = v * 10 + (s[i] - '0');
        }
        if (i == n) {
            out->v = v;
            return 0;
        }
    }
    PyObject *b = PyBytes_FromStringAndSize((const char *)s, n);
    if (!b)
        return -1;
    PyObject *v = PyNumber_Long(b);
    Py_DECREF(b);
    if (!v) {
        if (!PyErr_ExceptionMatches(PyExc_ValueError))
            return -1;
        PyErr_Clear();
        out->ok = 0;
        return 0;
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred()) {
        Py_DECREF(v);
        return -1;
    }
    if (overflow) {
        out->big = 1;
        out->obj = v;
        out->v = overflow > 0 ? INT64_MAX : INT64_MIN;
        return 0;
    }
    Py_DECREF(v);
    out->v = x;
    return 0;
}

static PyObject *size_obj(const size_t_ *s) {
    if (s->big) {
        Py_INCREF(s->obj);
        return s->obj;
    }
    return PyLong_FromLongLong(s->v);
}

/* a < b for two sizes, exactly (Python ints when they are big). */
static int size_lt(const size_t_ *a, const size_t_ *b) {
    if (!a->big && !b->big)
        return a->v < b->v;
    PyObject *x = size_obj(a), *y = size_obj(b);
    int r = (x && y) ? PyObject_RichCompareBool(x, y, Py_LT) : -1;
    Py_XDECREF(x);
    Py_XDECREF(y);
    return r;
}

static int parse(reader *r, direction *d, const uint8_t *b, Py_ssize_t n, Py_ssize_t p);

typedef struct {
    Py_ssize_t s, n;
} span;

/* The waiting message's strings and payload start; see parse(). */
static int start_wait(parser *P, int verb, const uint8_t *b, span subj, span reply, span sid,
                      int64_t hsize, int64_t total, Py_ssize_t start, Py_ssize_t n) {
    P->waiting = 1;
    P->w_verb = verb;
    P->w_has_reply = reply.n >= 0;
    P->w_has_sid = sid.n >= 0;
    if (lb_gb_set_py(&P->w_subj, b + subj.s, (size_t)subj.n) < 0 ||
        lb_gb_set_py(&P->w_reply, reply.n >= 0 ? b + reply.s : b, reply.n >= 0 ? (size_t)reply.n : 0) < 0 ||
        lb_gb_set_py(&P->w_sid, sid.n >= 0 ? b + sid.s : b, sid.n >= 0 ? (size_t)sid.n : 0) < 0)
        return -1;
    P->w_hsize = (Py_ssize_t)hsize;
    P->need = (Py_ssize_t)total + 2;
    return lb_gb_set_py(&P->held, b + start, (size_t)(n - start));
}

/* nats._lost, as an "incomplete" notice of the packet. */
static int lost_here(reader *r, direction *d, int verb, const uint8_t *subj, Py_ssize_t subj_n,
                     Py_ssize_t have, int64_t total) {
    PyObject *nm = name_str(subj, subj_n);
    if (!nm)
        return -1;
    PyObject *desc = PyUnicode_FromFormat("%s %U: %zd of %lld payload bytes arrived; message "
                                          "dropped", VERB_NAME[verb], nm, have, (long long)total);
    Py_DECREF(nm);
    return desc ? notice_later(r, K_INCOMPLETE, desc, d->p.ending_ts, d, 0, 0, NULL) : -1;
}

/* A client's CONNECT line: its source and the line's text after the verb,
 * kept until max_connect_bytes of text (a capture's connections start once). */
static int note_connect(reader *r, direction *d, const uint8_t *text, Py_ssize_t n) {
    if (r->connect_bytes + n > r->rules.max_connect_bytes)
        return 0;
    if (!r->connects && !(r->connects = PyList_New(0)))
        return -1;
    PyObject *item = Py_BuildValue("(sy#)", d->src, (const char *)text, n);
    if (!item || PyList_Append(r->connects, item) < 0) {
        Py_XDECREF(item);
        return -1;
    }
    Py_DECREF(item);
    r->connect_bytes += n;
    return 0;
}

static int parse(reader *r, direction *d, const uint8_t *b, Py_ssize_t n, Py_ssize_t p) {
    parser *P = &d->p;
    while (p < n) {
        if (P->resync) {
            int err;
            p = find_line(P, b, n, p, &err);
            if (err)
                return -1;
            if (p < 0)
                return 0;
        }
        /* A control line ends at its first LF, a CR before it dropped, as
         * nats-server reads it: finding it never looks past it. */
        const uint8_t *lf = memchr(b + p, '\n', (size_t)(n - p));
        Py_ssize_t e = lf ? lf - b : -1;
        Py_ssize_t le = (e > p && b[e - 1] == '\r') ? e - 1 : e;
        if (e < 0) {
            if (n - p > r->rules.max_line) {
                PyObject *rp = brepr(b + p, n - p < 40 ? n - p : 40);
                if (!rp)
                    return -1;
                if (problem(r, d, PyUnicode_FromFormat(
                        "%zd bytes without a line end where a control line was expected: %U",
                        n - p, rp), NULL) < 0) {
                    Py_DECREF(rp);
                    return -1;
                }
                Py_DECREF(rp);
                P->resync = 1;
                P->here = 0;
                p += 1;
                continue;
            }
            if (lb_gb_set_py(&P->rest, b + p, (size_t)(n - p)) < 0)
                return -1;
            P->rest0 = n - p;
            return 0;
        }
        /* Fields split on runs of whitespace (bytes.split()). */
        span parts[7];
        Py_ssize_t np = 0;
        for (Py_ssize_t q = p; q < le;) {
            while (q < le && is_space(b[q]))
                q++;
            if (q >= le)
                break;
            Py_ssize_t s0 = q;
            while (q < le && !is_space(b[q]))
                q++;
            if (np < 7)
                parts[np].s = s0, parts[np].n = q - s0;
            np++;
        }
        uint8_t v[8];
        Py_ssize_t vlen = np ? parts[0].n : 0;
        int vfits = vlen <= 7;
        if (vfits)
            memcpy(v, b + (np ? parts[0].s : p), (size_t)vlen);
        int verb = V_NONE;
        int failed = 0;
        size_t_ hsize = {1, 0, 0, NULL}, total = {1, 0, 0, NULL};
        span reply = {0, -1}, sid = {0, -1};
        for (int pass = 0; pass < 2; pass++) {
            int code = V_NONE;
            if (vfits) {
                if (vlen == 3 && !memcmp(v, "MSG", 3)) code = V_MSG;
                else if (vlen == 3 && !memcmp(v, "PUB", 3)) code = V_PUB;
                else if (vlen == 4 && !memcmp(v, "HMSG", 4)) code = V_HMSG;
                else if (vlen == 4 && !memcmp(v, "HPUB", 4)) code = V_HPUB;
            }
            int rc = 0;
            if (code == V_MSG && (np == 4 || np == 5)) {
                verb = V_MSG;
                rc = read_size(b + parts[np - 1].s, parts[np - 1].n, &total);
                sid = parts[2];
                if (np == 5)
                    reply = parts[3];
            } else if (code == V_PUB && (np == 3 || np == 4)) {
                verb = V_PUB;
                rc = read_size(b + parts[np - 1].s, parts[np - 1].n, &total);
                if (np == 4)
                    reply = parts[2];
            } else if (code == V_HMSG && (np == 5 || np == 6)) {
                verb = V_HMSG;
                sid = parts[2];
                rc = read_size(b + parts[np - 2].s, parts[np - 2].n, &hsize);
                if (rc == 0 && hsize.ok)
                    rc = read_size(b + parts[np - 1].s, parts[np - 1].n, &total);
                if (np == 6)
                    reply = parts[3];
            } else if (code == V_HPUB && (np == 4 || np == 5)) {
                verb = V_HPUB;
                rc = read_size(b + parts[np - 2].s, parts[np - 2].n, &hsize);
                if (rc == 0 && hsize.ok)
                    rc = read_size(b + parts[np - 1].s, parts[np - 1].n, &total);
                if (np == 5)
                    reply = parts[2];
            }
            if (rc < 0) {
                Py_XDECREF(hsize.obj);
                Py_XDECREF(total.obj);
                return -1;
            }
            if (verb != V_NONE && (!hsize.ok || !total.ok)) {
                failed = 1; /* ValueError: verb "?", total -1 */
                Py_XDECREF(hsize.obj);
                Py_XDECREF(total.obj);
                hsize = (size_t_){1, 0, 0, NULL};
                total = (size_t_){1, 0, -1, NULL};
            }
            if (verb == V_NONE && np && vfits && pass == 0) {
                /* a message verb in another case: a second pass */
                uint8_t u[8];
                int changed = 0;
                for (Py_ssize_t j = 0; j < vlen; j++) {
                    u[j] = upper(v[j]);
                    changed |= u[j] != v[j];
                }
                int msgverb = (vlen == 3 && (!memcmp(u, "MSG", 3) || !memcmp(u, "PUB", 3))) ||
                              (vlen == 4 && (!memcmp(u, "HMSG", 4) || !memcmp(u, "HPUB", 4)));
                if (changed && msgverb) {
                    memcpy(v, u, (size_t)vlen);
                    continue;
                }
            }
            break;
        }
        if (verb == V_NONE) {
            if (!np) {
                p = e + 1;
                continue;
            }
            /* _VERBS.get(v) or _VERBS.get(v.upper()) */
            int control = -1, msgverb = 0;
            if (vfits) {
                for (int up = 0; up < 2 && control < 0 && !msgverb; up++) {
                    uint8_t u[8];
                    for (Py_ssize_t j = 0; j < vlen; j++)
                        u[j] = up ? upper(v[j]) : v[j];
                    for (int k = 0; k < N_CONTROLS; k++)
                        if ((Py_ssize_t)strlen(CONTROL_NAME[k]) == vlen &&
                            !memcmp(u, CONTROL_NAME[k], (size_t)vlen))
                            control = k;
                    if (control < 0)
                        msgverb = (vlen == 3 && (!memcmp(u, "MSG", 3) || !memcmp(u, "PUB", 3))) ||
                                  (vlen == 4 && (!memcmp(u, "HMSG", 4) || !memcmp(u, "HPUB", 4)));
                }
            }
            if (control >= 0) {
                r->controls[control]++;
                if (control == C_CONNECT && np > 1 &&
                    note_connect(r, d, b + parts[1].s, le - parts[1].s) < 0)
                    return -1;
                p = e + 1;
                continue;
            }
            if (!msgverb) {
                Py_ssize_t len = le - p < 80 ? le - p : 80;
                PyObject *rp = brepr(b + p, len);
                if (!rp)
                    return -1;
                int rc = problem(r, d, PyUnicode_FromFormat("not a NATS control line: %U", rp),
                                 NULL);
                Py_DECREF(rp);
                if (rc < 0)
                    return -1;
                P->resync = P->here = 1;
                p = e + 1;
                continue;
            }
            total.v = -1; /* a message verb with the wrong number of fields */
        }
        (void)failed;
        /* not 0 <= hsize <= total <= max_frame */
        int inside = !hsize.big && !total.big && 0 <= hsize.v && hsize.v <= total.v &&
                     total.v <= P->max_frame;
        if (!inside) {
            int hs_gt_total = size_lt(&total, &hsize);
            if (hs_gt_total < 0) {
                Py_XDECREF(hsize.obj);
                Py_XDECREF(total.obj);
                return -1;
            }
            int neg = (total.big ? total.v < 0 : total.v < 0) || (hsize.big ? hsize.v < 0 : hsize.v < 0);
            PyObject *text;
            const char *limit = NULL;
            if (neg || hs_gt_total) {
                Py_ssize_t len = le - p < 80 ? le - p : 80;
                PyObject *rp = brepr(b + p, len);
                text = rp ? PyUnicode_FromFormat("malformed control line %U", rp) : NULL;
                Py_XDECREF(rp);
            } else {
                PyObject *nm = name_str(b + parts[1].s, parts[1].n < 80 ? parts[1].n : 80);
                PyObject *tot = size_obj(&total);
                text = (nm && tot) ? PyUnicode_FromFormat(
                    "%s %U declares %S bytes, over the limit of %lld (max_frame); resuming at "
                    "the next control line", VERB_NAME[verb], nm, tot, (long long)P->max_frame)
                    : NULL;
                Py_XDECREF(nm);
                Py_XDECREF(tot);
                limit = "max_frame";
            }
            Py_XDECREF(hsize.obj);
            Py_XDECREF(total.obj);
            if (problem(r, d, text, limit) < 0)
                return -1;
            P->resync = P->here = 1;
            p = e + 1;
            continue;
        }
        Py_ssize_t start = e + 1;
        Py_ssize_t end = start + (Py_ssize_t)total.v;
        if (end + 2 > n) {
            if (!P->ending)
                return start_wait(P, verb, b, parts[1], reply, sid, hsize.v, total.v, start, n);
            /* The stream ends here: this message is lost, and its payload
             * may hold the frames that followed a lying size. */
            if (lost_here(r, d, verb, b + parts[1].s, parts[1].n, n - start, total.v) < 0)
                return -1;
            P->resync = P->here = 1;
            p = start;
            continue;
        }
        if (b[end] != 13 || b[end + 1] != 10) {
            PyObject *rp = brepr(b + end, 2);
            if (!rp)
                return -1;
            int rc = problem(r, d, PyUnicode_FromFormat(
                "%s payload of %lld bytes not followed by CRLF (found %U); message dropped",
                VERB_NAME[verb], (long long)total.v, rp), NULL);
            Py_DECREF(rp);
            if (rc < 0)
                return -1;
            P->resync = P->here = 1;
            p = start;
            continue;
        }
        frame *f = new_frame(r);
        if (!f)
            return -1;
        f->verb = verb;
        f->d = d;
        f->subj = b + parts[1].s;
        f->subj_n = parts[1].n;
        if (reply.n >= 0)
            f->reply = b + reply.s, f->reply_n = reply.n;
        if (sid.n >= 0)
            f->sid = b + sid.s, f->sid_n = sid.n;
        if (verb == V_HPUB || verb == V_HMSG) {
            f->hdr = b + start;
            f->hdr_n = (Py_ssize_t)hsize.v;
            f->pay = b + start + hsize.v;
            f->pay_n = (Py_ssize_t)(total.v - hsize.v);
        } else {
            f->pay = b + start;
            f->pay_n = (Py_ssize_t)total.v;
        }
        p = end + 2;
    }
    return 0;
}

/* The bytes b (owned by the reader for this packet) parsed from p. */
static int feed(reader *r, direction *d, const uint8_t *data, Py_ssize_t len) {
    parser *P = &d->p;
    if (P->waiting) {
        if (lb_gb_put_py(&P->held, data, (size_t)len) < 0)
            return -1;
        if ((Py_ssize_t)P->held.len < P->need)
            return 0;
        Py_ssize_t n = (Py_ssize_t)P->held.len, need = P->need;
        int verb = P->w_verb;
        P->waiting = 0;
        const uint8_t *b = keep(r, &P->held);
        if (!b)
            return -1;
        if (b[need - 2] != '\r' || b[need - 1] != '\n') {
            PyObject *rp = brepr(b + need - 2, 2);
            if (!rp)
                return -1;
            int rc = problem(r, d, PyUnicode_FromFormat(
                "%s payload of %zd bytes not followed by CRLF (found %U); message dropped",
                VERB_NAME[verb], need - 2, rp), NULL);
            Py_DECREF(rp);
            if (rc < 0)
                return -1;
            P->resync = P->here = 1;
            return parse(r, d, b, n, 0);
        }
        frame *f = new_frame(r);
        if (!f)
            return -1;
        f->verb = verb;
        f->d = d;
        f->subj_n = (Py_ssize_t)P->w_subj.len;
        if (!(f->subj = keep(r, &P->w_subj)))
            return -1;
        if (P->w_has_reply) {
            f->reply_n = (Py_ssize_t)P->w_reply.len;
            if (!(f->reply = keep(r, &P->w_reply)))
                return -1;
        }
        if (P->w_has_sid) {
            f->sid_n = (Py_ssize_t)P->w_sid.len;
            if (!(f->sid = keep(r, &P->w_sid)))
                return -1;
        }
        Py_ssize_t hs = P->w_hsize;
        if (verb == V_HPUB || verb == V_HMSG) {
            f->hdr = b;
            f->hdr_n = hs;
            f->pay = b + hs;
            f->pay_n = need - 2 - hs;
        } else {
            f->pay = b;
            f->pay_n = need - 2;
        }
        return parse(r, d, b, n, need);
    }
    if (P->rest0 > 0) {
        if (!P->resync && !memchr(data, '\n', (size_t)len) &&
            (Py_ssize_t)P->rest.len + len <= r->rules.max_line)
            return lb_gb_put_py(&P->rest, data, (size_t)len); /* cannot end the line */
        if (lb_gb_put_py(&P->rest, data, (size_t)len) < 0)
            return -1;
        Py_ssize_t n = (Py_ssize_t)P->rest.len;
        P->rest0 = 0;
        const uint8_t *b = keep(r, &P->rest);
        if (!b)
            return -1;
        return parse(r, d, b, n, 0);
    }
    return parse(r, d, data, len, 0);
}

/* nats.NatsParser.abandon: describe what is half-read and give up on it;
 * its held bytes are parsed again as after a gap. Descriptions go to the
 * packet's notices as "incomplete". */
/* nats._describe: what is half-read, as an "incomplete" notice. */
static int describe(reader *r, direction *d, tsns ts) {
    parser *P = &d->p;
    PyObject *desc = NULL;
    if (P->waiting) {
        PyObject *subj = name_str(P->w_subj.p ? P->w_subj.p : (const uint8_t *)"",
                                  (Py_ssize_t)P->w_subj.len);
        if (!subj)
            return -1;
        desc = PyUnicode_FromFormat("%s %U: %zd of %zd payload bytes arrived; message dropped",
                                    VERB_NAME[P->w_verb], subj, (Py_ssize_t)P->held.len,
                                    P->need - 2);
        Py_DECREF(subj);
        if (!desc)
            return -1;
    } else if (P->rest0 > 0 && !P->resync) {
        PyObject *rp = brepr(P->rest.p, P->rest0 < 40 ? P->rest0 : 40);
        if (!rp)
            return -1;
        desc = PyUnicode_FromFormat("control line cut after %zd bytes: %U",
                                    (Py_ssize_t)P->rest.len, rp);
        Py_DECREF(rp);
        if (!desc)
            return -1;
    }
    if (desc && notice_later(r, K_INCOMPLETE, desc, ts, d, 0, 0, NULL) < 0)
        return -1;
    return 0;
}

static void reset_parser(parser *P) {
    P->held.len = 0;
    P->rest.len = 0;
    P->rest0 = 0;
    P->waiting = 0;
}

/* nats.NatsParser.abandon: describe what is half-read and give up on it.
 * Its held bytes are parsed again as after a gap, in one pass: a message
 * line among them whose payload runs past their end is lost right there,
 * and the pass goes on from its payload. Descriptions go to the packet's
 * notices as "incomplete". */
static int abandon(reader *r, direction *d, tsns ts) {
    parser *P = &d->p;
    if (describe(r, d, ts) < 0)
        return -1;
    int had = P->waiting && P->held.len > 0;
    Py_ssize_t n = (Py_ssize_t)P->held.len;
    const uint8_t *held = NULL;
    if (had && !(held = keep(r, &P->held)))
        return -1;
    reset_parser(P);
    if (!had)
        return 0;
    P->resync = P->here = 1; /* the payload started a line */
    P->ending = 1;
    P->ending_ts = ts;
    int rc = parse(r, d, held, n, 0);
    P->ending = 0;
    if (rc < 0 || describe(r, d, ts) < 0) /* a control line cut by the end */
        return -1;
    reset_parser(P);
    return 0;
}

/* ---- TCP (tcp.py) ----------------------------------------------------------------- */
static void heap_up(pending_seg *h, Py_ssize_t i) {
    while (i > 0) {
        Py_ssize_t up = (i - 1) / 2;
        if (h[up].pos <= h[i].pos)
            break;
        pending_seg t = h[up];
        h[up] = h[i];
        h[i] = t;
        i = up;
    }
}

static void heap_down(pending_seg *h, Py_ssize_t n, Py_ssize_t i) {
    for (;;) {
        Py_ssize_t l = 2 * i + 1, m = i;
        if (l < n && h[l].pos < h[m].pos)
            m = l;
        if (l + 1 < n && h[l + 1].pos < h[m].pos)
            m = l + 1;
        if (m == i)
            return;
        pending_seg t = h[m];
        h[m] = h[i];
        h[i] = t;
        i = m;
    }
}

static void clear_pending(direction *d) {
    for (Py_ssize_t i = 0; i < d->npending; i++)
        free(d->heap[i].data);
    d->npending = 0;
    d->pending_bytes = 0;
}

static int lose(reader *r, direction *d, int64_t nbytes, tsns ts, PyObject *why);

/* tcp.Direction.keep: `len` bytes were just delivered; the ring keeps the last. */
static int keep_window(direction *d, const uint8_t *data, Py_ssize_t len) {
    if (d->told || len == 0)
        return 0;
    if (!d->win && !(d->win = malloc(RETRANSMIT_WINDOW))) {
        PyErr_NoMemory();
        return -1;
    }
    if (len > RETRANSMIT_WINDOW) {
        data += len - RETRANSMIT_WINDOW;
        len = RETRANSMIT_WINDOW;
    }
    Py_ssize_t first = RETRANSMIT_WINDOW - d->win_end;
    if (first > len)
        first = len;
    memcpy(d->win + d->win_end, data, (size_t)first);
    memcpy(d->win, data + first, (size_t)(len - first));
    d->win_end = (d->win_end + len) % RETRANSMIT_WINDOW;
    d->win_len = d->win_len + len > RETRANSMIT_WINDOW ? RETRANSMIT_WINDOW : d->win_len + len;
    return 0;
}

/* The byte `back` (1..win_len) bytes behind next_seq. */
static inline uint8_t win_at(const direction *d, Py_ssize_t back) {
    return d->win[(d->win_end - back + RETRANSMIT_WINDOW) % RETRANSMIT_WINDOW];
}

/* tcp.Direction._compare: `data` starts `back` (> 0) bytes behind next_seq;
 * its bytes the window holds were delivered from another copy: a notice if
 * they differ, the first time in this direction. */
static int compare_window(reader *r, direction *d, int64_t back, const uint8_t *data,
                          Py_ssize_t len, tsns ts) {
    if (d->told)
        return 0;
    int64_t lo = back - d->win_len > 0 ? back - d->win_len : 0, hi = back < len ? back : len;
    if (lo >= hi)
        return 0;
    int64_t first = -1, differ = 0;
    for (int64_t i = lo; i < hi; i++)
        if (data[i] != win_at(d, (Py_ssize_t)(back - i))) {
            differ++;
            if (first < 0)
                first = i;
        }
    if (!differ)
        return 0;
    uint32_t seq = d->next_seq - (uint32_t)back;
    PyObject *msg = PyUnicode_FromFormat(
        "retransmitted bytes differ from those delivered: %lld of %lld bytes compared in a "
        "segment of %zd bytes at sequence %lu, the first at sequence %lu; the copy delivered "
        "first was kept (later retransmissions in this direction are not compared)",
        (long long)differ, (long long)(hi - lo), len, (unsigned long)seq,
        (unsigned long)(uint32_t)(seq + (uint32_t)first));
    d->told = 1;
    free(d->win);
    d->win = NULL;
    d->win_len = d->win_end = 0;
    return notice_later(r, K_RETRANSMISSION, msg, ts, d, 1, differ, NULL);
}

static int deliver(reader *r, direction *d, const uint8_t *data, Py_ssize_t len, int64_t missing,
                   tsns ts) {
    if (len) {
        if (feed(r, d, data, len) < 0)
            return -1;
        d->next_seq += (uint32_t)len;
        d->next_pos += len;
        if (keep_window(d, data, len) < 0)
            return -1;
    }
    if (missing)
        d->cut = missing; /* a claim: the next segment settles it */
    return 0;
}

#define CUT_WHY "the capture's snap length cut them off"

/* tcp._settle_cut: the next bytes seen start `ahead` bytes past next_seq: as
 * many of the claimed cut bytes as that are lost; none if it is 0. */
static int settle_cut(reader *r, direction *d, int64_t ahead, tsns ts) {
    int64_t cut = d->cut;
    d->cut = 0;
    if (0 < ahead && ahead <= cut)
        return lose(r, d, ahead, ts, PyUnicode_FromString(CUT_WHY));
    return 0;
}

static int drain(reader *r, direction *d, tsns ts) {
    while (d->npending) {
        if (d->cut && settle_cut(r, d, d->heap[0].pos - d->next_pos, ts) < 0)
            return -1;
        if (d->heap[0].pos > d->next_pos)
            break;
        pending_seg s = d->heap[0];
        d->heap[0] = d->heap[--d->npending];
        heap_down(d->heap, d->npending, 0);
        d->pending_bytes -= s.len;
        int64_t back = d->next_pos - s.pos;
        int rc = back > 0 ? compare_window(r, d, back, s.data, s.len, ts) : 0;
        if (rc == 0 && back < s.len)
            rc = deliver(r, d, s.data + back, s.len - (Py_ssize_t)back, s.missing, ts);
        else if (rc == 0 && back < s.len + s.missing)
            rc = deliver(r, d, NULL, 0, s.missing - (back - s.len), ts);
        /* The bytes delivered may be pointed at by frames: keep them for the packet. */
        lb_gbuf g = {s.data, (size_t)s.len, (size_t)s.len};
        if (!keep(r, &g)) {
            free(s.data);
            return -1;
        }
        if (rc < 0)
            return -1;
    }
    return 0;
}

static int lose(reader *r, direction *d, int64_t nbytes, tsns ts, PyObject *why) {
    d->cut = 0; /* a declared loss settles any claim */
    if (!why)
        return -1;
    PyObject *msg = PyUnicode_FromFormat(
        "%lld bytes missing at sequence %lu (%U); resuming at the next control line",
        (long long)nbytes, (unsigned long)d->next_seq, why);
    Py_DECREF(why);
    if (notice_later(r, K_GAP, msg, ts, d, 1, nbytes, NULL) < 0)
        return -1;
    if (abandon(r, d, ts) < 0)
        return -1;
    d->p.resync = d->p.here = 1; /* parser.gap(): nothing half-read is left */
    d->win_len = d->win_end = 0;   /* no longer right behind next_seq */
    d->next_seq += (uint32_t)nbytes;
    d->next_pos += nbytes;
    return 0;
}

static int finish(reader *r, direction *d, tsns ts) {
    while (d->npending) {
        if (lose(r, d, d->heap[0].pos - d->next_pos, ts,
                 PyUnicode_FromString("the stream ended without them")) < 0)
            return -1;
        if (drain(r, d, ts) < 0)
            return -1;
    }
    if (d->cut && lose(r, d, d->cut, ts, PyUnicode_FromString(CUT_WHY)) < 0)
        return -1;
    return abandon(r, d, ts);
}

static int syn(reader *r, direction *d, uint32_t seq, tsns ts) {
    if (d->has_next) {
        /* The same addresses and ports, a new connection: the old one's
         * frames are dropped, as tcp.Direction.syn drops them. */
        Py_ssize_t mark = r->nframes;
        if (finish(r, d, ts) < 0)
            return -1;
        drop_frames(r, mark);
    }
    d->has_next = 1;
    d->next_seq = seq + 1;
    parser_init(&d->p, 0, r->max_frame);
    d->closed = 0;
    d->cut = 0;
    d->win_len = d->win_end = 0;
    d->told = 0;
    return 0;
}

static int segment(reader *r, direction *d, uint32_t seq, const uint8_t *data, Py_ssize_t len,
                   int64_t missing, tsns ts) {
    if (!d->has_next) {
        d->has_next = 1;
        d->next_seq = seq;
        parser_init(&d->p, 1, r->max_frame);
    }
    if (d->cut && settle_cut(r, d, (int64_t)(uint32_t)(seq - d->next_seq), ts) < 0)
        return -1;
    uint32_t off = seq - d->next_seq;
    if (off >= HALF) {
        int64_t back = (int64_t)((1ull << 32) - off);
        if (compare_window(r, d, back, data, len, ts) < 0)
            return -1;
        if (back >= len + missing)
            return 0; /* a retransmission of bytes already delivered */
        if (back >= len) {
            missing -= back - len;
            len = 0;
        } else {
            data += back;
            len -= (Py_ssize_t)back;
        }
        off = 0;
    }
    if (off) {
        if (!d->npending)
            d->next_pos = 0;
        int64_t pos = d->next_pos + off;
        Py_ssize_t at = -1;
        for (Py_ssize_t i = 0; i < d->npending; i++)
            if (d->heap[i].pos == pos) {
                at = i;
                break;
            }
        if (at < 0 || d->heap[at].len + d->heap[at].missing < len + missing) {
            uint8_t *copy = malloc(len ? (size_t)len : 1);
            if (!copy) {
                PyErr_NoMemory();
                return -1;
            }
            if (len)
                memcpy(copy, data, (size_t)len);
            if (at < 0) {
                if (d->npending == d->cap_pending) {
                    Py_ssize_t c = d->cap_pending ? 2 * d->cap_pending : 8;
                    pending_seg *q = realloc(d->heap, (size_t)c * sizeof(pending_seg));
                    if (!q) {
                        free(copy);
                        PyErr_NoMemory();
                        return -1;
                    }
                    d->heap = q;
                    d->cap_pending = c;
                }
                d->heap[d->npending] = (pending_seg){pos, copy, len, missing};
                heap_up(d->heap, d->npending++);
                d->pending_bytes += len;
            } else {
                d->pending_bytes += len - d->heap[at].len;
                free(d->heap[at].data);
                d->heap[at].data = copy;
                d->heap[at].len = len;
                d->heap[at].missing = missing;
            }
        }
        PyObject *why;
        direction *peer = d->peer;
        uint32_t acked = peer->ack - d->next_seq;
        /* an ACK ahead of what was delivered, and at or past the segment */
        if (peer->has_ack && off <= acked && acked < HALF) {
            why = PyUnicode_FromString("the peer acknowledged them");
        } else if (d->pending_bytes > d->max_pending ||
                   d->npending > r->rules.max_pending_segments) {
            why = PyUnicode_FromFormat("%lld bytes waited behind them", (long long)d->pending_bytes);
            PyObject *msg = PyUnicode_FromFormat(
                "%lld bytes in %zd segments wait behind a hole at sequence %lu, over the limit "
                "of %lld bytes (max_reassembly) or %lld segments; the hole is declared lost",
                (long long)d->pending_bytes, d->npending, (unsigned long)d->next_seq,
                (long long)d->max_pending, (long long)r->rules.max_pending_segments);
            if (notice_later(r, K_LIMIT, msg, ts, d, 1, d->pending_bytes, "max_reassembly") < 0) {
                Py_XDECREF(why);
                return -1;
            }
        } else {
            return 0;
        }
        if (lose(r, d, d->heap[0].pos - d->next_pos, ts, why) < 0)
            return -1;
        return drain(r, d, ts);
    }
    if (deliver(r, d, data, len, missing, ts) < 0)
        return -1;
    if (d->npending)
        return drain(r, d, ts);
    return 0;
}

/* ---- the flow table ------------------------------------------------------------- */
static uint64_t key_hash(const uint8_t *k, int n) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++)
        h = (h ^ k[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static int ft_rebuild(flowtab *t, Py_ssize_t size) {
    /* compact the entries (insertion order kept) and index them anew */
    Py_ssize_t j = 0;
    for (Py_ssize_t i = 0; i < t->nentries; i++)
        if (t->entries[i].klen)
            t->entries[j++] = t->entries[i];
    t->nentries = j;
    int64_t *idx = malloc((size_t)size * sizeof(int64_t));
    if (!idx) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < size; i++)
        idx[i] = -1;
    free(t->index);
    t->index = idx;
    t->mask = size - 1;
    for (Py_ssize_t i = 0; i < t->nentries; i++) {
        Py_ssize_t s = (Py_ssize_t)(t->entries[i].hash & (uint64_t)t->mask);
        while (idx[s] != -1)
            s = (s + 1) & t->mask;
        idx[s] = i;
    }
    return 0;
}

/* The slot of key in the index, or -1 (with *free_slot where it would go). */
static Py_ssize_t ft_find(flowtab *t, const uint8_t *k, int n, uint64_t h) {
    if (!t->index)
        return -1;
    Py_ssize_t s = (Py_ssize_t)(h & (uint64_t)t->mask);
    for (;;) {
        int64_t e = t->index[s];
        if (e == -1)
            return -1;
        if (e >= 0) {
            entry *en = &t->entries[e];
            if (en->hash == h && en->klen == n && !memcmp(en->key, k, (size_t)n))
                return s;
        }
        s = (s + 1) & t->mask;
    }
}

static direction *ft_get(flowtab *t, const uint8_t *k, int n) {
    Py_ssize_t s = ft_find(t, k, n, key_hash(k, n));
    return s < 0 ? NULL : t->entries[t->index[s]].d;
}

static void conn_unref(reader *r, direction *d) {
    conn *c = d->conn;
    if (--c->refs == 0) {
        c->next_free = r->dead;
        r->dead = c;
    }
}

/* flows[key] = d (a new key goes last, an old one keeps its place). */
static int ft_set(reader *r, const uint8_t *k, int n, direction *d) {
    flowtab *t = &r->flows;
    uint64_t h = key_hash(k, n);
    Py_ssize_t s = ft_find(t, k, n, h);
    if (s >= 0) {
        entry *en = &t->entries[t->index[s]];
        d->conn->refs++;
        conn_unref(r, en->d);
        en->d = d;
        return 0;
    }
    if (t->nentries == t->cap_entries) {
        if (t->nentries && t->used <= t->nentries / 2) {
            if (ft_rebuild(t, t->mask + 1) < 0) /* compact: many were deleted */
                return -1;
        } else {
            Py_ssize_t c = t->cap_entries ? 2 * t->cap_entries : 64;
            entry *q = realloc(t->entries, (size_t)c * sizeof(entry));
            if (!q) {
                PyErr_NoMemory();
                return -1;
            }
            t->entries = q;
            t->cap_entries = c;
        }
    }
    /* Fewer than half the slots in use, deleted ones included: probes end. */
    if (!t->index || 2 * (t->nentries + 1) > t->mask + 1) {
        Py_ssize_t size = 64;
        while (size < 4 * (t->nentries + 1))
            size *= 2;
        if (ft_rebuild(t, size) < 0)
            return -1;
    }
    entry *en = &t->entries[t->nentries];
    memcpy(en->key, k, (size_t)n);
    en->klen = (uint8_t)n;
    en->hash = h;
    en->d = d;
    d->conn->refs++;
    Py_ssize_t slot = (Py_ssize_t)(h & (uint64_t)t->mask);
    while (t->index[slot] >= 0)
        slot = (slot + 1) & t->mask;
    t->index[slot] = t->nentries++;
    t->used++;
    return 0;
}

static void ft_pop(reader *r, const uint8_t *k, int n) {
    flowtab *t = &r->flows;
    Py_ssize_t s = ft_find(t, k, n, key_hash(k, n));
    if (s < 0)
        return;
    entry *en = &t->entries[t->index[s]];
    en->klen = 0;
    conn_unref(r, en->d);
    en->d = NULL;
    t->index[s] = -2;
    t->used--;
}

static void reverse_key(const uint8_t *k, int n, uint8_t *out) {
    int half = (n - 4) / 2;
    memcpy(out, k + half, (size_t)half);
    memcpy(out + half, k, (size_t)half);
    out[2 * half] = k[n - 2];
    out[2 * half + 1] = k[n - 1];
    out[2 * half + 2] = k[n - 4];
    out[2 * half + 3] = k[n - 3];
}

static void drop_flow(reader *r, const uint8_t *k, int n) {
    uint8_t rk[36];
    reverse_key(k, n, rk);
    ft_pop(r, k, n);
    ft_pop(r, rk, n);
}

static int idle(const direction *d) {
    return !d->npending && !parser_busy(&d->p) && !d->peer->npending && !parser_busy(&d->peer->p);
}

static int forget_idle(reader *r) {
    flowtab *t = &r->flows;
    Py_ssize_t nidle = 0;
    for (Py_ssize_t i = 0; i < t->nentries; i++)
        if (t->entries[i].klen && idle(t->entries[i].d))
            nidle++;
    uint8_t (*keys)[37] = malloc((size_t)(nidle ? nidle : 1) * 37);
    if (!keys) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t j = 0;
    for (Py_ssize_t i = 0; i < t->nentries; i++)
        if (t->entries[i].klen && idle(t->entries[i].d)) {
            keys[j][0] = t->entries[i].klen;
            memcpy(keys[j] + 1, t->entries[i].key, t->entries[i].klen);
            j++;
        }
    for (Py_ssize_t i = 0; i < nidle / 2; i++)
        drop_flow(r, keys[i] + 1, keys[i][0]);
    free(keys);
    return 0;
}

static char *endpoint(const uint8_t *addr, int alen, int port) {
    char buf[64];
    if (alen == 4) {
        snprintf(buf, sizeof buf, "%d.%d.%d.%d:%d", addr[0], addr[1], addr[2], addr[3], port);
        return strdup(buf);
    }
    PyObject *s = PyObject_CallFunction(endpoint_fn, "y#i", (const char *)addr, (Py_ssize_t)alen, port);
    if (!s)
        return NULL;
    const char *u = PyUnicode_AsUTF8(s);
    char *out = u ? strdup(u) : NULL;
    Py_DECREF(s);
    if (u && !out)
        PyErr_NoMemory();
    return out;
}

static void free_conn(conn *c) {
    for (int i = 0; i < 2; i++) {
        direction *d = &c->d[i];
        free(d->src);
        free(d->dst);
        clear_pending(d);
        free(d->heap);
        free(d->win);
        parser_free(&d->p);
    }
    free(c);
}

static direction *new_flow(reader *r, const uint8_t *k, int n) {
    if (r->flows.used >= r->flow_cap) {
        /* scanned once per doubling: busy connections cannot be forgotten */
        if (forget_idle(r) < 0)
            return NULL;
        int64_t least = 2 * r->rules.max_flows;
        r->flow_cap = r->flows.used > r->rules.max_flows ? 2 * (int64_t)r->flows.used : least;
    }
    conn *c = calloc(1, sizeof(conn));
    if (!c) {
        PyErr_NoMemory();
        return NULL;
    }
    int half = (n - 4) / 2;
    int sport = k[n - 4] << 8 | k[n - 3], dport = k[n - 2] << 8 | k[n - 1];
    char *src = endpoint(k, half, sport);
    char *dst = src ? endpoint(k + half, half, dport) : NULL;
    if (!src || !dst || !(c->d[0].src = src) || !(c->d[0].dst = dst) ||
        !(c->d[1].src = strdup(dst)) || !(c->d[1].dst = strdup(src))) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        if (!c->d[0].src)
            free(src);
        if (!c->d[0].dst)
            free(dst);
        free_conn(c);
        return NULL;
    }
    for (int i = 0; i < 2; i++) {
        direction *d = &c->d[i];
        d->max_pending = r->max_reassembly;
        d->peer = &c->d[1 - i];
        d->conn = c;
        parser_init(&d->p, 0, r->max_frame);
    }
    /* No key points at it yet: until one does, it is on the dead list's
     * terms (refs 0); ft_set counts the keys. */
    uint8_t rk[36];
    reverse_key(k, n, rk);
    if (ft_set(r, k, n, &c->d[0]) < 0 || ft_set(r, rk, n, &c->d[1]) < 0) {
        if (c->refs == 0)
            free_conn(c);
        return NULL;
    }
    return &c->d[0];
}

/* ---- output rows ------------------------------------------------------------------ */
static int put_ts(reader *r, int has, tsns ts) {
    uint8_t v = (uint8_t)(has && ts != TS_NONE);
    int64_t ns = v ? ts : 0;
    if (lb_gb_put_py(&r->ts_col, &ns, 8) < 0 || lb_gb_put_py(&r->ts_valid, &v, 1) < 0)
        return -1;
    return 0;
}

static int out_notice(reader *r, notice *nt) {
    r->notice_counts[nt->kind]++;
    if (nt->limit) {
        if (!strcmp(nt->limit, "max_frame"))
            r->limit_frame++;
        else
            r->limit_reassembly++;
    }
    if (nt->kind == K_GAP && nt->has_nbytes && nt->nbytes)
        r->gap_bytes += nt->nbytes;
    r->total_rows++;
    if (r->count_only)
        return 0;
    char kind[32];
    snprintf(kind, sizeof kind, "input:%s", KIND_NAME[nt->kind]);
    PyObject *msg;
    if (nt->d && nt->d->src[0])
        msg = PyUnicode_FromFormat("%U: %s: %s -> %s: %U", r->name, KIND_NAME[nt->kind],
                                   nt->d->src, nt->d->dst, nt->message);
    else
        msg = PyUnicode_FromFormat("%U: %s: %U", r->name, KIND_NAME[nt->kind], nt->message);
    if (!msg)
        return -1;
    int rc = put_ts(r, nt->has_ts, nt->ts);
    if (!rc)
        rc = nt->d ? vc_cstr(&r->src, nt->d->src) : vc_null(&r->src);
    if (!rc)
        rc = nt->d ? vc_cstr(&r->dst, nt->d->dst) : vc_null(&r->dst);
    if (!rc)
        rc = vc_null(&r->direction) || vc_null(&r->verb) || vc_null(&r->subject) ||
             vc_null(&r->reply) || vc_null(&r->sid) || vc_null(&r->hdr) ||
             vc_null(&r->payload) || vc_cstr(&r->ekind, kind) || put_utf8_of(&r->emsg, msg);
    Py_DECREF(msg);
    if (rc)
        return -1;
    r->rows++;
    return 0;
}

static int out_frame(reader *r, frame *f) {
    direction *d = f->d;
    if (f->verb == V_NONE) {
        PyObject *t = f->text;
        f->text = NULL;
        return notice_now(r, f->limit ? K_LIMIT : K_PROTOCOL, t, 1, r->ts, d, 0, 0, f->limit);
    }
    r->total_rows++;
    if (r->count_only)
        return 0;
    if (put_ts(r, 1, r->ts) || vc_cstr(&r->src, d->src) || vc_cstr(&r->dst, d->dst) ||
        vc_cstr(&r->direction, DIRECTION_NAME[f->verb]) || vc_cstr(&r->verb, VERB_NAME[f->verb]) ||
        vc_name(&r->subject, f->subj, f->subj_n) ||
        (f->reply_n < 0 ? vc_null(&r->reply) : vc_name(&r->reply, f->reply, f->reply_n)) ||
        (f->sid_n < 0 ? vc_null(&r->sid) : vc_name(&r->sid, f->sid, f->sid_n)) ||
        (f->hdr_n < 0 ? vc_null(&r->hdr) : vc_bytes(&r->hdr, f->hdr, f->hdr_n)) ||
        vc_bytes(&r->payload, f->pay, f->pay_n) || vc_null(&r->ekind) || vc_null(&r->emsg))
        return -1;
    r->rows++;
    return 0;
}

static int out_frames(reader *r, Py_ssize_t from, Py_ssize_t to) {
    int rc = 0;
    for (Py_ssize_t i = from; i < to && rc == 0; i++)
        rc = out_frame(r, &r->frames[i]);
    return rc;
}

/* ---- sources (pcap.py, pcapng.py) --------------------------------------------------- */
static inline uint32_t rd32(const uint8_t *p, int big) {
    return big ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
               : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

static inline uint16_t rd16(const uint8_t *p, int big) {
    return big ? (uint16_t)(p[0] << 8 | p[1]) : (uint16_t)(p[1] << 8 | p[0]);
}

/* The file's bytes up to buf[target] (fewer at its end), read from buf[at]
 * on; returns how many were read, -1 on error. */
static int64_t fill(source *s, size_t at, size_t target) {
    if (lb_gb_room_py(&s->buf, target) < 0)
        return -1;
    size_t got = 0;
    while (at + got < target) {
        size_t k = fread(s->buf.p + at + got, 1, target - at - got, s->f);
        if (k == 0) {
            if (ferror(s->f)) {
                PyErr_SetFromErrno(PyExc_OSError);
                return -1;
            }
            break;
        }
        got += k;
    }
    return (int64_t)got;
}

/* pcap.read_more reads whole blocks until it has `need` bytes (one block at
 * least): how many bytes that is. */
static size_t blocks_for(source *s, size_t need) {
    size_t k = need ? (need + s->block - 1) / s->block : 1;
    return k * s->block;
}

/* pcap.refill: the bytes from buf[pos] on, at least `need` of them if the
 * file has them, read in the reference's whole blocks from that offset (so
 * that bytes_read, the progress count, moves as the reference's does). */
static int refill(source *s, size_t need) {
    size_t kept = s->buf.len - s->pos;
    s->base += (int64_t)s->pos;
    if (kept)
        memmove(s->buf.p, s->buf.p + s->pos, kept);
    s->pos = 0;
    size_t target = blocks_for(s, need > kept + 1 ? need : kept + 1);
    int64_t got = fill(s, kept, target);
    if (got < 0)
        return -1;
    s->buf.len = kept + (size_t)got;
    s->eof = got == 0;
    return 0;
}

static PyObject *make_error(const char *kind, PyObject *msg, int64_t offset) {
    if (!msg)
        return NULL;
    PyObject *e = PyObject_CallFunction(capture_error, "sOL", kind, msg, (long long)offset);
    Py_DECREF(msg);
    return e;
}

static int src_notice(reader *r, int kind, PyObject *msg, int has_nbytes, int64_t nbytes) {
    return notice_now(r, kind, msg, 0, 0.0, NULL, has_nbytes, nbytes, NULL);
}

static int skipped(reader *r, int64_t start, int64_t end) {
    return src_notice(r, K_BAD_BLOCK, PyUnicode_FromFormat(
        "%U: skipped %lld damaged bytes from offset %lld to %lld", r->name,
        (long long)(end - start), (long long)start, (long long)end), 1, end - start);
}

typedef struct {
    tsns ts;
    uint32_t lt;
    const uint8_t *p;  /* the packet's bytes */
    int64_t caplen, wirelen;
} packet;

static int pcap_plausible(source *s, const uint8_t *q) {
    uint32_t frac = rd32(q + 4, s->big), incl = rd32(q + 8, s->big), orig = rd32(q + 12, s->big);
    if (frac >= s->frac_limit || incl > s->max_record || orig < incl)
        return -1;
    return (int)incl;
}

/* pcap._after_damage: in the file's last bytes (buf[pos:n], all there is),
 * the first non-empty plausible record followed by another or ending the
 * file exactly, or -1. Stricter than the resync: runs of zeros in a cut
 * packet read as empty records. */
static int64_t pcap_after_damage(source *s, size_t pos, size_t n) {
    for (size_t q = pos; q + 16 <= n; q++) {
        int incl = pcap_plausible(s, s->buf.p + q);
        if (incl <= 0)
            continue;
        size_t nxt = q + 16 + (size_t)incl;
        if (nxt == n || (nxt + 16 <= n && pcap_plausible(s, s->buf.p + nxt) > 0))
            return (int64_t)q;
    }
    return -1;
}

/* pcap._resync: (offset, 0) found, else (offset to keep from, bytes needed). */
static void pcap_resync(source *s, size_t *pos, size_t *need) {
    size_t n = s->buf.len;
    for (size_t q = *pos; q + 16 <= n; q++) {
        int incl = pcap_plausible(s, s->buf.p + q);
        if (incl < 0)
            continue;
        size_t nxt = q + 16 + (size_t)incl;
        if (nxt + 16 > n) {
            if (!s->eof) {
                *pos = q;
                *need = nxt + 16 - q;
                return;
            }
            if (nxt == n) {
                *pos = q;
                *need = 0;
                return;
            }
            continue;
        }
        if (pcap_plausible(s, s->buf.p + nxt) >= 0) {
            *pos = q;
            *need = 0;
            return;
        }
    }
    size_t keep_from = n >= 15 ? n - 15 : 0;
    *pos = *pos > keep_from ? *pos : keep_from;
    *need = 16;
}

/* The next packet: 1, 0 at the end, -1 on error. */
static int pcap_next(reader *r, packet *pk) {
    source *s = &r->s;
    for (;;) {
        size_t n = s->buf.len, need = 16;
        if (s->bad_at >= 0) {
            size_t pos = s->pos;
            pcap_resync(s, &pos, &need);
            s->pos = pos;
            if (need == 0) {
                if (skipped(r, s->bad_at, s->base + (int64_t)s->pos) < 0)
                    return -1;
                s->bad_at = -1;
            } else if (s->eof) {
                if (skipped(r, s->bad_at, s->base + (int64_t)n) < 0)
                    return -1;
                s->bytes_read = s->base + (int64_t)n;
                return 0;
            }
        }
        if (s->bad_at < 0) {
            uint32_t incl = 0;
            if (r->stop >= 0 && s->base + (int64_t)s->pos >= r->stop)
                return 2; /* the end of this range: the next one goes on from here */
            if (s->pos + 16 <= n) {
                const uint8_t *h = s->buf.p + s->pos;
                incl = rd32(h + 8, s->big);
                size_t end = s->pos + 16 + (size_t)incl;
                if (!(end > n || incl > s->max_record)) {
                    /* 32-bit seconds in ns and a fraction below 10^9 ns: no overflow */
                    pk->ts = (int64_t)rd32(h, s->big) * NS_PER_S +
                             (int64_t)rd32(h + 4, s->big) * s->tick;
                    pk->lt = s->linktype;
                    pk->p = h + 16;
                    pk->caplen = incl;
                    pk->wirelen = rd32(h + 12, s->big);
                    s->pos = end;
                    return 1;
                }
            }
            if (incl > s->max_record) {
                s->bad_at = s->base + (int64_t)s->pos;
                if (src_notice(r, K_BAD_BLOCK, PyUnicode_FromFormat(
                        "%U: packet record at offset %lld claims %lu bytes, more than its snap "
                        "length allows (%lu): the file is damaged here; looking for the next "
                        "plausible record", r->name, (long long)s->bad_at, (unsigned long)incl,
                        (unsigned long)s->max_record), 0, 0) < 0)
                    return -1;
                s->pos += 1;
                continue;
            }
            need = 16 + (size_t)incl;
            if (s->eof) {
                int64_t q = s->pos + 16 <= n ? pcap_after_damage(s, s->pos + 1, n) : -1;
                if (q >= 0) {
                    /* A length that runs past the end, with records after it:
                     * damage, not a file cut short. */
                    int64_t at = s->base + (int64_t)s->pos;
                    if (src_notice(r, K_BAD_BLOCK, PyUnicode_FromFormat(
                            "%U: packet record at offset %lld claims %lu bytes, past the end "
                            "of the file at %lld, and records follow it: the file is damaged "
                            "here; reading on at the next plausible record", r->name,
                            (long long)at, (unsigned long)incl,
                            (long long)(s->base + (int64_t)n)), 0, 0) < 0 ||
                        skipped(r, at, s->base + q) < 0)
                        return -1;
                    s->pos = (size_t)q;
                    continue;
                }
                if (s->pos < n) {
                    int64_t have = (int64_t)(n - s->pos);
                    PyObject *what = have < 16 ? PyUnicode_FromString("a packet header")
                        : PyUnicode_FromFormat("a packet of %lu bytes (%lld present)",
                                               (unsigned long)incl, (long long)(have - 16));
                    if (!what)
                        return -1;
                    PyObject *m = PyUnicode_FromFormat(
                        "%U: file ends at offset %lld inside %U; the partial packet is skipped",
                        r->name, (long long)(s->base + (int64_t)s->pos + have), what);
                    Py_DECREF(what);
                    if (src_notice(r, K_TRUNCATED, m, 1, have) < 0)
                        return -1;
                }
                s->bytes_read = s->base + (int64_t)n;
                return 0;
            }
        }
        s->bytes_read = s->base + (int64_t)s->pos;
        if (refill(s, need) < 0)
            return -1;
    }
}

#define SHB 0x0A0D0D0Au
#define IDB 1u
#define OPB 2u
#define SPB 3u
#define EPB 6u

static uint32_t min_len(uint32_t t) {
    switch (t) {
    case SHB: return 28;
    case IDB: return 20;
    case OPB: return 32;
    case SPB: return 16;
    case EPB: return 32;
    default: return 12;
    }
}

static int known_block(uint32_t t) {
    return t == SHB || t == IDB || t == OPB || t == SPB || t == 4 || t == 5 || t == EPB ||
           t == 9 || t == 0xA || t == 0xB || t == 0xBAD || t == 0x40000BAD;
}

static void ng_resync(source *s, size_t *pos, size_t *need) {
    size_t n = s->buf.len;
    for (size_t q = *pos; q + 12 <= n; q++) {
        const uint8_t *h = s->buf.p + q;
        uint32_t btype = rd32(h, s->ng_big), blen;
        int tail_big;
        if (btype == SHB) {
            if (!memcmp(h + 8, "\x4d\x3c\x2b\x1a", 4))
                tail_big = 0;
            else if (!memcmp(h + 8, "\x1a\x2b\x3c\x4d", 4))
                tail_big = 1;
            else
                continue;
            blen = rd32(h + 4, tail_big);
        } else if (known_block(btype)) {
            tail_big = s->ng_big;
            blen = rd32(h + 4, s->ng_big);
        } else {
            continue;
        }
        if (blen < 12 || blen % 4 || blen > s->record_limit)
            continue;
        if (q + blen > n) {
            if (s->eof)
                continue;
            *pos = q;
            *need = blen;
            return;
        }
        if (rd32(h + blen - 4, tail_big) == blen) {
            *pos = q;
            *need = 0;
            return;
        }
    }
    size_t keep_from = n >= 11 ? n - 11 : 0;
    *pos = *pos > keep_from ? *pos : keep_from;
    *need = 12;
}

static int ng_damaged(reader *r, int64_t offset, uint32_t btype, PyObject *what) {
    if (!what)
        return -1;
    PyObject *m = PyUnicode_FromFormat("%U: block of type 0x%x at offset %lld %U: the file is "
                                       "damaged here; looking for the next block", r->name,
                                       (unsigned)btype, (long long)offset, what);
    Py_DECREF(what);
    return src_notice(r, K_BAD_BLOCK, m, 0, 0);
}

static int ng_bad(reader *r, uint32_t btype, int64_t offset, PyObject *what) {
    if (!what)
        return -1;
    PyObject *m = PyUnicode_FromFormat("%U: block of type %lu at offset %lld: %U; the block is "
                                       "skipped", r->name, (unsigned long)btype,
                                       (long long)offset, what);
    Py_DECREF(what);
    return src_notice(r, K_BAD_BLOCK, m, 0, 0);
}

/* if_tsresol as nanoseconds per unit, num / den exactly (pcapng.py _tsresol):
 * a negative power of two with the high bit, else of ten. */
static void tsresol(uint8_t v, uint64_t *num, unsigned __int128 *den, int *den_inf) {
    *num = 1, *den = 1, *den_inf = 0;
    if (v & 0x80) {
        *num = NS_PER_S;
        *den = (unsigned __int128)1 << (v & 0x7F);
        return;
    }
    int e = v < 60 ? v : 60;
    if (e <= 9) {
        for (int i = e; i < 9; i++)
            *num *= 10;
    } else if (e - 9 > 38) {
        *den_inf = 1; /* 10^39 > any 64-bit count of units: the quotient is 0 */
    } else {
        for (int i = 9; i < e; i++)
            *den *= 10;
    }
}

/* units * num / den + offset_s seconds, as Python's exact integers, or TS_NONE. */
static tsns pcapng_ts(uint64_t units, uint64_t num, unsigned __int128 den, int den_inf,
                      int64_t offset_s) {
    unsigned __int128 q = den_inf ? 0 : (unsigned __int128)units * num / den;
    __int128 v = (__int128)q + (__int128)offset_s * NS_PER_S;
    return (v <= (__int128)INT64_MIN || v > (__int128)INT64_MAX) ? TS_NONE : (tsns)v;
}

static int ng_interface(source *s, const uint8_t *h, uint32_t blen) {
    int big = s->ng_big;
    uint32_t lt = rd16(h + 8, big), snap = rd32(h + 12, big);
    uint64_t num;
    unsigned __int128 den;
    int den_inf;
    int64_t offset = 0;
    tsresol(6, &num, &den, &den_inf); /* microseconds unless said otherwise */
    size_t p = 16, end = blen - 4;
    while (p + 4 <= end) {
        uint16_t code = rd16(h + p, big), olen = rd16(h + p + 2, big);
        if (code == 0)
            break;
        if (code == 9 && olen >= 1)
            tsresol(h[p + 4], &num, &den, &den_inf);
        else if (code == 14 && olen >= 8 && p + 12 <= end) {
            uint64_t lo = rd32(h + p + 4, big), hi = rd32(h + p + 8, big);
            offset = (int64_t)(big ? (lo << 32 | hi) : (hi << 32 | lo));
        }
        p += 4 + ((size_t)olen + 3) / 4 * 4;
    }
    if (s->nifaces == s->cap_ifaces) {
        Py_ssize_t c = s->cap_ifaces ? 2 * s->cap_ifaces : 4;
        void *q = realloc(s->ifaces, (size_t)c * sizeof(*s->ifaces));
        if (!q) {
            PyErr_NoMemory();
            return -1;
        }
        s->ifaces = q;
        s->cap_ifaces = c;
    }
    s->ifaces[s->nifaces].linktype = lt;
    s->ifaces[s->nifaces].snaplen = snap;
    s->ifaces[s->nifaces].num = num;
    s->ifaces[s->nifaces].den = den;
    s->ifaces[s->nifaces].den_inf = den_inf;
    s->ifaces[s->nifaces].offset_s = offset;
    s->nifaces++;
    return 0;
}

static int pcapng_next(reader *r, packet *pk) {
    source *s = &r->s;
    for (;;) {
        size_t n = s->buf.len, need = 12;
        if (s->bad_at >= 0) {
            size_t pos = s->pos;
            ng_resync(s, &pos, &need);
            s->pos = pos;
            if (need == 0) {
                if (skipped(r, s->bad_at, s->base + (int64_t)s->pos) < 0)
                    return -1;
                s->bad_at = -1;
            } else if (s->eof) {
                if (skipped(r, s->bad_at, s->base + (int64_t)n) < 0)
                    return -1;
                s->bytes_read = s->base + (int64_t)n;
                return 0;
            }
        }
        if (s->bad_at < 0 && r->stop >= 0 && s->base + (int64_t)s->pos >= r->stop)
            return 2; /* the end of this range: the next one goes on from here */
        while (s->bad_at < 0 && s->pos + 12 <= n) {
            const uint8_t *h = s->buf.p + s->pos;
            int64_t at = s->base + (int64_t)s->pos;
            uint32_t btype = rd32(h, s->ng_big), blen = rd32(h + 4, s->ng_big);
            if (btype == SHB) {
                if (!memcmp(h + 8, "\x4d\x3c\x2b\x1a", 4))
                    s->ng_big = 0;
                else if (!memcmp(h + 8, "\x1a\x2b\x3c\x4d", 4))
                    s->ng_big = 1;
                else {
                    PyObject *hex = PyBytes_FromStringAndSize((const char *)h + 8, 4);
                    PyObject *hx = hex ? PyObject_CallMethod(hex, "hex", NULL) : NULL;
                    Py_XDECREF(hex);
                    if (!hx)
                        return -1;
                    if (at != 0) { /* garbled bytes that read as a section header */
                        s->bad_at = at;
                        if (ng_damaged(r, at, btype, PyUnicode_FromFormat(
                                "is a section header with byte-order magic %U", hx)) < 0) {
                            Py_DECREF(hx);
                            return -1;
                        }
                        Py_DECREF(hx);
                        s->pos += 1;
                        break;
                    }
                    /* the file's byte order is unknown: unreadable */
                    PyObject *e = make_error("bad_header", PyUnicode_FromFormat(
                        "%U: section header at offset %lld has byte-order magic %U", r->name,
                        (long long)at, hx), at);
                    Py_DECREF(hx);
                    if (!e)
                        return -1;
                    r->error = e;
                    return 0;
                }
                blen = rd32(h + 4, s->ng_big);
            }
            if (blen < 12 || blen % 4 || blen > s->record_limit) {
                s->bad_at = at;
                if (ng_damaged(r, at, btype, PyUnicode_FromFormat("has length %lu",
                                                                  (unsigned long)blen)) < 0)
                    return -1;
                s->pos += 1;
                break;
            }
            size_t end = s->pos + blen;
            if (end > n) {
                need = blen;
                break;
            }
            uint32_t tail = rd32(s->buf.p + end - 4, s->ng_big);
            if (tail != blen) {
                s->bad_at = at;
                if (ng_damaged(r, at, btype, PyUnicode_FromFormat(
                        "has length %lu at its start and %lu at its end", (unsigned long)blen,
                        (unsigned long)tail)) < 0)
                    return -1;
                s->pos += 1;
                break;
            }
            s->pos = end;
            int big = s->ng_big;
            if (blen < min_len(btype)) {
                if (ng_bad(r, btype, at, PyUnicode_FromFormat(
                        "%lu bytes are too few for its fields", (unsigned long)blen)) < 0)
                    return -1;
            } else if (btype == EPB || btype == OPB) {
                uint32_t iid, hi, lo, cap, orig;
                if (btype == EPB) {
                    iid = rd32(h + 8, big);
                } else {
                    iid = rd16(h + 8, big);
                }
                hi = rd32(h + 12, big);
                lo = rd32(h + 16, big);
                cap = rd32(h + 20, big);
                orig = rd32(h + 24, big);
                if (iid >= (uint32_t)s->nifaces || cap > blen - 32) {
                    if (ng_bad(r, btype, at, PyUnicode_FromFormat(
                            "interface %lu (%zd described), captured length %lu in %lu bytes",
                            (unsigned long)iid, s->nifaces, (unsigned long)cap,
                            (unsigned long)(blen - 32))) < 0)
                        return -1;
                } else {
                    uint64_t t = (uint64_t)hi << 32 | lo;
                    pk->ts = pcapng_ts(t, s->ifaces[iid].num, s->ifaces[iid].den,
                                       s->ifaces[iid].den_inf, s->ifaces[iid].offset_s);
                    pk->lt = s->ifaces[iid].linktype;
                    pk->p = h + 28;
                    pk->caplen = cap;
                    pk->wirelen = orig;
                    return 1;
                }
            } else if (btype == SHB) {
                s->nifaces = 0;
            } else if (btype == IDB) {
                if (ng_interface(s, h, blen) < 0)
                    return -1;
            } else if (btype == SPB) {
                if (!s->nifaces) {
                    if (ng_bad(r, btype, at, PyUnicode_FromString(
                            "no interface described before it")) < 0)
                        return -1;
                } else {
                    uint32_t orig = rd32(h + 8, big);
                    int64_t cap = orig;
                    if (blen - 16 < cap)
                        cap = blen - 16;
                    if (s->ifaces[0].snaplen && s->ifaces[0].snaplen < cap)
                        cap = s->ifaces[0].snaplen;
                    pk->ts = 0; /* a simple packet block has no timestamp */
                    pk->lt = s->ifaces[0].linktype;
                    pk->p = h + 12;
                    pk->caplen = cap;
                    pk->wirelen = orig;
                    return 1;
                }
            }
        }
        if (s->bad_at >= 0 && need == 12 && s->pos + 12 <= n)
            continue; /* just found damage: look past it in what is already read */
        if (s->eof && s->bad_at < 0 && s->pos + 12 <= n && need > 12) {
            size_t q = s->pos + 1, qneed = 12;
            ng_resync(s, &q, &qneed);
            if (qneed == 0) {
                /* A length that runs past the end, with blocks after it: damage,
                 * not a file cut short. */
                int64_t at = s->base + (int64_t)s->pos;
                s->bad_at = at;
                if (ng_damaged(r, at, rd32(s->buf.p + s->pos, s->ng_big), PyUnicode_FromFormat(
                        "has length %zu, past the end of the file at %lld, and blocks follow it",
                        need, (long long)(s->base + (int64_t)n))) < 0)
                    return -1;
                s->pos += 1;
                continue;
            }
        }
        if (s->eof && s->bad_at < 0) {
            if (s->pos < n) {
                if (src_notice(r, K_TRUNCATED, PyUnicode_FromFormat(
                        "%U: file ends at offset %lld inside a block starting at %lld; the "
                        "partial block is skipped", r->name, (long long)(s->base + (int64_t)n),
                        (long long)(s->base + (int64_t)s->pos)), 1, (int64_t)(n - s->pos)) < 0)
                    return -1;
            }
            s->bytes_read = s->base + (int64_t)n;
            return 0;
        }
        s->bytes_read = s->base + (int64_t)s->pos;
        if (refill(s, need) < 0)
            return -1;
    }
}

/* ---- link layers and IP (linktypes.py, reader.dissect) -------------------------- */
static int supported(uint32_t lt) {
    return lt == 1 || lt == 0 || lt == 108 || lt == 101 || lt == 12 || lt == 14 || lt == 228 ||
           lt == 229 || lt == 113 || lt == 276;
}

static int64_t ip_offset(uint32_t lt, const uint8_t *b, int64_t off, int64_t end) {
    if (lt == 1) {
        int64_t p = off + 12;
        while (p + 2 <= end) {
            int et = b[p] << 8 | b[p + 1];
            if (et == 0x8100 || et == 0x88A8 || et == 0x9100) {
                p += 4;
                continue;
            }
            return (et == 0x0800 || et == 0x86DD) ? p + 2 : -1;
        }
        return -1;
    }
    if (lt == 113) {
        if (off + 16 <= end) {
            int et = b[off + 14] << 8 | b[off + 15];
            if (et == 0x0800 || et == 0x86DD)
                return off + 16;
        }
        return -1;
    }
    if (lt == 276) {
        if (off + 20 <= end) {
            int et = b[off] << 8 | b[off + 1];
            if (et == 0x0800 || et == 0x86DD)
                return off + 20;
        }
        return -1;
    }
    if (lt == 0 || lt == 108)
        return (off + 4 < end && (b[off + 4] >> 4 == 4 || b[off + 4] >> 4 == 6)) ? off + 4 : -1;
    if (lt == 101 || lt == 228 || lt == 229 || lt == 12 || lt == 14)
        return (off < end && (b[off] >> 4 == 4 || b[off] >> 4 == 6)) ? off : -1;
    return -1;
}

typedef struct {
    uint8_t key[36];
    int klen;
    uint32_t seq, ack;
    int flags;
    int64_t data, ip_end;
} tcpinfo;

/* reader.dissect, offsets relative to the packet's first byte. */
static int dissect(uint32_t lt, const uint8_t *b, int64_t caplen, tcpinfo *t) {
    int64_t end = caplen;
    int64_t ip = ip_offset(lt, b, 0, end);
    if (ip < 0 || ip + 20 > end)
        return 0;
    int b0 = b[ip];
    int64_t tcp;
    if (b0 >> 4 == 4) {
        if (b[ip + 9] != 6 || (b[ip + 6] & 0x3F) || b[ip + 7])
            return 0;
        int tot = b[ip + 2] << 8 | b[ip + 3];
        tcp = ip + (b0 & 15) * 4;
        memcpy(t->key, b + ip + 12, 8);
        t->klen = 12;
        t->ip_end = tot ? ip + tot : -1;
    } else if (b0 >> 4 == 6 && ip + 40 <= end) {
        int nh = b[ip + 6];
        tcp = ip + 40;
        int plen = b[ip + 4] << 8 | b[ip + 5];
        /* 0: a jumbogram, or segmentation offload: the wire length tells */
        t->ip_end = plen ? ip + 40 + plen : -1;
        while ((nh == 0 || nh == 43 || nh == 60) && tcp + 8 <= end) {
            int next = b[tcp];
            tcp = tcp + ((int64_t)b[tcp + 1] + 1) * 8;
            nh = next;
        }
        if (nh != 6)
            return 0;
        memcpy(t->key, b + ip + 8, 32);
        t->klen = 36;
    } else {
        return 0;
    }
    if (tcp + 20 > end)
        return 0;
    memcpy(t->key + t->klen - 4, b + tcp, 4);
    const uint8_t *h = b + tcp;
    t->seq = (uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 | (uint32_t)h[6] << 8 | h[7];
    t->ack = (uint32_t)h[8] << 24 | (uint32_t)h[9] << 16 | (uint32_t)h[10] << 8 | h[11];
    t->flags = h[12] << 8 | h[13];
    t->data = tcp + (t->flags >> 12) * 4;
    return 1;
}

#define F_FIN 0x01
#define F_SYN 0x02
#define F_RST 0x04
#define F_ACK 0x10

static void end_packet(reader *r) {
    free_kept(r);
    drop_frames(r, 0);
    while (r->dead) {
        conn *c = r->dead;
        r->dead = c->next_free;
        free_conn(c);
    }
}

/* One packet, as reader._packets handles it. */
static int handle(reader *r, packet *pk) {
    r->packets++;
    r->ts = pk->ts;
    tsns ts = pk->ts;
    if (!supported(pk->lt)) {
        if (!(r->unsupported[(pk->lt & 0xFFFF) / 8] & (1 << (pk->lt % 8)))) {
            r->unsupported[(pk->lt & 0xFFFF) / 8] |= (uint8_t)(1 << (pk->lt % 8));
            if (notice_now(r, K_PROTOCOL, PyUnicode_FromFormat(
                    "link type %lu is not supported; its packets are skipped",
                    (unsigned long)pk->lt), 1, ts, NULL, 0, 0, NULL) < 0)
                return -1;
        }
        r->skipped++;
        return 0;
    }
    tcpinfo t;
    if (!dissect(pk->lt, pk->p, pk->caplen, &t)) {
        r->skipped++;
        return 0;
    }
    int64_t end = pk->caplen, ip_end = t.ip_end, avail, missing;
    if (ip_end < 0)
        ip_end = pk->wirelen;
    if (ip_end <= end)
        avail = ip_end - t.data, missing = 0;
    else
        avail = end - t.data, missing = ip_end - end;
    if (avail < 0) {
        missing += avail;
        avail = 0;
        if (missing < 0)
            missing = 0;
    }
    direction *d = ft_get(&r->flows, t.key, t.klen);
    if (!d) {
        if (!(avail || missing || (t.flags & F_SYN)))
            return 0; /* a bare ACK of a connection we know nothing of */
        if (!(d = new_flow(r, t.key, t.klen)))
            return -1;
    }
    if (t.flags & F_ACK) {
        d->has_ack = 1;
        d->ack = t.ack;
    }
    uint32_t seq = t.seq;
    if (t.flags & F_SYN) {
        if (syn(r, d, seq, ts) < 0)
            return -1;
        seq = seq + 1;
    }
    const uint8_t *data = pk->p + t.data;
    int rc = 0;
    if (avail) {
        if (d->has_next && seq == d->next_seq && !missing && !d->npending && !d->cut) {
            d->next_seq = seq + (uint32_t)avail;
            rc = feed(r, d, data, (Py_ssize_t)avail);
            if (rc == 0)
                rc = keep_window(d, data, (Py_ssize_t)avail);
        } else {
            rc = segment(r, d, seq, data, (Py_ssize_t)avail, missing, ts);
        }
    } else if (missing) {
        rc = segment(r, d, seq, NULL, 0, missing, ts);
    }
    if (rc < 0)
        return -1;
    if (t.flags & (F_FIN | F_RST)) {
        if (out_frames(r, 0, r->nframes) < 0)
            return -1;
        Py_ssize_t mark = r->nframes;
        d->closed = 1;
        if (finish(r, d, ts) < 0)
            return -1;
        if ((t.flags & F_RST) || d->peer->closed) {
            if (finish(r, d->peer, ts) < 0)
                return -1;
            drop_flow(r, t.key, t.klen);
        }
        if (out_frames(r, mark, r->nframes) < 0)
            return -1;
        return flush_notices(r);
    }
    if (flush_notices(r) < 0)
        return -1;
    return out_frames(r, 0, r->nframes);
}

/* The end of the capture: every direction finished, in the table's order. */
static int finish_all(reader *r) {
    flowtab *t = &r->flows;
    Py_ssize_t n = t->nentries;
    direction **ds = malloc((size_t)(n ? n : 1) * sizeof(direction *));
    if (!ds) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (t->entries[i].klen) {
            ds[k++] = t->entries[i].d;
            t->entries[i].d->conn->refs++; /* alive while listed */
        }
    int rc = 0;
    for (Py_ssize_t i = 0; i < k && rc == 0; i++) {
        Py_ssize_t mark = r->nframes;
        rc = finish(r, ds[i], r->ts);
        if (!rc)
            rc = out_frames(r, mark, r->nframes);
        if (!rc)
            rc = flush_notices(r);
        free_kept(r);
        drop_frames(r, 0);
    }
    for (Py_ssize_t i = 0; i < k; i++)
        conn_unref(r, ds[i]);
    free(ds);
    return rc;
}


/* ---- snapshots: the whole reading state at a record boundary ----------------------
 * The index pass (Reader.index) reads the file once, counting rows without
 * building columns, and snapshots the state every so many bytes; a task
 * that restores a snapshot (Reader.restore) and reads on from its offset
 * makes exactly the rows a single reading makes from there: the same flows,
 * TCP segments waiting behind holes, half-read NATS frames, pcapng
 * interfaces and row count (positions). */
#define SNAP_MAGIC 0x32534C42u /* "BLS2": "BLS1" and the retransmission window */

static int w_raw(lb_gbuf *g, const void *p, size_t n) { return lb_gb_put_py(g, p, n); }
static int w_u8(lb_gbuf *g, uint8_t v) { return w_raw(g, &v, 1); }
static int w_u32(lb_gbuf *g, uint32_t v) { return w_raw(g, &v, 4); }
static int w_i64(lb_gbuf *g, int64_t v) { return w_raw(g, &v, 8); }
static int w_u64(lb_gbuf *g, uint64_t v) { return w_raw(g, &v, 8); }
static int w_bytes(lb_gbuf *g, const void *p, size_t n) {
    return w_i64(g, (int64_t)n) || w_raw(g, p ? p : "", n);
}
static int w_str(lb_gbuf *g, const char *s) { return w_bytes(g, s, strlen(s)); }

typedef struct {
    const uint8_t *p;
    size_t n, at;
    int bad;
} des;

static void r_raw(des *d, void *out, size_t k) {
    if (d->bad || k > d->n - d->at) {
        d->bad = 1;
        memset(out, 0, k);
        return;
    }
    memcpy(out, d->p + d->at, k);
    d->at += k;
}
static uint8_t r_u8(des *d) { uint8_t v; r_raw(d, &v, 1); return v; }
static uint32_t r_u32(des *d) { uint32_t v; r_raw(d, &v, 4); return v; }
static int64_t r_i64(des *d) { int64_t v; r_raw(d, &v, 8); return v; }
static uint64_t r_u64(des *d) { uint64_t v; r_raw(d, &v, 8); return v; }
/* Bytes into g (replacing what it held). */
static int r_bytes(des *d, lb_gbuf *g) {
    int64_t k = r_i64(d);
    if (d->bad || k < 0 || (uint64_t)k > d->n - d->at) {
        d->bad = 1;
        return 0;
    }
    if (lb_gb_set_py(g, d->p + d->at, (size_t)k) < 0)
        return -1;
    d->at += (size_t)k;
    return 0;
}
static char *r_str(des *d) {
    lb_gbuf g = {0, 0, 0};
    if (r_bytes(d, &g) < 0)
        return NULL;
    char *out = malloc(g.len + 1);
    if (!out) {
        lb_gb_free(&g);
        PyErr_NoMemory();
        return NULL;
    }
    if (g.len)
        memcpy(out, g.p, g.len);
    out[g.len] = 0;
    lb_gb_free(&g);
    return out;
}

/* The retransmission window, oldest byte first, and whether one was told. */
static int w_window(lb_gbuf *g, const direction *d) {
    Py_ssize_t start = (d->win_end - d->win_len + RETRANSMIT_WINDOW) % RETRANSMIT_WINDOW;
    Py_ssize_t first = RETRANSMIT_WINDOW - start < d->win_len ? RETRANSMIT_WINDOW - start
                                                               : d->win_len;
    return w_u8(g, (uint8_t)d->told) || w_i64(g, (int64_t)d->win_len) ||
           (d->win_len && (w_raw(g, d->win + start, (size_t)first) ||
                           w_raw(g, d->win, (size_t)(d->win_len - first))));
}

static int r_window(des *in, direction *d) {
    lb_gbuf g = {0, 0, 0};
    d->told = r_u8(in);
    if (r_bytes(in, &g) < 0)
        return -1;
    if (g.len > RETRANSMIT_WINDOW || d->told > 1)
        in->bad = 1;
    else if (g.len && keep_window(d, g.p, (Py_ssize_t)g.len) < 0) {
        lb_gb_free(&g);
        return -1;
    }
    lb_gb_free(&g);
    return 0;
}

static int w_direction(lb_gbuf *g, const direction *d) {
    const parser *P = &d->p;
    if (w_str(g, d->src) || w_str(g, d->dst) || w_u8(g, (uint8_t)d->has_next) ||
        w_u32(g, d->next_seq) || w_i64(g, d->pending_bytes) || w_i64(g, d->next_pos) ||
        w_u8(g, (uint8_t)d->has_ack) || w_u32(g, d->ack) || w_u8(g, (uint8_t)d->closed) ||
        w_i64(g, d->cut) || w_u32(g, (uint32_t)d->npending))
        return -1;
    for (Py_ssize_t i = 0; i < d->npending; i++)
        if (w_i64(g, d->heap[i].pos) || w_i64(g, d->heap[i].missing) ||
            w_bytes(g, d->heap[i].data, (size_t)d->heap[i].len))
            return -1;
    return w_bytes(g, P->rest.p, P->rest.len) || w_i64(g, P->rest0) ||
           w_u8(g, (uint8_t)P->waiting) || w_u8(g, (uint8_t)P->w_verb) ||
           w_bytes(g, P->w_subj.p, P->w_subj.len) || w_bytes(g, P->w_reply.p, P->w_reply.len) ||
           w_bytes(g, P->w_sid.p, P->w_sid.len) || w_u8(g, (uint8_t)P->w_has_reply) ||
           w_u8(g, (uint8_t)P->w_has_sid) || w_i64(g, P->w_hsize) ||
           w_bytes(g, P->held.p, P->held.len) || w_i64(g, P->need) ||
           w_u8(g, (uint8_t)P->resync) || w_u8(g, (uint8_t)P->here) || w_window(g, d);
}

static int snapshot(reader *r, lb_gbuf *g) {
    source *s = &r->s;
    flowtab *t = &r->flows;
    if (w_u32(g, SNAP_MAGIC) || w_i64(g, r->total_rows) || w_i64(g, r->flow_cap) || w_i64(g, r->ts) ||
        w_u8(g, (uint8_t)s->fmt) || w_u8(g, (uint8_t)s->ng_big) || w_u32(g, (uint32_t)s->nifaces))
        return -1;
    for (Py_ssize_t i = 0; i < s->nifaces; i++)
        if (w_u32(g, s->ifaces[i].linktype) || w_u32(g, s->ifaces[i].snaplen) ||
            w_u64(g, s->ifaces[i].num) || w_u64(g, (uint64_t)(s->ifaces[i].den >> 64)) ||
            w_u64(g, (uint64_t)s->ifaces[i].den) || w_u8(g, (uint8_t)s->ifaces[i].den_inf) ||
            w_i64(g, s->ifaces[i].offset_s))
            return -1;
    /* the link types already reported as unsupported: their numbers */
    uint32_t nu = 0;
    for (uint32_t lt = 0; lt < 65536; lt++)
        nu += (r->unsupported[lt / 8] >> (lt % 8)) & 1;
    if (w_u32(g, nu))
        return -1;
    for (uint32_t lt = 0; lt < 65536; lt++)
        if (((r->unsupported[lt / 8] >> (lt % 8)) & 1) && w_u32(g, lt))
            return -1;
    /* the connections, numbered in the order the table first names them */
    int64_t nconns = 0;
    for (Py_ssize_t i = 0; i < t->nentries; i++)
        if (t->entries[i].klen)
            t->entries[i].d->conn->mark = -1;
    for (Py_ssize_t i = 0; i < t->nentries; i++)
        if (t->entries[i].klen && t->entries[i].d->conn->mark < 0)
            t->entries[i].d->conn->mark = nconns++;
    if (w_u32(g, (uint32_t)nconns))
        return -1;
    int64_t next = 0;
    for (Py_ssize_t i = 0; i < t->nentries; i++) {
        conn *c = t->entries[i].klen ? t->entries[i].d->conn : NULL;
        if (c && c->mark == next) {
            if (w_direction(g, &c->d[0]) || w_direction(g, &c->d[1]))
                return -1;
            next++;
        }
    }
    if (w_u32(g, (uint32_t)t->used))
        return -1;
    for (Py_ssize_t i = 0; i < t->nentries; i++) {
        entry *e = &t->entries[i];
        if (!e->klen)
            continue;
        conn *c = e->d->conn;
        if (w_u8(g, e->klen) || w_raw(g, e->key, e->klen) || w_u32(g, (uint32_t)c->mark) ||
            w_u8(g, (uint8_t)(e->d == &c->d[1])))
            return -1;
    }
    return 0;
}

static int r_direction(des *in, direction *d, reader *r) {
    parser *P = &d->p;
    if (!(d->src = r_str(in)) || !(d->dst = r_str(in)))
        return -1;
    d->has_next = r_u8(in);
    d->next_seq = r_u32(in);
    d->pending_bytes = r_i64(in);
    d->next_pos = r_i64(in);
    d->has_ack = r_u8(in);
    d->ack = r_u32(in);
    d->closed = r_u8(in);
    d->cut = r_i64(in);
    uint32_t np = r_u32(in);
    if (in->bad || np > r->rules.max_pending_segments + 1)
        return in->bad = 1, 0;
    d->heap = calloc(np ? np : 1, sizeof(pending_seg));
    if (!d->heap) {
        PyErr_NoMemory();
        return -1;
    }
    d->cap_pending = np ? np : 1;
    for (uint32_t i = 0; i < np && !in->bad; i++) {
        lb_gbuf g = {0, 0, 0};
        int64_t pos = r_i64(in), missing = r_i64(in);
        if (r_bytes(in, &g) < 0)
            return -1;
        if (!g.p && !(g.p = malloc(1))) {
            PyErr_NoMemory();
            return -1;
        }
        d->heap[i] = (pending_seg){pos, g.p, (Py_ssize_t)g.len, missing};
        d->npending = i + 1;
    }
    d->max_pending = r->max_reassembly;
    parser_init(P, 0, r->max_frame);
    if (r_bytes(in, &P->rest) < 0)
        return -1;
    P->rest0 = r_i64(in);
    P->waiting = r_u8(in);
    P->w_verb = r_u8(in);
    if (r_bytes(in, &P->w_subj) < 0 || r_bytes(in, &P->w_reply) < 0 || r_bytes(in, &P->w_sid) < 0)
        return -1;
    P->w_has_reply = r_u8(in);
    P->w_has_sid = r_u8(in);
    P->w_hsize = r_i64(in);
    if (r_bytes(in, &P->held) < 0)
        return -1;
    P->need = r_i64(in);
    P->resync = r_u8(in);
    P->here = r_u8(in);
    if (r_window(in, d) < 0)
        return -1;
    if (P->rest0 < 0 || P->rest0 > (Py_ssize_t)P->rest.len ||
        (P->waiting && (P->w_verb < V_PUB || P->w_verb > V_HMSG || P->need < 2 ||
                        P->w_hsize < 0 || P->w_hsize > P->need - 2 ||
                        (Py_ssize_t)P->held.len >= P->need)))
        in->bad = 1;
    return 0;
}

static int restore(reader *r, const uint8_t *p, size_t n) {
    des in = {p, n, 0, 0};
    source *s = &r->s;
    if (r_u32(&in) != SNAP_MAGIC)
        goto bad;
    r->total_rows = r_i64(&in);
    r->flow_cap = r_i64(&in);
    r->ts = r_i64(&in);
    if (r_u8(&in) != s->fmt)
        goto bad;
    s->ng_big = r_u8(&in);
    uint32_t ni = r_u32(&in);
    if (in.bad || ni > n)
        goto bad;
    for (uint32_t i = 0; i < ni; i++) {
        if (s->nifaces == s->cap_ifaces) {
            Py_ssize_t c = s->cap_ifaces ? 2 * s->cap_ifaces : 4;
            void *q = realloc(s->ifaces, (size_t)c * sizeof(*s->ifaces));
            if (!q) {
                PyErr_NoMemory();
                return -1;
            }
            s->ifaces = q;
            s->cap_ifaces = c;
        }
        s->ifaces[s->nifaces].linktype = r_u32(&in);
        s->ifaces[s->nifaces].snaplen = r_u32(&in);
        s->ifaces[s->nifaces].num = r_u64(&in);
        unsigned __int128 hi = r_u64(&in);
        s->ifaces[s->nifaces].den = hi << 64 | r_u64(&in);
        s->ifaces[s->nifaces].den_inf = r_u8(&in);
        s->ifaces[s->nifaces].offset_s = r_i64(&in);
        s->nifaces++;
    }
    uint32_t nu = r_u32(&in);
    if (in.bad || nu > 65536)
        goto bad;
    for (uint32_t i = 0; i < nu; i++) {
        uint32_t lt = r_u32(&in);
        if (in.bad || lt > 0xFFFF)
            goto bad;
        r->unsupported[lt / 8] |= (uint8_t)(1 << (lt % 8));
    }
    uint32_t nconns = r_u32(&in);
    if (in.bad || nconns > n)
        goto bad;
    conn **conns = calloc(nconns ? nconns : 1, sizeof(conn *));
    if (!conns) {
        PyErr_NoMemory();
        return -1;
    }
    int rc = 0;
    for (uint32_t i = 0; i < nconns && rc == 0 && !in.bad; i++) {
        conn *c = calloc(1, sizeof(conn));
        if (!c) {
            PyErr_NoMemory();
            rc = -1;
            break;
        }
        conns[i] = c;
        for (int k = 0; k < 2; k++) {
            c->d[k].peer = &c->d[1 - k];
            c->d[k].conn = c;
        }
        for (int k = 0; k < 2 && rc == 0; k++)
            rc = r_direction(&in, &c->d[k], r);
    }
    uint32_t ne = rc == 0 ? r_u32(&in) : 0;
    for (uint32_t i = 0; i < ne && rc == 0 && !in.bad; i++) {
        uint8_t key[36];
        uint8_t klen = r_u8(&in);
        if (klen != 12 && klen != 36) {
            in.bad = 1;
            break;
        }
        r_raw(&in, key, klen);
        uint32_t ci = r_u32(&in);
        uint8_t di = r_u8(&in);
        if (in.bad || ci >= nconns || di > 1) {
            in.bad = 1;
            break;
        }
        rc = ft_set(r, key, klen, &conns[ci]->d[di]);
    }
    for (uint32_t i = 0; i < nconns; i++)
        if (conns[i] && conns[i]->refs == 0)
            free_conn(conns[i]); /* named by no key (a bad snapshot) */
    free(conns);
    if (rc < 0)
        return -1;
    if (in.bad || in.at != n)
        goto bad;
    return 0;
bad:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "not a snapshot of this reader's file");
    return -1;
}

/* The source read on from `offset`, a record boundary the index pass found. */
static int seek_source(source *s, int64_t offset) {
    if (fseeko(s->f, (off_t)offset, SEEK_SET) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    s->base = offset;
    s->pos = s->buf.len = 0;
    s->eof = 0;
    s->bad_at = -1;
    s->bytes_read = offset;
    return refill(s, 16);
}

/* ---- the Python type -------------------------------------------------------------- */
static varcol *cols(reader *r, int i) {
    varcol *all[] = {&r->src, &r->dst, &r->direction, &r->verb, &r->subject, &r->reply,
                     &r->sid, &r->hdr, &r->payload, &r->ekind, &r->emsg};
    return all[i];
}
#define NCOLS 11

static int start_batch(reader *r) {
    r->rows = 0;
    r->ts_col.len = r->ts_valid.len = 0;
    for (int i = 0; i < NCOLS; i++)
        if (vc_init(cols(r, i)) < 0)
            return -1;
    return 0;
}

/* A validity bitmap from one byte per row, or None when nothing is null. */
static PyObject *bitmap(lb_gbuf *valid, Py_ssize_t nulls) {
    if (!nulls)
        Py_RETURN_NONE;
    lb_gbuf bits = {0, 0, 0};
    size_t n = valid->len, nb = (n + 7) / 8;
    if (lb_gb_reserve_py(&bits, nb ? nb : 1) < 0)
        return NULL;
    memset(bits.p, 0, nb ? nb : 1);
    for (size_t i = 0; i < n; i++)
        if (valid->p[i])
            bits.p[i / 8] |= (uint8_t)(1 << (i % 8));
    bits.len = nb;
    return gb_take(&bits);
}

static PyObject *take_batch(reader *r) {
    PyObject *out = PyTuple_New(2 + NCOLS);
    if (!out)
        return NULL;
    PyTuple_SET_ITEM(out, 0, PyLong_FromSsize_t(r->rows));
    Py_ssize_t tsnulls = 0;
    for (size_t i = 0; i < r->ts_valid.len; i++)
        tsnulls += !r->ts_valid.p[i];
    PyObject *tsv = bitmap(&r->ts_valid, tsnulls);
    PyObject *tsd = tsv ? gb_take(&r->ts_col) : NULL;
    PyTuple_SET_ITEM(out, 1, tsv && tsd ? Py_BuildValue("(NN)", tsv, tsd) : NULL);
    if (!PyTuple_GET_ITEM(out, 1)) {
        Py_XDECREF(tsv);
        Py_XDECREF(tsd);
        Py_DECREF(out);
        return NULL;
    }
    for (int i = 0; i < NCOLS; i++) {
        varcol *c = cols(r, i);
        PyObject *v = bitmap(&c->valid, c->nulls);
        PyObject *o = v ? gb_take(&c->off) : NULL;
        PyObject *d = o ? gb_take(&c->data) : NULL;
        if (!d) {
            Py_XDECREF(v);
            Py_XDECREF(o);
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, 2 + i, Py_BuildValue("(NNN)", v, o, d));
    }
    return out;
}

static void reader_clear(reader *r) {
    if (r->s.f)
        fclose(r->s.f);
    r->s.f = NULL;
    lb_gb_free(&r->s.buf);
    free(r->s.ifaces);
    r->s.ifaces = NULL;
    end_packet(r);
    for (Py_ssize_t i = 0; i < r->nnotices; i++)
        Py_DECREF(r->notices[i].message);
    r->nnotices = 0;
    flowtab *t = &r->flows;
    for (Py_ssize_t i = 0; i < t->nentries; i++)
        if (t->entries[i].klen) {
            t->entries[i].klen = 0;
            conn_unref(r, t->entries[i].d);
        }
    end_packet(r);
    free(t->entries);
    free(t->index);
    memset(t, 0, sizeof(*t));
    free(r->frames);
    r->frames = NULL;
    r->cap_frames = 0;
    free(r->notices);
    r->notices = NULL;
    r->cap_notices = 0;
    free(r->keep);
    r->keep = NULL;
    r->cap_keep = 0;
    for (int i = 0; i < NCOLS; i++) {
        varcol *c = cols(r, i);
        lb_gb_free(&c->off);
        lb_gb_free(&c->data);
        lb_gb_free(&c->valid);
    }
    lb_gb_free(&r->ts_col);
    lb_gb_free(&r->ts_valid);
    lb_gb_free(&r->last);
}

static void Reader_dealloc(reader *r) {
    reader_clear(r);
    Py_XDECREF(r->name);
    Py_XDECREF(r->error);
    Py_XDECREF(r->connects);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static int open_source(reader *r, const char *path) {
    source *s = &r->s;
    s->f = fopen(path, "rb");
    if (!s->f) {
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
        return -1;
    }
    uint8_t head[24];
    size_t got = fread(head, 1, 24, s->f);
    if (got >= 4 && !memcmp(head, "\x0a\x0d\x0d\x0a", 4)) {
        if (got < 12) {
            PyErr_SetString(PyExc_ValueError, "pcapng head");
            return -1;
        }
        s->fmt = 2;
        /* PcapngSource: the 12 bytes read, then read_more(f, 0) */
        if (lb_gb_set_py(&s->buf, head, 12) < 0)
            return -1;
        if (fseek(s->f, 12, SEEK_SET) != 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        int64_t k = fill(s, 12, 12 + blocks_for(s, 0));
        if (k < 0)
            return -1;
        s->buf.len = 12 + (size_t)k;
        s->base = 0;
        return 0;
    }
    int big, nano;
    if (got >= 4 && !memcmp(head, "\xd4\xc3\xb2\xa1", 4)) big = 0, nano = 0;
    else if (got >= 4 && !memcmp(head, "\xa1\xb2\xc3\xd4", 4)) big = 1, nano = 0;
    else if (got >= 4 && !memcmp(head, "\x4d\x3c\xb2\xa1", 4)) big = 0, nano = 1;
    else if (got >= 4 && !memcmp(head, "\xa1\xb2\x3c\x4d", 4)) big = 1, nano = 1;
    else {
        PyErr_SetString(PyExc_ValueError, "not pcap or pcapng: the reference reads it");
        return -1;
    }
    if (got < 24) {
        PyErr_SetString(PyExc_ValueError, "pcap head: the reference reports it");
        return -1;
    }
    s->fmt = 1;
    s->big = big;
    s->tick = nano ? 1 : 1000;
    s->frac_limit = nano ? 1000000000u : 1000000u;
    s->snaplen = rd32(head + 16, big);
    s->linktype = rd32(head + 20, big) & 0xFFFF;
    if (!supported(s->linktype)) {
        PyErr_SetString(PyExc_ValueError, "unsupported link type: the reference reports it");
        return -1;
    }
    /* pcap.py: min(max(snaplen, MIN_MAX_RECORD), MAX_RECORD) */
    int64_t mr = s->snaplen > r->rules.min_max_record ? s->snaplen : r->rules.min_max_record;
    s->max_record = (uint32_t)(mr < s->record_limit ? mr : s->record_limit);
    int64_t k = fill(s, 0, blocks_for(s, s->block));
    if (k < 0)
        return -1;
    s->buf.len = (size_t)k;
    s->base = 24;
    s->bytes_read = 24;
    return 0;
}

static int Reader_init(reader *r, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"path", "name", "max_frame", "max_reassembly", "rules", NULL};
    PyObject *path;
    PyObject *name, *given;
    long long max_frame, max_reassembly;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&ULLO", kwlist, PyUnicode_FSConverter, &path,
                                     &name, &max_frame, &max_reassembly, &given))
        return -1;
    if (r->s.f || r->name) {
        Py_DECREF(path);
        PyErr_SetString(PyExc_RuntimeError, "Reader is initialised once");
        return -1;
    }
    if (!capture_error || !endpoint_fn) {
        Py_DECREF(path);
        PyErr_SetString(PyExc_RuntimeError, "configure() first");
        return -1;
    }
    if (max_frame < 0 || max_reassembly < 0) {
        Py_DECREF(path);
        PyErr_SetString(PyExc_ValueError, "limits >= 0");
        return -1;
    }
    if (parse_rules(given, &r->rules) < 0) {
        Py_DECREF(path);
        return -1;
    }
    Py_INCREF(name);
    r->name = name;
    r->max_frame = max_frame;
    r->max_reassembly = max_reassembly;
    r->s.block = (size_t)r->rules.block;
    r->s.record_limit = r->rules.max_record;
    r->s.bad_at = -1;
    r->stop = -1;
    r->flow_cap = 2 * r->rules.max_flows;
    int rc = open_source(r, PyBytes_AS_STRING(path));
    Py_DECREF(path);
    if (rc < 0)
        return -1;
    return start_batch(r);
}

/* A reading done: the CaptureError that stopped it, raised once its rows or
 * packets are out, else None (next_batch's end, and packets'). */
static PyObject *read_out(reader *r) {
    if (r->error) {
        PyObject *e = r->error;
        r->error = NULL;
        PyErr_SetObject((PyObject *)Py_TYPE(e), e);
        Py_DECREF(e);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *Reader_next_batch(reader *r, PyObject *args) {
    Py_ssize_t max_rows, max_bytes;
    if (!PyArg_ParseTuple(args, "nn:next_batch", &max_rows, &max_bytes))
        return NULL;
    if (!r->s.f && r->state < 2) {
        PyErr_SetString(PyExc_RuntimeError, "Reader not initialised");
        return NULL;
    }
    if (r->state == 2)
        return read_out(r);
    while (r->rows < max_rows && (Py_ssize_t)r->payload.data.len < max_bytes) {
        if (r->state == 0) {
            packet pk;
            int got = r->s.fmt == 1 ? pcap_next(r, &pk) : pcapng_next(r, &pk);
            if (got < 0)
                goto fail;
            if (got == 2) { /* a range ends: no end-of-capture work, the next range does it */
                r->state = 2;
                break;
            }
            if (got == 0) {
                if (r->error) { /* rows so far, then the error */
                    r->state = 2;
                    break;
                }
                r->state = 1;
                int rc = finish_all(r);
                end_packet(r);
                if (rc < 0)
                    goto fail;
                r->state = 2;
                break;
            }
            int rc = handle(r, &pk);
            end_packet(r);
            if (rc < 0)
                goto fail;
        } else {
            r->state = 2;
            break;
        }
    }
    if (r->rows == 0 && r->state == 2)
        return Reader_next_batch(r, args);
    PyObject *b = take_batch(r);
    if (!b || start_batch(r) < 0) {
        Py_XDECREF(b);
        return NULL;
    }
    return b;
fail:
    end_packet(r);
    r->state = 2;
    return NULL;
}

static PyObject *Reader_stats(reader *r, PyObject *unused) {
    PyObject *controls = PyDict_New(), *notices = PyDict_New(), *limits = PyDict_New();
    if (!controls || !notices || !limits)
        goto fail;
    for (int k = 0; k < N_CONTROLS; k++)
        if (r->controls[k]) {
            PyObject *v = PyLong_FromLongLong(r->controls[k]);
            if (!v || PyDict_SetItemString(controls, CONTROL_NAME[k], v) < 0) {
                Py_XDECREF(v);
                goto fail;
            }
            Py_DECREF(v);
        }
    for (int k = 0; k < N_KINDS; k++)
        if (r->notice_counts[k]) {
            PyObject *v = PyLong_FromLongLong(r->notice_counts[k]);
            if (!v || PyDict_SetItemString(notices, KIND_NAME[k], v) < 0) {
                Py_XDECREF(v);
                goto fail;
            }
            Py_DECREF(v);
        }
    const char *lname[] = {"max_frame", "max_reassembly"};
    int64_t lval[] = {r->limit_frame, r->limit_reassembly};
    for (int k = 0; k < 2; k++)
        if (lval[k]) {
            PyObject *v = PyLong_FromLongLong(lval[k]);
            if (!v || PyDict_SetItemString(limits, lname[k], v) < 0) {
                Py_XDECREF(v);
                goto fail;
            }
            Py_DECREF(v);
        }
    PyObject *connects = r->connects ? PyList_GetSlice(r->connects, 0, PY_SSIZE_T_MAX)
                                     : PyList_New(0);
    if (!connects)
        goto fail;
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L,s:N,s:N,s:N,s:s,s:N}", "rows",
                         (long long)r->total_rows, "packets", (long long)r->packets,
                         "bytes_read", (long long)r->s.bytes_read, "skipped_packets",
                         (long long)r->skipped, "gap_bytes", (long long)r->gap_bytes,
                         "controls", controls, "notices", notices, "limits", limits, "format",
                         r->s.fmt == 1 ? "pcap" : "pcapng", "connects", connects);
fail:
    Py_XDECREF(controls);
    Py_XDECREF(notices);
    Py_XDECREF(limits);
    return NULL;
}

/* index(every): the whole file read once without columns; a snapshot at the
 * first record boundary past every `every` bytes. Returns ([(offset, rows
 * before it, snapshot)], rows in all). */
static PyObject *Reader_index(reader *r, PyObject *args) {
    long long every;
    if (!PyArg_ParseTuple(args, "L:index", &every))
        return NULL;
    if (r->state != 0 || r->packets || !r->s.f || every < 1) {
        PyErr_SetString(PyExc_RuntimeError, "index() is for a fresh reader, every >= 1");
        return NULL;
    }
    PyObject *cuts = PyList_New(0);
    if (!cuts)
        return NULL;
    r->count_only = 1;
    int64_t next_cut = every;
    for (;;) {
        packet pk;
        int got = r->s.fmt == 1 ? pcap_next(r, &pk) : pcapng_next(r, &pk);
        if (got < 0)
            goto fail;
        if (got != 1) {
            if (!r->error) {
                int rc = finish_all(r);
                end_packet(r);
                if (rc < 0)
                    goto fail;
            }
            break;
        }
        int rc = handle(r, &pk);
        end_packet(r);
        if (rc < 0)
            goto fail;
        int64_t at = r->s.base + (int64_t)r->s.pos;
        if (at >= next_cut && r->s.bad_at < 0) {
            lb_gbuf g = {0, 0, 0};
            if (snapshot(r, &g) < 0) {
                lb_gb_free(&g);
                goto fail;
            }
            PyObject *item = Py_BuildValue("(LLy#)", (long long)at, (long long)r->total_rows,
                                           (const char *)g.p, (Py_ssize_t)g.len);
            lb_gb_free(&g);
            if (!item || PyList_Append(cuts, item) < 0) {
                Py_XDECREF(item);
                goto fail;
            }
            Py_DECREF(item);
            next_cut = at + every;
        }
    }
    r->state = 2;
    Py_CLEAR(r->error);
    return Py_BuildValue("(NL)", cuts, (long long)r->total_rows);
fail:
    r->state = 2;
    Py_DECREF(cuts);
    return NULL;
}

/* restore(offset, snapshot[, stop]): read on from a cut of the index pass,
 * and stop before the record at `stop` (the next cut; -1: the end). */
static PyObject *Reader_restore(reader *r, PyObject *args) {
    long long offset, stop = -1;
    Py_buffer snap;
    if (!PyArg_ParseTuple(args, "Ly*|L:restore", &offset, &snap, &stop))
        return NULL;
    if (r->state != 0 || r->packets || r->flows.used || r->total_rows || !r->s.f) {
        PyBuffer_Release(&snap);
        PyErr_SetString(PyExc_RuntimeError, "restore() is for a fresh reader");
        return NULL;
    }
    int rc = offset > 0 ? restore(r, snap.buf, (size_t)snap.len) : 0;
    PyBuffer_Release(&snap);
    if (rc < 0 || (offset > 0 && seek_source(&r->s, offset) < 0)) {
        r->state = 2;
        return NULL;
    }
    r->stop = stop;
    Py_RETURN_NONE;
}

static PyObject *packet_tuple(tsns ts, uint32_t lt, const uint8_t *p, int64_t caplen,
                              int64_t wirelen) {
    /* y# makes None of a NULL pointer: an empty packet is b"" */
    return Py_BuildValue("(LIy#LL)", (long long)ts, (unsigned int)lt, p ? (const char *)p : "",
                         (Py_ssize_t)caplen, (long long)caplen, (long long)wirelen);
}

/* packets(keys, max): the packets of some TCP connections, for the Python
 * reader (the gRPC reading reads a few connections of a whole capture: its
 * packet loop then runs on theirs alone). `keys`: a set of the connections'
 * flow keys, both directions (reader.dissect's: the addresses, then the
 * ports). Up to `max` packets as (ts, linktype, bytes, caplen, wirelen),
 * in file order: each packet dissect() gives one of the keys, and the
 * file's last packet whatever it is (the reference's loop takes its time
 * as the reading's end: calls still open end then); the others, which the
 * reference's loop would skip by their key, are left out. None once read
 * to the end; a CaptureError that stops the reading after the packets
 * before it. Source notices are counted only (they name no connection). */
static PyObject *Reader_packets(reader *r, PyObject *args) {
    PyObject *keys;
    Py_ssize_t max;
    if (!PyArg_ParseTuple(args, "On:packets", &keys, &max))
        return NULL;
    if (!PyAnySet_Check(keys) || max < 1) {
        PyErr_SetString(PyExc_TypeError, "packets(keys: set of bytes, max >= 1)");
        return NULL;
    }
    if (r->state == 0 && !r->count_only && (r->packets || r->flows.used || !r->s.f)) {
        PyErr_SetString(PyExc_RuntimeError, "packets() is for a fresh reader");
        return NULL;
    }
    if (r->state == 2)
        return read_out(r);
    r->count_only = 1; /* no rows: a source's notices are counted */
    PyObject *out = PyList_New(0);
    if (!out)
        return NULL;
    while (PyList_GET_SIZE(out) < max) {
        packet pk;
        int got = r->s.fmt == 1 ? pcap_next(r, &pk) : pcapng_next(r, &pk);
        if (got < 0)
            goto fail;
        if (got != 1) { /* the end, or an error said once the packets before it are out */
            r->state = 2;
            if (r->last_held) {
                r->last_held = 0;
                PyObject *t = packet_tuple(r->last_ts, r->last_lt, r->last.p,
                                           (int64_t)r->last.len, r->last_wirelen);
                if (!t || PyList_Append(out, t) < 0) {
                    Py_XDECREF(t);
                    goto fail;
                }
                Py_DECREF(t);
            }
            break;
        }
        r->packets++;
        int keep = 0;
        tcpinfo t;
        if (supported(pk.lt) && dissect(pk.lt, pk.p, pk.caplen, &t)) {
            PyObject *k = PyBytes_FromStringAndSize((const char *)t.key, t.klen);
            keep = k ? PySet_Contains(keys, k) : -1;
            Py_XDECREF(k);
            if (keep < 0)
                goto fail;
        }
        if (keep) {
            r->last_held = 0;
            PyObject *item = packet_tuple(pk.ts, pk.lt, pk.p, pk.caplen, pk.wirelen);
            if (!item || PyList_Append(out, item) < 0) {
                Py_XDECREF(item);
                goto fail;
            }
            Py_DECREF(item);
        } else {
            r->last.len = 0;
            if (lb_gb_put_py(&r->last, pk.p, (size_t)pk.caplen) < 0)
                goto fail;
            r->last_ts = pk.ts;
            r->last_lt = pk.lt;
            r->last_wirelen = pk.wirelen;
            r->last_held = 1;
        }
    }
    if (PyList_GET_SIZE(out) == 0) {
        Py_DECREF(out);
        return Reader_packets(r, args); /* the end (or its error) */
    }
    return out;
fail:
    Py_DECREF(out);
    r->state = 2;
    return NULL;
}

static PyObject *Reader_close(reader *r, PyObject *unused) {
    reader_clear(r);
    r->state = 2;
    Py_RETURN_NONE;
}

static PyMethodDef Reader_methods[] = {
    {"next_batch", (PyCFunction)Reader_next_batch, METH_VARARGS,
     "next_batch(max_rows, max_bytes): the next rows' column buffers, None at the end."},
    {"stats", (PyCFunction)Reader_stats, METH_NOARGS, "What the reading saw so far."},
    {"index", (PyCFunction)Reader_index, METH_VARARGS,
     "index(every): ([(offset, rows before, snapshot)], rows) of the whole file, read once "
     "without columns, a snapshot past every `every` bytes."},
    {"restore", (PyCFunction)Reader_restore, METH_VARARGS,
     "restore(offset, snapshot[, stop]): read on from a cut of index(), up to the record at "
     "`stop` (-1: the end of the file)."},
    {"packets", (PyCFunction)Reader_packets, METH_VARARGS,
     "packets(keys, max): the packets of the connections whose flow keys are in `keys`."},
    {"close", (PyCFunction)Reader_close, METH_NOARGS, "Close the file, free the state."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "lbparse.capture._native.Reader",
    .tp_basicsize = sizeof(reader),
    .tp_dealloc = (destructor)Reader_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Reader(path, name, max_frame, max_reassembly[, block]): a pcap or pcapng "
              "file's record rows, batch by batch.",
    .tp_methods = Reader_methods,
    .tp_init = (initproc)Reader_init,
    .tp_new = PyType_GenericNew,
};

static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *err, *ep;
    if (!PyArg_ParseTuple(args, "OO:configure", &err, &ep))
        return NULL;
    Py_XDECREF(capture_error);
    Py_XDECREF(endpoint_fn);
    Py_INCREF(err);
    Py_INCREF(ep);
    capture_error = err;
    endpoint_fn = ep;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(capture_error, endpoint): the CaptureError factory (kind, message, offset) and "
     "the IPv6 endpoint formatter (address bytes, port) the reader uses."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native",
                                    "The capture loop in C (see _native.c).", -1, methods};

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&BlockType) < 0 || PyType_Ready(&ReaderType) < 0)
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
