/* unicode.c: UTF-8 encoding, combining-class lookup and NFC normalization (canonical decomposition,
 * canonical ordering, canonical composition, Hangul by arithmetic) over the generated UCD tables.
 * NFC works chunk by chunk: a chunk starts at a character that is NFC-stable (quick check Yes and
 * combining class 0, so nothing before it can change it or combine with it) and runs to the next one;
 * chunks made of one stable character are copied, so normalization costs a scan on most text. */
#include "tok/unicode.h"

#include <stdlib.h>

/* Hangul syllable arithmetic (Unicode ch. 3.12). */
enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7 };
enum { LCOUNT = 19, VCOUNT = 21, TCOUNT = 28, NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT };

size_t mf_utf8_encode(uint32_t cp, uint8_t *out) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | cp >> 6);
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | cp >> 12);
        out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | cp >> 18);
    out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

uint8_t mf_uc_ccc_of(uint32_t cp) {
    if (cp < 0x300) return 0;
    size_t lo = 0, hi = mf_uc_n_ccc;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < mf_uc_ccc[mid].first) hi = mid;
        else if (cp > mf_uc_ccc[mid].last) lo = mid + 1;
        else return mf_uc_ccc[mid].ccc;
    }
    return 0;
}

static const mf_uc_decomp *find_decomp(uint32_t cp) {
    size_t lo = 0, hi = mf_uc_n_decomp;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < mf_uc_decomp_index[mid].cp) hi = mid;
        else if (cp > mf_uc_decomp_index[mid].cp) lo = mid + 1;
        else return &mf_uc_decomp_index[mid];
    }
    return NULL;
}

/* The primary composite of (a, b), or 0 if there is none. */
static uint32_t compose_pair(uint32_t a, uint32_t b) {
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE && b < TBASE + TCOUNT)
        return a + (b - TBASE);
    if (a >= 0x110000 || b >= 0x110000) return 0;
    uint64_t key = (uint64_t)a << 21 | b;
    size_t lo = 0, hi = mf_uc_n_comp;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (key < mf_uc_comp_table[mid].key) hi = mid;
        else if (key > mf_uc_comp_table[mid].key) lo = mid + 1;
        else return mf_uc_comp_table[mid].cp;
    }
    return 0;
}

bool mf_nfc_is_stable(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        i += mf_utf8_decode(s + i, n - i, &cp);
        if (cp != MF_UC_INVALID && !(mf_uc_flags(cp) & MF_UC_NFC_STABLE)) return false;
    }
    return true;
}

/* Scratch code point buffer of one normalization call. */
typedef struct {
    uint32_t *cp;
    uint8_t *cc;
    size_t n, cap;
} cpbuf;

static mf_status cpbuf_push(cpbuf *b, uint32_t cp) {
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        uint32_t *ncp = mf_realloc(b->cp, cap * sizeof *ncp);
        if (!ncp) return MF_ERR_NOMEM;
        b->cp = ncp;
        uint8_t *ncc = mf_realloc(b->cc, cap);
        if (!ncc) return MF_ERR_NOMEM;
        b->cc = ncc;
        b->cap = cap;
    }
    b->cp[b->n] = cp;
    b->cc[b->n] = mf_uc_ccc_of(cp);
    b->n++;
    return MF_OK;
}

static mf_status decompose_into(cpbuf *b, uint32_t cp) {
    if (cp >= SBASE && cp < SBASE + SCOUNT) {
        uint32_t s = cp - SBASE, t = s % TCOUNT;
        mf_status st = cpbuf_push(b, LBASE + s / NCOUNT);
        if (!st) st = cpbuf_push(b, VBASE + s % NCOUNT / TCOUNT);
        if (!st && t) st = cpbuf_push(b, TBASE + t);
        return st;
    }
    const mf_uc_decomp *d = cp >= 0xC0 ? find_decomp(cp) : NULL;
    if (!d) return cpbuf_push(b, cp);
    for (uint32_t i = 0; i < d->len; i++) {
        mf_status st = cpbuf_push(b, mf_uc_decomp_pool[d->offset + i]);
        if (st) return st;
    }
    return MF_OK;
}

/* Canonical ordering: stable sort of each run of nonzero combining classes by class. Runs are
 * short in real text; long runs use a counting sort so hostile input stays linear. */
