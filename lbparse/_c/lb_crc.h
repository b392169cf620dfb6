/* CRC-32C (and CRC-32 IEEE) for lbparse's C modules, written once.
 *
 * Slicing-by-8 over tables made for a polynomial (any CPU; little-endian
 * words 8 bytes at a time, bytes one by one elsewhere), and CRC-32C by the
 * SSE 4.2 crc32 instruction where the CPU has it. Included by
 * columnar/_kernels.c and storage/_scan.c; tests/columnar/test_kernels.py and
 * tests/storage/test_storage_native.py hold both paths equal to the crc32c package
 * and zlib.crc32.
 */
#ifndef LB_CRC_H
#define LB_CRC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define LB_CRC32C_POLY 0x82F63B78u  /* CRC-32C (Castagnoli), reflected */
#define LB_CRC32_IEEE_POLY 0xEDB88320u /* CRC-32 (IEEE 802.3), reflected */

typedef uint32_t lb_crc_table[8][256];

static void lb_crc_tables(lb_crc_table t, uint32_t poly) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (poly & (0u - (c & 1u)));
        t[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 1; k < 8; k++)
            t[k][n] = (t[k - 1][n] >> 8) ^ t[0][t[k - 1][n] & 0xFF];
}

static uint32_t lb_crc_soft(uint32_t (*t)[256], const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    /* The tables index bytes in memory order: little-endian words only. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        uint32_t lo = (uint32_t)w ^ c, hi = (uint32_t)(w >> 32);
        c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
            t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
        p += 8;
        n -= 8;
    }
#endif
    while (n--)
        c = (c >> 8) ^ t[0][(c ^ *p++) & 0xFF];
    return c ^ 0xFFFFFFFFu;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define LB_CRC32C_HW 1
__attribute__((target("sse4.2"))) static uint32_t lb_crc32c_hw(const uint8_t *p, size_t n) {
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

/* Whether lb_crc32c_hw may run here. */
static int lb_crc32c_has_hw(void) {
#ifdef LB_CRC32C_HW
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
    return 0;
#endif
}

#endif /* LB_CRC_H */
