/* jinja_value.c: the interpreter's arena, values and their Python-compatible conversions: str(),
 * repr(), json.dumps() (as Hugging Face's tojson calls it), equality and ordering, UTF-8 helpers
 * (Python strings index code points, not bytes) and the conversion of a jansson context. */
#include "chat/jinja.h"
#include "chat/jinja_case.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- arena ---- */
void jarena_fail(jarena *a, mf_status s, const char *fmt, ...) {
    if (a->errbuf) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(a->errbuf, a->errcap, fmt, ap);
        va_end(ap);
    }
    a->fail_status = s;
    MF_ASSERT(a->on_fail != NULL);
    longjmp(*a->on_fail, 1);
}

void *jarena_alloc(jarena *a, size_t n) {
    if (n > ((size_t)1 << 40)) jarena_fail(a, MF_ERR_RANGE, "template interpreter asked for %zu bytes at once", n);
    void *p = mf_arena_alloc(&a->mem, n);
    if (!p) {
        if (mf_arena_last_status() == MF_ERR_RANGE)
            jarena_fail(a, MF_ERR_RANGE, "template rendering exceeded its memory limit of %zu bytes", a->mem.limit);
        jarena_fail(a, MF_ERR_NOMEM, "out of memory (%zu bytes) in the template interpreter", n);
    }
    return p;
}

void jarena_free(jarena *a) { mf_arena_free(&a->mem); }

char *jarena_strndup(jarena *a, const char *s, size_t n) {
    char *p = jarena_alloc(a, n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* ---- containers ---- */
jv jv_list_new(jctx *c, size_t cap) {
    jv v = {.type = JV_LIST};
    v.l = jarena_alloc(&c->arena, sizeof *v.l);
    v.l->n = 0;
    v.l->cap = cap ? cap : 4;
    v.l->v = jarena_alloc(&c->arena, v.l->cap * sizeof(jv));
    return v;
}

void jv_list_push(jctx *c, jv list, jv item) {
    jlist *l = list.l;
    if (l->n == l->cap) {
        jv *nv = jarena_alloc(&c->arena, 2 * l->cap * sizeof(jv));
        memcpy(nv, l->v, l->n * sizeof(jv));
        l->v = nv;
        l->cap *= 2;
    }
    l->v[l->n++] = item;
}

jv jv_dict_new(jctx *c, size_t cap) {
    jv v = {.type = JV_DICT};
    v.d = jarena_alloc(&c->arena, sizeof *v.d);
    v.d->n = 0;
    v.d->cap = cap ? cap : 4;
    v.d->k = jarena_alloc(&c->arena, v.d->cap * sizeof(jv));
    v.d->v = jarena_alloc(&c->arena, v.d->cap * sizeof(jv));
    return v;
}

jv *jv_dict_get(const jdict *d, jv key) {
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->k[i], key)) return &d->v[i];
    return NULL;
}

jv *jv_dict_get_str(const jdict *d, const char *key, size_t n) {
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].type == JV_STR && d->k[i].s.n == n && !memcmp(d->k[i].s.p, key, n)) return &d->v[i];
    return NULL;
}

void jv_dict_set(jctx *c, jdict *d, jv key, jv val) {
    jv *slot = jv_dict_get(d, key);
    if (slot) {
        *slot = val;
        return;
    }
    if (d->n == d->cap) {
        jv *nk = jarena_alloc(&c->arena, 2 * d->cap * sizeof(jv));
        jv *nv = jarena_alloc(&c->arena, 2 * d->cap * sizeof(jv));
        memcpy(nk, d->k, d->n * sizeof(jv));
        memcpy(nv, d->v, d->n * sizeof(jv));
        d->k = nk;
        d->v = nv;
        d->cap *= 2;
    }
    d->k[d->n] = key;
    d->v[d->n++] = val;
}

