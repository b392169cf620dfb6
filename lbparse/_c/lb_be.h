/* Big-endian unsigned integers for lbparse's C modules, written once
 * (columnar/_kernels.c's envelope headers, storage/_scan.c's segment
 * entries, lb_msgpack.h's lengths and numbers). The Python references read
 * them with int.from_bytes(..., "big") / struct's ">" formats. */
#ifndef LB_BE_H
#define LB_BE_H

#include <stdint.h>

/* The unsigned big-endian integer of the n (<= 8) bytes at p. */
static inline uint64_t lb_be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int k = 0; k < n; k++)
        v = (v << 8) | p[k];
    return v;
}

#endif
