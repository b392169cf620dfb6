/* Big-endian unsigned integers for lbparse's C modules, written once
 * (columnar/_kernels.c's envelope headers, storage/_scan.c's segment
 * entries, lb_msgpack.h's lengths and numbers). The Python references read
 * them with int.from_bytes(..., "big") / struct's ">" formats. */
#ifndef LB_BE_H
#define LB_BE_H

#include <stdint.h>
#include <string.h>

/* The unsigned big-endian integer of the n (<= 8) bytes at p, read by
 * the byte: the portable reading, and lb_be's for widths other than 2, 4, 8. */
static inline uint64_t lb_be_bytes(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int k = 0; k < n; k++)
        v = (v << 8) | p[k];
    return v;
}

/* The unsigned big-endian integer of the n (<= 8) bytes at p. The common
 * widths are one load and a byte swap: the loop's dependent shifts were
 * most of a 16-byte ReplicationResponse's time in _kernels.replication
 * (5,072 of them: 76 us a call). */
static inline uint64_t lb_be(const uint8_t *p, int n) {
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    switch (n) {
    case 8: {
        uint64_t v;
        memcpy(&v, p, 8);
        return __builtin_bswap64(v);
    }
    case 4: {
        uint32_t v;
        memcpy(&v, p, 4);
        return __builtin_bswap32(v);
    }
    case 2: {
        uint16_t v;
        memcpy(&v, p, 2);
        return __builtin_bswap16(v);
    }
    case 1:
        return p[0];
    default:
        break;
    }
#endif
    return lb_be_bytes(p, n);
}

#endif