/* ---- truth, equality, order ---- */
bool jv_truthy(jv v) {
    switch (v.type) {
    case JV_UNDEF: case JV_NONE: return false;
    case JV_BOOL: return v.b;
    case JV_INT: return v.i != 0;
    case JV_FLOAT: return v.f != 0.0;
    case JV_STR: return v.s.n != 0;
    case JV_LIST: return v.l->n != 0 || (v.flags & JV_GEN);
    case JV_DICT: return v.d->n != 0;
    default: return true;
    }
}

static bool is_num(jv v) { return v.type == JV_BOOL || v.type == JV_INT || v.type == JV_FLOAT; }
static double num_f(jv v) { return v.type == JV_FLOAT ? v.f : v.type == JV_INT ? (double)v.i : (double)v.b; }
static int64_t num_i(jv v) { return v.type == JV_INT ? v.i : v.type == JV_BOOL ? (int64_t)v.b : 0; }

/* Containers built at run time can nest arbitrarily deep ({% set ns.l = [ns.l] %} in a loop), so
 * every recursive walk is bounded: equality treats values nested deeper than this as different;
 * ordering, printing and JSON fail with an error. */
#define MAX_VALUE_DEPTH 200

static bool equal_at(jv a, jv b, int depth);

bool jv_equal(jv a, jv b) { return equal_at(a, b, 0); }

static bool equal_at(jv a, jv b, int depth) {
    if (depth > MAX_VALUE_DEPTH) return false;
    if (is_num(a) && is_num(b)) {
        if (a.type == JV_FLOAT || b.type == JV_FLOAT) return num_f(a) == num_f(b);
        return num_i(a) == num_i(b);
    }
    if (a.type != b.type) return false;
    switch (a.type) {
    case JV_UNDEF: case JV_NONE: return true;
    case JV_STR: return a.s.n == b.s.n && !memcmp(a.s.p, b.s.p, a.s.n);
    case JV_LIST:
        if (a.flags != b.flags || a.l->n != b.l->n || (a.flags & JV_GEN)) return a.l == b.l;
        for (size_t i = 0; i < a.l->n; i++)
            if (!equal_at(a.l->v[i], b.l->v[i], depth + 1)) return false;
        return true;
    case JV_DICT:
        if (a.d->n != b.d->n) return false;
        for (size_t i = 0; i < a.d->n; i++) {
            jv *o = jv_dict_get(b.d, a.d->k[i]);
            if (!o || !equal_at(a.d->v[i], *o, depth + 1)) return false;
        }
        return true;
    case JV_NS: return a.d == b.d;
    case JV_MACRO: return a.m == b.m;
    case JV_FUNC: return a.fn == b.fn;
    default: return false;
    }
}

const char *jv_type_name(jv v) {
    switch (v.type) {
    case JV_UNDEF: return "undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return v.flags & JV_TUPLE ? "tuple" : v.flags & JV_GEN ? "generator" : "list";
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    case JV_MACRO: return "Macro";
    case JV_FUNC: return "function";
    case JV_METHOD: return "method";
    case JV_LOOP: return "LoopContext";
    }
    return "?";
}

static int compare_at(jctx *c, jv a, jv b, int depth);
int jv_compare(jctx *c, jv a, jv b) { return compare_at(c, a, b, 0); }

static int compare_at(jctx *c, jv a, jv b, int depth) {
    if (depth > MAX_VALUE_DEPTH) jinja_error(c, MF_ERR_RANGE, "comparing values nested deeper than %d levels", MAX_VALUE_DEPTH);
    if (is_num(a) && is_num(b)) {
        if (a.type == JV_FLOAT || b.type == JV_FLOAT) {
            double x = num_f(a), y = num_f(b);
            return x < y ? -1 : x > y ? 1 : 0;
        }
        int64_t x = num_i(a), y = num_i(b);
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.type == JV_STR && b.type == JV_STR) {
        /* UTF-8 byte order is code point order, which is how Python orders str */
        int r = memcmp(a.s.p, b.s.p, MF_MIN(a.s.n, b.s.n));
        if (r) return r < 0 ? -1 : 1;
        return a.s.n < b.s.n ? -1 : a.s.n > b.s.n ? 1 : 0;
    }
    if (a.type == JV_LIST && b.type == JV_LIST) {
        for (size_t i = 0; i < a.l->n && i < b.l->n; i++) {
            if (jv_equal(a.l->v[i], b.l->v[i])) continue;
            return compare_at(c, a.l->v[i], b.l->v[i], depth + 1);
        }
        return a.l->n < b.l->n ? -1 : a.l->n > b.l->n ? 1 : 0;
    }
    jinja_error(c, MF_ERR_FORMAT, "'<' not supported between instances of '%s' and '%s'", jv_type_name(a),
                jv_type_name(b));
}