static void canonical_order(cpbuf *b, uint32_t *tmp_cp) {
    size_t i = 0;
    while (i < b->n) {
        if (!b->cc[i]) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < b->n && b->cc[j]) j++;
        size_t len = j - i;
        if (len <= 32) {
            for (size_t k = i + 1; k < j; k++) {
                uint32_t c = b->cp[k];
                uint8_t cc = b->cc[k];
                size_t m = k;
                while (m > i && b->cc[m - 1] > cc) {
                    b->cp[m] = b->cp[m - 1];
                    b->cc[m] = b->cc[m - 1];
                    m--;
                }
                b->cp[m] = c;
                b->cc[m] = cc;
            }
        } else {
            size_t count[257] = {0};
            for (size_t k = i; k < j; k++) count[b->cc[k] + 1]++;
            for (int c = 1; c < 257; c++) count[c] += count[c - 1];
            for (size_t k = i; k < j; k++) tmp_cp[count[b->cc[k]]++] = b->cp[k];
            for (size_t k = 0; k < len; k++) {
                b->cp[i + k] = tmp_cp[k];
                b->cc[i + k] = mf_uc_ccc_of(tmp_cp[k]);
            }
        }
        i = j;
    }
}

/* Canonical composition in place (UAX #15): a character combines with the last starter unless a
 * character between them has class 0 or a class >= its own. */
static void compose(cpbuf *b) {
    if (b->n == 0) return;
    size_t out = 0, starter = SIZE_MAX;
    int last_cc = -1; /* class of the last character kept after the starter; -1: none */
    for (size_t i = 0; i < b->n; i++) {
        uint32_t c = b->cp[i];
        int cc = b->cc[i];
        if (starter != SIZE_MAX && (last_cc == -1 || (last_cc != 0 && last_cc < cc))) {
            uint32_t comp = compose_pair(b->cp[starter], c);
            if (comp) {
                b->cp[starter] = comp;
                b->cc[starter] = 0;
                continue;
            }
        }
        if (cc == 0) {
            starter = out;
            last_cc = -1;
        } else {
            last_cc = cc;
        }
        b->cp[out] = c;
        b->cc[out] = (uint8_t)cc;
        out++;
    }
    b->n = out;
}

static mf_status out_reserve(uint8_t **out, size_t *cap, size_t need) {
    if (need <= *cap) return MF_OK;
    size_t ncap = *cap ? *cap : 256;
    while (ncap < need) ncap *= 2;
    uint8_t *p = mf_realloc(*out, ncap);
    if (!p) return MF_ERR_NOMEM;
    *out = p;
    *cap = ncap;
    return MF_OK;
}

mf_status mf_nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *cap, size_t *out_len) {
    size_t o = 0;
    cpbuf b = {0};
    uint32_t *tmp = NULL;
    size_t tmp_cap = 0;
    mf_status st = out_reserve(out, cap, n + 1);
    size_t i = 0;
    while (!st && i < n) {
        /* Chunk [i, j): one character (any), then every following valid non-stable character. */
        uint32_t cp;
        size_t j = i + mf_utf8_decode(s + i, n - i, &cp);
        bool first_valid = cp != MF_UC_INVALID;
        bool simple = true;
        while (first_valid && j < n && s[j] >= 0x80) {
            uint32_t c2;
            size_t l = mf_utf8_decode(s + j, n - j, &c2);
            if (c2 == MF_UC_INVALID || (mf_uc_flags(c2) & MF_UC_NFC_STABLE)) break;
            simple = false;
            j += l;
        }
        if (first_valid && simple && !(mf_uc_flags(cp) & MF_UC_NFC_STABLE)) simple = false;
        if (simple) {
            if ((st = out_reserve(out, cap, o + (j - i)))) break;
            memcpy(*out + o, s + i, j - i);
            o += j - i;
            i = j;
            continue;
        }
        b.n = 0;
        for (size_t k = i; k < j && !st;) {
            uint32_t c;
            k += mf_utf8_decode(s + k, j - k, &c);
            st = decompose_into(&b, c);
        }
        if (st) break;
        if (b.n > tmp_cap) {
            uint32_t *t = mf_realloc(tmp, b.n * sizeof *t);
            if (!t) {
                st = MF_ERR_NOMEM;
                break;
            }
            tmp = t;
            tmp_cap = b.n;
        }
        canonical_order(&b, tmp);
        compose(&b);
        if ((st = out_reserve(out, cap, o + b.n * 4))) break;
        for (size_t k = 0; k < b.n; k++) o += mf_utf8_encode(b.cp[k], *out + o);
        i = j;
    }
    free(b.cp);
    free(b.cc);
    free(tmp);
    *out_len = o;
    return st;
}

size_t mf_utf8_valid_len(const char *s, size_t n) {
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        const size_t len = mf_utf8_decode(u + i, n - i, &cp);
        if (cp == MF_UC_INVALID) break;
        i += len;
    }
    return i;
}
