/* test_core.c: the error channel, checked arithmetic and fp16/bf16 conversions. */
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

int main(void) {
    test_status();
    test_arith();
    test_fp16();
    return test_summary("test_core");
}
