/* lbparse/_c/lb_gbuf.h alone, held to its rule (tests/columnar/test_kernels.py
 * compiles and runs this): one line per check, "name ok" or "name FAILED". */
#include <stdio.h>

#include "lb_gbuf.h"

static int failed = 0;

static void check(const char *name, int ok) {
    printf("%s %s\n", name, ok ? "ok" : "FAILED");
    failed |= !ok;
}

/* The buffer still holds "abc", with its block and capacity. */
static int intact(const lb_gbuf *g, const uint8_t *p, size_t cap) {
    return g->p == p && g->len == 3 && g->cap == cap && !memcmp(g->p, "abc", 3);
}

int main(void) {
    lb_gbuf g = {0, 0, 0};
    check("empty_put_allocates_nothing", lb_gb_put(&g, "", 0) == 0 && !g.p && !g.cap);
    check("first_capacity", lb_gb_put(&g, "abc", 3) == 0 && g.cap == LB_GBUF_FIRST);
    uint8_t *p = g.p;
    size_t cap = g.cap;

    /* size_t overflow: len + extra wraps, or passes LB_GBUF_MAX */
    check("wrapping_size_refused", lb_gb_reserve(&g, SIZE_MAX) == -1 && intact(&g, p, cap));
    check("wrapping_put_refused", lb_gb_put(&g, "x", SIZE_MAX - 1) == -1 && intact(&g, p, cap));
    check("past_max_refused",
          lb_gb_reserve(&g, LB_GBUF_MAX - 2) == -1 && intact(&g, p, cap));
    check("set_past_max_refused",
          lb_gb_set(&g, "x", LB_GBUF_MAX + (size_t)1) == -1 && intact(&g, p, cap));
    check("room_past_max_refused",
          lb_gb_room(&g, LB_GBUF_MAX + (size_t)1) == -1 && intact(&g, p, cap));
    /* a size within the rule that no allocator gives: the allocation fails */
    check("failed_allocation_leaves_it", lb_gb_reserve(&g, LB_GBUF_MAX - 3) == -1 &&
                                           intact(&g, p, cap));

    /* doubling: 64, 128, 256, ... as the bytes come */
    int doubled = 1;
    for (int i = 0; i < 5000; i++) {
        size_t before = g.cap;
        if (lb_gb_put(&g, "d", 1) < 0) {
            doubled = 0;
            break;
        }
        doubled &= g.cap == before || g.cap == 2 * before;
    }
    check("doubles", doubled && g.len == 5003 && g.cap == 8192 && !memcmp(g.p, "abcd", 4));
    check("room_doubles_past_a_size", lb_gb_room(&g, 40000) == 0 && g.cap == 65536);

    /* set replaces; from the buffer's own bytes too */
    check("set_replaces", lb_gb_set(&g, g.p + 1, 3) == 0 && g.len == 3 &&
                              !memcmp(g.p, "bcd", 3) && g.cap == 65536);
    size_t len = g.len;
    uint8_t *block = lb_gb_detach(&g);
    check("detach_hands_the_block_on", block && len == 3 && !g.p && !g.len && !g.cap);
    free(block);
    check("detached_buffer_grows_again", lb_gb_put(&g, "z", 1) == 0 && g.cap == LB_GBUF_FIRST);
    lb_gb_free(&g);
    check("free_empties", !g.p && !g.len && !g.cap);
    return failed;
}
