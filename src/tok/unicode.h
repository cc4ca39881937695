/* unicode.h: the Unicode support the tokenizer needs: UTF-8 decoding, character classes (from tables
 * generated out of the Unicode Character Database by tools/gen_unicode.py) and NFC normalization. */
#ifndef MF_TOK_UNICODE_H
#define MF_TOK_UNICODE_H

#include "core/core.h"

/* Class flags of a code point (General_Category major class, White_Space property). */
enum {
    MF_UC_LETTER = 1,     /* \p{L} */
    MF_UC_NUMBER = 2,     /* \p{N} */
    MF_UC_SPACE = 4,      /* \s: the White_Space property */
    MF_UC_MARK = 8,       /* \p{M} */
    MF_UC_PUNCT = 16,     /* \p{P} */
    MF_UC_SYMBOL = 32,    /* \p{S} */
    MF_UC_NFC_STABLE = 64 /* NFC_Quick_Check=Yes and combining class 0: NFC can restart here */
};

typedef struct { uint32_t first, last; uint8_t ccc; } mf_uc_ccc_range;
typedef struct { uint32_t cp, offset, len; } mf_uc_decomp;
typedef struct { uint64_t key; uint32_t cp; } mf_uc_comp;

extern const char mf_unicode_version[];
extern const uint16_t mf_uc_stage1[];
extern const uint8_t mf_uc_stage2[];
extern const mf_uc_ccc_range mf_uc_ccc[];
extern const size_t mf_uc_n_ccc;
extern const mf_uc_decomp mf_uc_decomp_index[];
extern const size_t mf_uc_n_decomp;
extern const uint32_t mf_uc_decomp_pool[];
extern const mf_uc_comp mf_uc_comp_table[];
extern const size_t mf_uc_n_comp;

#define MF_UC_BLOCK 128

static inline unsigned mf_uc_flags(uint32_t cp) {
    if (cp >= 0x110000) return 0;
    return mf_uc_stage2[(size_t)mf_uc_stage1[cp / MF_UC_BLOCK] * MF_UC_BLOCK + cp % MF_UC_BLOCK];
}

/* Decode one UTF-8 character from s[0..n) (n >= 1). Returns its length in bytes (1..4) and the code
 * point in *cp. A malformed or truncated sequence, an overlong form or a surrogate decodes as one
 * byte with *cp = MF_UC_INVALID, so every byte string splits into characters the same way. */
#define MF_UC_INVALID 0xFFFFFFFFu
static inline size_t mf_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; v = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; v = c & 0x07; min = 0x10000; }
    else { *cp = MF_UC_INVALID; return 1; }
    if (len > n) { *cp = MF_UC_INVALID; return 1; }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) { *cp = MF_UC_INVALID; return 1; }
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) { *cp = MF_UC_INVALID; return 1; }
    *cp = v;
    return len;
}

/* Encode cp (<= 0x10FFFF) as UTF-8 into out (4 bytes of room); returns the length. */
size_t mf_utf8_encode(uint32_t cp, uint8_t *out);

/* Canonical combining class of cp (0 for most characters). */
uint8_t mf_uc_ccc_of(uint32_t cp);

/* True when s[0..n) is NFC already (a fast scan; false means "normalize to find out"). */
bool mf_nfc_is_stable(const uint8_t *s, size_t n);

/* NFC-normalize s[0..n) into *out (grown with mf_realloc as needed; *cap is its capacity), setting
 * *out_len. Bytes that are not valid UTF-8 are copied through unchanged and act as boundaries. */
mf_status mf_nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *cap, size_t *out_len);

#endif /* MF_TOK_UNICODE_H */
