/* The protobuf varint for lbparse's C modules, written once (columnar/_kernels.c,
 * columnar/_structs.c); wirescan.py's numpy reader is the Python side, and
 * tests/columnar/test_kernels.py and tests/columnar/test_native_decode.py hold them equal. */
#ifndef LB_VARINT_H
#define LB_VARINT_H

#include <stdint.h>

/* A varint at p (before lim): its value and the position after it; 0 if it
 * runs past lim, is longer than 10 bytes or has bits past 64. */
static inline int lb_varint(const uint8_t *d, int64_t p, int64_t lim, uint64_t *val,
                            int64_t *next) {
    if (p < lim && d[p] < 0x80) { /* one byte: most tags and lengths */
        *val = d[p];
        *next = p + 1;
        return 1;
    }
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

#endif /* LB_VARINT_H */
