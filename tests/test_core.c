/* test_core.c: the error channel, checked arithmetic and fp16/bf16 conversions. */
#include "core/arena.h"
#include "core/core.h"
#include "test.h"

static void test_status(void) {
    for (int s = 0; s < MF_STATUS_COUNT; s++) CHECK(mf_status_str((mf_status)s)[0] != 0);
    CHECK(!strcmp(mf_status_str(MF_OK), "ok"));
    CHECK(mf_fail(MF_ERR_FORMAT, "bad %s at %d", "thing", 7) == MF_ERR_FORMAT);
    CHECK(!strcmp(mf_last_error(), "bad thing at 7"));
    mf_fail_context(MF_ERR_FORMAT, "loading %s", "x.gguf");
    CHECK(!strcmp(mf_last_error(), "loading x.gguf: bad thing at 7"));
}

static void test_arith(void) {
    uint64_t r;
    CHECK(mf_add_u64(1, 2, &r) && r == 3);
    CHECK(!mf_add_u64(UINT64_MAX, 1, &r));
    CHECK(!mf_mul_u64(UINT64_MAX / 2, 3, &r));
    CHECK(mf_align_up_u64(33, 32, &r) && r == 64);
    CHECK(mf_align_up_u64(64, 32, &r) && r == 64);
    CHECK(!mf_align_up_u64(UINT64_MAX - 3, 32, &r));
}

/* Every half converts to float and back to itself (NaNs stay NaN). */
static void test_fp16(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = mf_fp16_to_f32((mf_fp16)h);
        mf_fp16 back = mf_f32_to_fp16(f);
        if (isnan(f)) bad += !((back & 0x7c00) == 0x7c00 && (back & 0x3ff));
        else bad += back != h;
    }
    CHECKF(bad == 0, "%d halves did not round-trip", bad);
    CHECK(mf_fp16_to_f32(0x3c00) == 1.0f);
    CHECK(mf_fp16_to_f32(0xc000) == -2.0f);
    CHECK(mf_fp16_to_f32(0x0001) == 0x1p-24f);
    CHECK(mf_f32_to_fp16(65520.0f) == 0x7c00);     /* rounds to inf */
    CHECK(mf_f32_to_fp16(65519.0f) == 0x7bff);     /* largest finite */
    CHECK(mf_f32_to_fp16(1.0f + 0x1p-11f) == 0x3c00); /* tie rounds to even */
    CHECK(mf_f32_to_fp16(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01);
    CHECK(mf_f32_to_fp16(0x1p-25f) == 0x0000);     /* tie to even: 0 */
    CHECK(mf_f32_to_fp16(0x1p-25f * 3) == 0x0002);
    CHECK(mf_bf16_to_f32(mf_f32_to_bf16(1.5f)) == 1.5f);
    CHECK(mf_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80); /* tie to even */
}

/* Arena: alignment, large requests, the limit, reuse after free. */
static void test_arena(void) {
    mf_arena a = {.block_size = 256};
    char *s = mf_arena_strndup(&a, "hello", 3);
    CHECK(s && !strcmp(s, "hel"));
    int misaligned = 0;
    for (int i = 1; i < 100; i++) {
        unsigned char *p = mf_arena_alloc(&a, (size_t)i * 7);
        misaligned += p == NULL || ((uintptr_t)p & 15) != 0;
        if (p) memset(p, 0xab, (size_t)i * 7);
    }
    CHECK(misaligned == 0);
    CHECK(mf_arena_alloc(&a, 100000) != NULL); /* larger than a block */
    CHECK(s[0] == 'h');                        /* earlier data intact */
    CHECK(mf_arena_alloc(&a, SIZE_MAX) == NULL && mf_arena_last_status() == MF_ERR_NOMEM);
    mf_arena_free(&a);
    CHECK(a.head == NULL && a.reserved == 0);
    a.limit = 1000;
    CHECK(mf_arena_alloc(&a, 100) != NULL);
    CHECK(mf_arena_alloc(&a, 5000) == NULL && mf_arena_last_status() == MF_ERR_RANGE);
    CHECK(strstr(mf_last_error(), "memory limit of 1000") != NULL);
    mf_arena_free(&a);
}

int main(void) {
    test_arena();
    test_status();
    test_arith();
    test_fp16();
    return test_summary("test_core");
}