/* ---- buffers ---- */
void jbuf_put(jbuf *b, const char *s, size_t n) {
    if (b->cap - b->n < n) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->n < n) {
            if (cap > b->max) jarena_fail(b->a, MF_ERR_RANGE, "a string grew past the output limit of %zu bytes", b->max);
            cap *= 2;
        }
        char *p = jarena_alloc(b->a, cap);
        if (b->n) memcpy(p, b->p, b->n);
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
}

void jbuf_putc(jbuf *b, char ch) { jbuf_put(b, &ch, 1); }

void jbuf_printf(jbuf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) jbuf_put(b, tmp, MF_MIN((size_t)n, sizeof tmp - 1));
}

jv jbuf_value(jbuf *b) { return jv_strn(b->n ? b->p : "", b->n); }

/* ---- UTF-8 ---- */
size_t ju_decode(const char *s, size_t n, uint32_t *cp) {
    const unsigned char *p = (const unsigned char *)s;
    if (n == 0) return *cp = 0, 0;
    if (p[0] < 0x80) return *cp = p[0], 1;
    int len = p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC0 ? 2 : 1;
    if (len == 1 || (size_t)len > n) return *cp = p[0], 1;
    uint32_t v = p[0] & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) return *cp = p[0], 1;
        v = (v << 6) | (p[i] & 0x3F);
    }
    *cp = v;
    return (size_t)len;
}

void ju_encode(jbuf *b, uint32_t cp) {
    char t[4];
    if (cp < 0x80) { t[0] = (char)cp; jbuf_put(b, t, 1); }
    else if (cp < 0x800) { t[0] = (char)(0xC0 | cp >> 6); t[1] = (char)(0x80 | (cp & 0x3F)); jbuf_put(b, t, 2); }
    else if (cp < 0x10000) {
        t[0] = (char)(0xE0 | cp >> 12); t[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); t[2] = (char)(0x80 | (cp & 0x3F));
        jbuf_put(b, t, 3);
    } else {
        t[0] = (char)(0xF0 | cp >> 18); t[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        t[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); t[3] = (char)(0x80 | (cp & 0x3F));
        jbuf_put(b, t, 4);
    }
}

void ju_trim_partial(char *s) {
    size_t n = strlen(s), st = n;
    while (st > 0 && ((unsigned char)s[st - 1] & 0xC0) == 0x80 && n - st < 3) st--;
    if (st == 0) return;
    unsigned char lead = (unsigned char)s[st - 1];
    size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    if (lead >= 0x80 && n - (st - 1) < want) s[st - 1] = 0;
}

size_t ju_len(const char *p, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)p[i] & 0xC0) != 0x80;
    return k;
}

size_t ju_offset(const char *p, size_t n, size_t cp_index) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (((unsigned char)p[i] & 0xC0) != 0x80) {
            if (k == cp_index) return i;
            k++;
        }
    }
    return n;
}

bool ju_isspace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

size_t ju_space_prefix(const char *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = ju_decode(p + i, n - i, &cp);
        if (!ju_isspace(cp)) break;
        i += k;
    }
    return i;
}

size_t ju_space_suffix(const char *p, size_t n) {
    size_t end = n;
    while (end > 0) {
        size_t start = end - 1;
        while (start > 0 && ((unsigned char)p[start] & 0xC0) == 0x80 && end - start < 4) start--;
        uint32_t cp;
        if (ju_decode(p + start, end - start, &cp) != end - start || !ju_isspace(cp)) break;
        end = start;
    }
    return n - end;
}

/* Case mapping and character classes from the generated tables (jinja_case_data.c). */
static const uint32_t *find_pair(const uint32_t (*t)[2], size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t[mid][0] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && t[lo][0] == cp ? t[lo] : NULL;
}

static bool in_ranges(const uint32_t (*t)[2], size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) { /* first range whose end is >= cp */
        size_t mid = lo + (hi - lo) / 2;
        if (t[mid][1] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && t[lo][0] <= cp;
}

static const char *find_special(const ju_special *t, size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t[mid].cp < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && t[lo].cp == cp ? t[lo].utf8 : NULL;
}

uint32_t ju_upper(uint32_t c) {
    const uint32_t *p = find_pair(ju_case.upper, ju_case.n_upper, c);
    return p ? p[1] : c;
}

uint32_t ju_lower(uint32_t c) {
    const uint32_t *p = find_pair(ju_case.lower, ju_case.n_lower, c);
    return p ? p[1] : c;
}

bool ju_iscased(uint32_t c) { return in_ranges(ju_case.cased, ju_case.n_cased, c); }
bool ju_isalpha(uint32_t c) { return in_ranges(ju_case.alpha, ju_case.n_alpha, c); }
bool ju_isnumeric(uint32_t c) { return in_ranges(ju_case.numeric, ju_case.n_numeric, c); }
bool ju_case_ignorable(uint32_t c) { return in_ranges(ju_case.ignorable, ju_case.n_ignorable, c); }

bool ju_sigma_is_final(const char *s, size_t n, size_t at, size_t len) {
    /* Unicode's Final_Sigma: a cased letter before (case-ignorables skipped), none after */
    bool before = false, after = false;
    for (size_t j = at; j > 0;) {
        size_t st = j - 1;
        while (st > 0 && ((unsigned char)s[st] & 0xC0) == 0x80) st--;
        uint32_t cp;
        ju_decode(s + st, j - st, &cp);
        j = st;
        if (ju_case_ignorable(cp)) continue;
        before = ju_iscased(cp);
        break;
    }
    for (size_t j = at + len; j < n;) {
        uint32_t cp;
        j += ju_decode(s + j, n - j, &cp);
        if (ju_case_ignorable(cp)) continue;
        after = ju_iscased(cp);
        break;
    }
    return before && !after;
}

bool ju_case_changes(uint32_t cp, char kind) {
    if (kind == 'u') return find_pair(ju_case.upper, ju_case.n_upper, cp) || find_special(ju_case.upper_sp, ju_case.n_upper_sp, cp);
    return find_pair(ju_case.lower, ju_case.n_lower, cp) || find_special(ju_case.lower_sp, ju_case.n_lower_sp, cp);
}

void ju_put_case(jbuf *b, uint32_t cp, char kind) {
    const char *sp = NULL;
    const uint32_t *p = NULL;
    if (kind == 't') {
        if ((sp = find_special(ju_case.title_sp, ju_case.n_title_sp, cp))) { jbuf_put(b, sp, strlen(sp)); return; }
        if ((p = find_pair(ju_case.title, ju_case.n_title, cp))) { ju_encode(b, p[1]); return; }
        kind = 'u'; /* elsewhere title case is upper case */
    }
    if (kind == 'u') {
        if ((sp = find_special(ju_case.upper_sp, ju_case.n_upper_sp, cp))) { jbuf_put(b, sp, strlen(sp)); return; }
        ju_encode(b, ju_upper(cp));
        return;
    }
    if ((sp = find_special(ju_case.lower_sp, ju_case.n_lower_sp, cp))) { jbuf_put(b, sp, strlen(sp)); return; }
    ju_encode(b, ju_lower(cp));
}

/* ---- str / repr ---- */
void jv_write_float(jbuf *b, double f) {
    if (isnan(f)) { jbuf_put(b, "nan", 3); return; }
    if (isinf(f)) { jbuf_put(b, f > 0 ? "inf" : "-inf", f > 0 ? 3 : 4); return; }
    /* Python's repr: the shortest digit string that reads back to f, fixed notation when the
     * decimal exponent is in [-4, 16), else d.ddde+XX with at least two exponent digits. */
    char tmp[48];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    char digits[24];
    int nd = 0, neg = 0;
    const char *p = tmp;
    if (*p == '-') neg = 1, p++;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && nd < 20) digits[nd++] = *p;
    int exp = *p == 'e' ? atoi(p + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    if (neg) jbuf_putc(b, '-');
    if (exp >= -4 && exp < 16) {
        if (exp >= 0) {
            for (int i = 0; i <= exp; i++) jbuf_putc(b, i < nd ? digits[i] : '0');
            jbuf_putc(b, '.');
            if (nd > exp + 1) jbuf_put(b, digits + exp + 1, (size_t)(nd - exp - 1));
            else jbuf_putc(b, '0');
        } else {
            jbuf_put(b, "0.", 2);
            for (int i = 0; i < -exp - 1; i++) jbuf_putc(b, '0');
            jbuf_put(b, digits, (size_t)nd);
        }
    } else {
        jbuf_putc(b, digits[0]);
        if (nd > 1) {
            jbuf_putc(b, '.');
            jbuf_put(b, digits + 1, (size_t)(nd - 1));
        }
        jbuf_printf(b, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
}

static bool py_printable(uint32_t c) { return in_ranges(ju_case.printable, ju_case.n_printable, c); }

static void write_str_repr(jbuf *b, const char *s, size_t n) {
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    jbuf_putc(b, q);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = ju_decode(s + i, n - i, &cp);
        if (cp == (uint32_t)q || cp == '\\') { jbuf_putc(b, '\\'); jbuf_putc(b, (char)cp); }
        else if (cp == '\n') jbuf_put(b, "\\n", 2);
        else if (cp == '\r') jbuf_put(b, "\\r", 2);
        else if (cp == '\t') jbuf_put(b, "\\t", 2);
        else if (!py_printable(cp)) {
            if (cp < 0x100) jbuf_printf(b, "\\x%02x", cp);
            else if (cp < 0x10000) jbuf_printf(b, "\\u%04x", cp);
            else jbuf_printf(b, "\\U%08x", cp);
        } else jbuf_put(b, s + i, k);
        i += k;
    }
    jbuf_putc(b, q);
}

static void repr_at(jctx *c, jbuf *b, jv v, int depth);
void jv_write_repr(jctx *c, jbuf *b, jv v) { repr_at(c, b, v, 0); }

static void repr_at(jctx *c, jbuf *b, jv v, int depth) {
    if (depth > MAX_VALUE_DEPTH) jinja_error(c, MF_ERR_RANGE, "printing a value nested deeper than %d levels", MAX_VALUE_DEPTH);
    switch (v.type) {
    case JV_UNDEF: jbuf_put(b, "Undefined", 9); return;
    case JV_STR: write_str_repr(b, v.s.p, v.s.n); return;
    case JV_LIST: {
        if (v.flags & JV_GEN) { jbuf_put(b, "<generator object>", 18); return; }
        bool tup = v.flags & JV_TUPLE;
        jbuf_putc(b, tup ? '(' : '[');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) jbuf_put(b, ", ", 2);
            repr_at(c, b, v.l->v[i], depth + 1);
        }
        if (tup && v.l->n == 1) jbuf_putc(b, ',');
        jbuf_putc(b, tup ? ')' : ']');
        return;
    }
    case JV_DICT: case JV_NS: {
        if (v.type == JV_NS) jbuf_put(b, "<Namespace ", 11);
        jbuf_putc(b, '{');
        for (size_t i = 0; i < v.d->n; i++) {
            if (i) jbuf_put(b, ", ", 2);
            repr_at(c, b, v.d->k[i], depth + 1);
            jbuf_put(b, ": ", 2);
            repr_at(c, b, v.d->v[i], depth + 1);
        }
        jbuf_putc(b, '}');
        if (v.type == JV_NS) jbuf_putc(b, '>');
        return;
    }
    default: jv_write_str(c, b, v);
    }
}

void jv_write_str(jctx *c, jbuf *b, jv v) {
    switch (v.type) {
    case JV_UNDEF: return;
    case JV_NONE: jbuf_put(b, "None", 4); return;
    case JV_BOOL: v.b ? jbuf_put(b, "True", 4) : jbuf_put(b, "False", 5); return;
    case JV_INT: jbuf_printf(b, "%lld", (long long)v.i); return;
    case JV_FLOAT: jv_write_float(b, v.f); return;
    case JV_STR: jbuf_put(b, v.s.p, v.s.n); return;
    case JV_LIST: case JV_DICT: case JV_NS: jv_write_repr(c, b, v); return;
    case JV_MACRO: jbuf_put(b, "<Macro>", 7); return;
    case JV_FUNC: jbuf_put(b, "<function>", 10); return;
    case JV_METHOD: jbuf_put(b, "<built-in method>", 17); return;
    case JV_LOOP: jbuf_put(b, "<LoopContext>", 13); return;
    }
}

jv jv_to_str(jctx *c, jv v) {
    if (v.type == JV_STR) return v;
    if (v.type == JV_UNDEF) return jv_strn("", 0);
    jbuf b = jbuf_make(c);
    jv_write_str(c, &b, v);
    return jbuf_value(&b);
}

/* ---- JSON, as Python's json.dumps ---- */
static void write_json_str(jbuf *b, const char *s, size_t n, bool ensure_ascii) {
    jbuf_putc(b, '"');
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = ju_decode(s + i, n - i, &cp);
        switch (cp) {
        case '"': jbuf_put(b, "\\\"", 2); break;
        case '\\': jbuf_put(b, "\\\\", 2); break;
        case '\n': jbuf_put(b, "\\n", 2); break;
        case '\r': jbuf_put(b, "\\r", 2); break;
        case '\t': jbuf_put(b, "\\t", 2); break;
        case '\b': jbuf_put(b, "\\b", 2); break;
        case '\f': jbuf_put(b, "\\f", 2); break;
        default:
            if (cp < 0x20 || (ensure_ascii && cp > 0x7E)) {
                if (cp >= 0x10000) {
                    uint32_t u = cp - 0x10000;
                    jbuf_printf(b, "\\u%04x\\u%04x", 0xD800 + (u >> 10), 0xDC00 + (u & 0x3FF));
                } else jbuf_printf(b, "\\u%04x", cp);
            } else jbuf_put(b, s + i, k);
        }
        i += k;
    }
    jbuf_putc(b, '"');
}

static void json_newline(jbuf *b, int indent, int level) {
    jbuf_putc(b, '\n');
    for (int i = 0; i < indent * level; i++) jbuf_putc(b, ' ');
}

static int cmp_keys(const void *x, const void *y) {
    const jv *a = *(const jv *const *)x, *b = *(const jv *const *)y;
    if (a->type == JV_STR && b->type == JV_STR) {
        int r = memcmp(a->s.p, b->s.p, MF_MIN(a->s.n, b->s.n));
        return r ? r : (a->s.n > b->s.n) - (a->s.n < b->s.n);
    }
    return 0;
}

void jv_write_json(jctx *c, jbuf *b, jv v, int indent, const char *item_sep, const char *key_sep,
                   bool ensure_ascii, bool sort_keys, int level) {
    if (level > MAX_VALUE_DEPTH) jinja_error(c, MF_ERR_RANGE, "tojson: value nested deeper than %d levels", MAX_VALUE_DEPTH);
    switch (v.type) {
    case JV_NONE: jbuf_put(b, "null", 4); return;
    case JV_BOOL: v.b ? jbuf_put(b, "true", 4) : jbuf_put(b, "false", 5); return;
    case JV_INT: jbuf_printf(b, "%lld", (long long)v.i); return;
    case JV_FLOAT:
        if (isnan(v.f)) jbuf_put(b, "NaN", 3);
        else if (isinf(v.f)) v.f > 0 ? jbuf_put(b, "Infinity", 8) : jbuf_put(b, "-Infinity", 9);
        else jv_write_float(b, v.f);
        return;
    case JV_STR: write_json_str(b, v.s.p, v.s.n, ensure_ascii); return;
    case JV_LIST:
        if (v.flags & JV_GEN) jinja_error(c, MF_ERR_FORMAT, "tojson: object of type 'generator' is not JSON serializable (add | list)");
        if (v.l->n == 0) { jbuf_put(b, "[]", 2); return; }
        jbuf_putc(b, '[');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) jbuf_put(b, item_sep, strlen(item_sep));
            if (indent >= 0) json_newline(b, indent, level + 1);
            jv_write_json(c, b, v.l->v[i], indent, item_sep, key_sep, ensure_ascii, sort_keys, level + 1);
        }
        if (indent >= 0) json_newline(b, indent, level);
        jbuf_putc(b, ']');
        return;
    case JV_DICT: {
        if (v.d->n == 0) { jbuf_put(b, "{}", 2); return; }
        const jv **order = jarena_alloc(&c->arena, v.d->n * sizeof *order);
        for (size_t i = 0; i < v.d->n; i++) order[i] = &v.d->k[i];
        if (sort_keys) qsort(order, v.d->n, sizeof *order, cmp_keys);
        jbuf_putc(b, '{');
        for (size_t i = 0; i < v.d->n; i++) {
            jv k = *order[i];
            jv val = v.d->v[order[i] - v.d->k];
            if (i) jbuf_put(b, item_sep, strlen(item_sep));
            if (indent >= 0) json_newline(b, indent, level + 1);
            if (k.type == JV_STR) write_json_str(b, k.s.p, k.s.n, ensure_ascii);
            else if (k.type == JV_INT || k.type == JV_FLOAT || k.type == JV_BOOL || k.type == JV_NONE) {
                jbuf_putc(b, '"');
                jv_write_json(c, b, k, -1, item_sep, key_sep, ensure_ascii, sort_keys, level + 1);
                jbuf_putc(b, '"');
            } else jinja_error(c, MF_ERR_FORMAT, "tojson: keys must be str, int, float, bool or None, not %s", jv_type_name(k));
            jbuf_put(b, key_sep, strlen(key_sep));
            jv_write_json(c, b, val, indent, item_sep, key_sep, ensure_ascii, sort_keys, level + 1);
        }
        if (indent >= 0) json_newline(b, indent, level);
        jbuf_putc(b, '}');
        return;
    }
    default:
        jinja_error(c, MF_ERR_FORMAT, "tojson: object of type '%s' is not JSON serializable", jv_type_name(v));
    }
}

/* ---- jansson -> value ---- */
jv jv_from_json(jctx *c, const json_t *j, int depth) {
    if (depth > 256) jinja_error(c, MF_ERR_RANGE, "context JSON nested deeper than 256 levels");
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        jv d = jv_dict_new(c, json_object_size(j));
        const char *key;
        json_t *val;
        size_t i = 0; /* keys of a JSON object are unique: fill in place, no look-up per key */
        json_object_foreach((json_t *)j, key, val) {
            d.d->k[i] = jv_cstr(key);
            d.d->v[i++] = jv_from_json(c, val, depth + 1);
        }
        d.d->n = i;
        return d;
    }
    case JSON_ARRAY: {
        jv l = jv_list_new(c, json_array_size(j));
        for (size_t i = 0; i < json_array_size(j); i++) jv_list_push(c, l, jv_from_json(c, json_array_get(j, i), depth + 1));
        return l;
    }
    case JSON_STRING: return jv_strn(json_string_value(j), json_string_length(j));
    case JSON_INTEGER: return jv_int((int64_t)json_integer_value(j));
    case JSON_REAL: return jv_float(json_real_value(j));
    case JSON_TRUE: return jv_bool(true);
    case JSON_FALSE: return jv_bool(false);
    default: return jv_none();
    }
}
