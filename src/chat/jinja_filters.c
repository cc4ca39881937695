/* jinja_filters.c: Jinja's built-in filters and tests as chat templates use them, with Hugging
 * Face's tojson (json.dumps with ensure_ascii=False; ", " and ": " separators, or "," and ": "
 * with indent). Each filter takes the value, positional args and keyword args; argument names and
 * defaults follow Jinja2's signatures. */
#include "chat/jinja.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define FARGS jctx *c, jscope *s, jv v, jv *args, int nargs, const char **kwn, jv *kwv, int nkw
#define A(pos, name, def) arg(args, nargs, kwn, kwv, nkw, pos, name, def)
#define UNUSED_ARGS (void)s, (void)args, (void)nargs, (void)kwn, (void)kwv, (void)nkw

static jv arg(jv *args, int nargs, const char **kwn, jv *kwv, int nkw, int pos, const char *name, jv def) {
    if (pos >= 0 && pos < nargs) return args[pos];
    for (int i = 0; i < nkw; i++)
        if (!strcmp(kwn[i], name)) return kwv[i];
    return def;
}

static bool is_num(jv v) { return v.type == JV_BOOL || v.type == JV_INT || v.type == JV_FLOAT; }
static double num_f(jv v) { return v.type == JV_FLOAT ? v.f : v.type == JV_INT ? (double)v.i : (double)v.b; }

static jv need_str(jctx *c, jv v, const char *what) {
    if (v.type != JV_STR) jinja_error(c, MF_ERR_FORMAT, "%s: expected a string, got '%s'", what, jv_type_name(v));
    return v;
}

/* Python's str.upper()/lower(): full mappings ("ß" -> "SS"), and a capital sigma that ends a word
 * lowers to final sigma. Bytes that are not valid UTF-8 pass through. */
static jv map_case(jctx *c, jv str, char kind) {
    jbuf b = jbuf_make(c);
    for (size_t i = 0; i < str.s.n;) {
        uint32_t cp;
        size_t k = ju_decode(str.s.p + i, str.s.n - i, &cp);
        if (k == 1 && cp >= 0x80) jbuf_putc(&b, str.s.p[i]);
        else if (kind == 'l' && cp == 0x3A3) ju_encode(&b, ju_sigma_is_final(str.s.p, str.s.n, i, k) ? 0x3C2 : 0x3C3);
        else ju_put_case(&b, cp, kind);
        i += k;
    }
    return jbuf_value(&b);
}

jv jinja_str_upper(jctx *c, jv str) { return map_case(c, str, 'u'); }
jv jinja_str_lower(jctx *c, jv str) { return map_case(c, str, 'l'); }

jv jinja_str_strip(jctx *c, jv str, jv chars, bool left, bool right) {
    const char *p = str.s.p;
    size_t n = str.s.n;
    if (chars.type != JV_STR) {
        if (left) { size_t k = ju_space_prefix(p, n); p += k, n -= k; }
        if (right) n -= ju_space_suffix(p, n);
        return jv_strn(p, n);
    }
    for (;;) { /* strip any code point that appears in chars */
        bool changed = false;
        if (left && n) {
            uint32_t cp;
            size_t k = ju_decode(p, n, &cp);
            if (memmem(chars.s.p, chars.s.n, p, k)) p += k, n -= k, changed = true;
        }
        if (right && n) {
            size_t st = n - 1;
            while (st > 0 && ((unsigned char)p[st] & 0xC0) == 0x80) st--;
            if (memmem(chars.s.p, chars.s.n, p + st, n - st)) n = st, changed = true;
        }
        if (!changed) break;
    }
    (void)c;
    return jv_strn(p, n);
}

jv jinja_str_replace(jctx *c, jv str, jv old, jv new_, int64_t count) {
    jbuf b = jbuf_make(c);
    const char *p = str.s.p, *end = str.s.p + str.s.n;
    int64_t done = 0;
    if (old.s.n == 0) { /* Python inserts `new` between every code point */
        for (size_t i = 0; i <= str.s.n;) {
            if (count < 0 || done < count) jbuf_put(&b, new_.s.p, new_.s.n), done++;
            if (i == str.s.n) break;
            uint32_t cp;
            size_t k = ju_decode(str.s.p + i, str.s.n - i, &cp);
            jbuf_put(&b, str.s.p + i, k);
            i += k;
        }
        return jbuf_value(&b);
    }
    while (p < end && (count < 0 || done < count)) {
        const char *q = memmem(p, (size_t)(end - p), old.s.p, old.s.n);
        if (!q) break;
        jbuf_put(&b, p, (size_t)(q - p));
        jbuf_put(&b, new_.s.p, new_.s.n);
        p = q + old.s.n;
        done++;
        jinja_step(c);
    }
    jbuf_put(&b, p, (size_t)(end - p));
    return jbuf_value(&b);
}

/* ---- filters ---- */
static jv f_tojson(FARGS) {
    UNUSED_ARGS;
    jv ind = A(0, "indent", jv_none()), seps = A(-1, "separators", jv_none());
    jv ea = A(-1, "ensure_ascii", jv_bool(false)), sk = A(-1, "sort_keys", jv_bool(false));
    int indent = -1;
    if (ind.type == JV_INT) indent = ind.i < 0 ? 0 : ind.i > 64 ? 64 : (int)ind.i;
    else if (ind.type != JV_NONE && ind.type != JV_UNDEF) jinja_error(c, MF_ERR_FORMAT, "tojson: indent must be an integer or None");
    const char *item_sep = indent >= 0 ? "," : ", ", *key_sep = ": ";
    if (seps.type == JV_LIST) {
        if (seps.l->n != 2 || seps.l->v[0].type != JV_STR || seps.l->v[1].type != JV_STR)
            jinja_error(c, MF_ERR_FORMAT, "tojson: separators must be two strings");
        item_sep = jarena_strndup(&c->arena, seps.l->v[0].s.p, seps.l->v[0].s.n);
        key_sep = jarena_strndup(&c->arena, seps.l->v[1].s.p, seps.l->v[1].s.n);
    }
    jbuf b = jbuf_make(c);
    jv_write_json(c, &b, v, indent, item_sep, key_sep, jv_truthy(ea), jv_truthy(sk), 0);
    return jbuf_value(&b);
}

static jv f_length(FARGS) {
    UNUSED_ARGS;
    switch (v.type) {
    case JV_UNDEF: return jv_int(0);
    case JV_STR: return jv_int((int64_t)ju_len(v.s.p, v.s.n));
    case JV_LIST:
        if (v.flags & JV_GEN) break;
        return jv_int((int64_t)v.l->n);
    case JV_DICT: case JV_NS: return jv_int((int64_t)v.d->n);
    default: break;
    }
    jinja_error(c, MF_ERR_FORMAT, "object of type '%s' has no len()", jv_type_name(v));
}

static jv f_list(FARGS) {
    UNUSED_ARGS;
    jv it = jinja_iter_list(c, v), out = jv_list_new(c, it.l->n);
    for (size_t i = 0; i < it.l->n; i++) jv_list_push(c, out, it.l->v[i]);
    return out;
}

static jv f_items(FARGS) {
    UNUSED_ARGS;
    jv r = jv_list_new(c, 0);
    if (v.type != JV_UNDEF && v.type != JV_DICT && v.type != JV_NS)
        jinja_error(c, MF_ERR_FORMAT, "Can only get item pairs from a mapping (items of a '%s').", jv_type_name(v));
    if (v.type != JV_UNDEF) r = jinja_call_method(c, v, "items", NULL, 0, NULL, NULL, 0);
    r.flags = JV_GEN;
    return r;
}

static jv f_join(FARGS) {
    UNUSED_ARGS;
    jv sep = A(0, "d", jv_strn("", 0)), attr = A(1, "attribute", jv_none());
    jv it = jinja_iter_list(c, v);
    jbuf b = jbuf_make(c);
    jv sp = jv_to_str(c, sep);
    for (size_t i = 0; i < it.l->n; i++) {
        if (i) jbuf_put(&b, sp.s.p, sp.s.n);
        jv x = it.l->v[i];
        if (attr.type == JV_STR) x = jinja_getattr(c, x, attr.s.p, attr.s.n);
        jv_write_str(c, &b, x);
    }
    return jbuf_value(&b);
}

static jv f_default(FARGS) {
    UNUSED_ARGS;
    jv def = A(0, "default_value", jv_strn("", 0)), boolean = A(1, "boolean", jv_bool(false));
    if (v.type == JV_UNDEF || (jv_truthy(boolean) && !jv_truthy(v))) return def;
    return v;
}

static jv f_upper(FARGS) { UNUSED_ARGS; return jinja_str_upper(c, jv_to_str(c, v)); }
static jv f_lower(FARGS) { UNUSED_ARGS; return jinja_str_lower(c, jv_to_str(c, v)); }
static jv f_capitalize(FARGS) { UNUSED_ARGS; return jinja_call_method(c, jv_to_str(c, v), "capitalize", NULL, 0, NULL, NULL, 0); }

static jv f_title(FARGS) {
    UNUSED_ARGS;
    /* Jinja's title: capitalise the first letter after start, whitespace, '-', or an opening bracket */
    jv str = jv_to_str(c, v);
    jbuf b = jbuf_make(c);
    bool start = true;
    for (size_t i = 0; i < str.s.n;) {
        uint32_t cp;
        size_t k = ju_decode(str.s.p + i, str.s.n - i, &cp);
        bool sep = ju_isspace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
        if (sep) ju_encode(&b, cp);
        else ju_put_case(&b, cp, start ? 'u' : 'l'); /* item[0].upper() + item[1:].lower() */
        start = sep;
        i += k;
    }
    return jbuf_value(&b);
}

static jv f_trim(FARGS) {
    UNUSED_ARGS;
    return jinja_str_strip(c, jv_to_str(c, v), A(0, "chars", jv_none()), true, true);
}

static jv f_replace(FARGS) {
    UNUSED_ARGS;
    jv old = jv_to_str(c, A(0, "old", jv_strn("", 0))), nw = jv_to_str(c, A(1, "new", jv_strn("", 0)));
    jv cnt = A(2, "count", jv_none());
    return jinja_str_replace(c, jv_to_str(c, v), old, nw, cnt.type == JV_INT ? cnt.i : -1);
}

static jv f_first(FARGS) {
    UNUSED_ARGS;
    jv it = jinja_iter_list(c, v);
    return it.l->n ? it.l->v[0] : jv_undef("first item");
}

static jv f_last(FARGS) {
    UNUSED_ARGS;
    jv it = jinja_iter_list(c, v);
    return it.l->n ? it.l->v[it.l->n - 1] : jv_undef("last item");
}

static jv f_string(FARGS) { UNUSED_ARGS; return jv_to_str(c, v); }

static jv f_int(FARGS) {
    UNUSED_ARGS;
    jv def = A(0, "default", jv_int(0)), base = A(1, "base", jv_int(10));
    if (v.type == JV_UNDEF) jinja_error(c, MF_ERR_FORMAT, "int: '%s' is undefined", v.s.p ? v.s.p : "value");
    if (v.type == JV_INT) return v;
    if (v.type == JV_BOOL) return jv_int(v.b);
    if (v.type == JV_FLOAT) return isfinite(v.f) && fabs(v.f) < 9.2e18 ? jv_int((int64_t)v.f) : def;
    if (v.type == JV_STR) {
        char buf[64];
        jv t = jinja_str_strip(c, v, jv_none(), true, true);
        if (t.s.n == 0 || t.s.n >= sizeof buf) return def;
        memcpy(buf, t.s.p, t.s.n);
        buf[t.s.n] = 0;
        char *end;
        errno = 0;
        long long x = strtoll(buf, &end, base.type == JV_INT && base.i >= 2 && base.i <= 36 ? (int)base.i : 10);
        if (!*end && !errno) return jv_int(x);
        double d = strtod(buf, &end);
        if (!*end && isfinite(d) && fabs(d) < 9.2e18) return jv_int((int64_t)d);
    }
    return def;
}

static jv f_float(FARGS) {
    UNUSED_ARGS;
    jv def = A(0, "default", jv_float(0.0));
    if (v.type == JV_UNDEF) jinja_error(c, MF_ERR_FORMAT, "float: '%s' is undefined", v.s.p ? v.s.p : "value");
    if (is_num(v)) return jv_float(num_f(v));
    if (v.type == JV_STR) {
        char buf[64];
        jv t = jinja_str_strip(c, v, jv_none(), true, true);
        if (t.s.n == 0 || t.s.n >= sizeof buf) return def;
        memcpy(buf, t.s.p, t.s.n);
        buf[t.s.n] = 0;
        char *end;
        double d = strtod(buf, &end);
        if (!*end) return jv_float(d);
    }
    return def;
}

static jv f_abs(FARGS) {
    UNUSED_ARGS;
    if (v.type == JV_FLOAT) return jv_float(fabs(v.f));
    if (v.type == JV_INT && v.i != INT64_MIN) return jv_int(v.i < 0 ? -v.i : v.i);
    if (v.type == JV_BOOL) return jv_int(v.b);
    jinja_error(c, MF_ERR_FORMAT, "bad operand type for abs(): '%s'", jv_type_name(v));
}

static jv f_round(FARGS) {
    UNUSED_ARGS;
    jv prec = A(0, "precision", jv_int(0)), method = A(1, "method", jv_cstr("common"));
    if (!is_num(v)) jinja_error(c, MF_ERR_FORMAT, "round: expected a number, got '%s'", jv_type_name(v));
    bool common = !(method.type == JV_STR && (method.s.n == 4 || method.s.n == 5) && (!memcmp(method.s.p, "ceil", 4) || !memcmp(method.s.p, "floor", 5)));
    if (common && v.type != JV_FLOAT && prec.type == JV_INT && prec.i >= 0) return jv_int(v.type == JV_INT ? v.i : v.b); /* Python: round(int, n) is that int */
    int p = prec.type == JV_INT ? (int)MF_MAX(-20, MF_MIN(prec.i, 20)) : 0;
    double x = num_f(v), scale = pow(10.0, p);
    if (method.type == JV_STR && method.s.n == 4 && !memcmp(method.s.p, "ceil", 4)) return jv_float(ceil(x * scale) / scale);
    if (method.type == JV_STR && method.s.n == 5 && !memcmp(method.s.p, "floor", 5)) return jv_float(floor(x * scale) / scale);
    if (p >= 0 && isfinite(x)) { /* Python's round(): correctly rounded, ties to even */
        char buf[400];
        snprintf(buf, sizeof buf, "%.*f", p, x);
        return jv_float(strtod(buf, NULL));
    }
    return jv_float(nearbyint(x * scale) / scale);
}

/* Sort key: the item (or its attribute), lowercased for strings unless case-sensitive. */
typedef struct { jv key; jv item; } sort_ent;

/* Stable merge sort (Python's sort is stable); comparisons may raise, so no libc qsort. */
static void merge_sort(jctx *c, sort_ent *e, sort_ent *tmp, size_t n, bool reverse) {
    if (n < 2) return;
    size_t h = n / 2;
    merge_sort(c, e, tmp, h, reverse);
    merge_sort(c, e + h, tmp, n - h, reverse);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        int r = jv_compare(c, e[j].key, e[i].key);
        jinja_step(c);
        if (reverse ? r > 0 : r < 0) tmp[k++] = e[j++];
        else tmp[k++] = e[i++];
    }
    while (i < h) tmp[k++] = e[i++];
    while (j < n) tmp[k++] = e[j++];
    memcpy(e, tmp, n * sizeof *e);
}

static jv sort_key(jctx *c, jv item, jv attr, bool cs) {
    jv k = item;
    if (attr.type == JV_STR) k = jinja_getattr(c, k, attr.s.p, attr.s.n);
    if (!cs && k.type == JV_STR) k = jinja_str_lower(c, k);
    return k;
}

static jv sort_list(jctx *c, jv it, jv attr, bool cs, bool reverse, bool by_value_pairs) {
    size_t n = it.l->n;
    sort_ent *e = jarena_alloc(&c->arena, (n + 1) * sizeof *e);
    for (size_t i = 0; i < n; i++) {
        jv item = it.l->v[i];
        jv k = by_value_pairs ? item.l->v[attr.i] : sort_key(c, item, attr, cs);
        if (by_value_pairs && !cs && k.type == JV_STR) k = jinja_str_lower(c, k);
        e[i] = (sort_ent){k, item};
    }
    merge_sort(c, e, jarena_alloc(&c->arena, (n + 1) * sizeof *e), n, reverse);
    jv out = jv_list_new(c, n);
    for (size_t i = 0; i < n; i++) jv_list_push(c, out, e[i].item);
    return out;
}

static jv f_sort(FARGS) {
    UNUSED_ARGS;
    jv rev = A(0, "reverse", jv_bool(false)), cs = A(1, "case_sensitive", jv_bool(false)), attr = A(2, "attribute", jv_none());
    return sort_list(c, jinja_iter_list(c, v), attr, jv_truthy(cs), jv_truthy(rev), false);
}

static jv f_dictsort(FARGS) {
    UNUSED_ARGS;
    jv cs = A(0, "case_sensitive", jv_bool(false)), by = A(1, "by", jv_cstr("key")), rev = A(2, "reverse", jv_bool(false));
    if (v.type != JV_DICT) jinja_error(c, MF_ERR_FORMAT, "dictsort: expected a mapping, got '%s'", jv_type_name(v));
    jv pairs = jinja_call_method(c, v, "items", NULL, 0, NULL, NULL, 0);
    bool by_value = by.type == JV_STR && by.s.n == 5 && !memcmp(by.s.p, "value", 5);
    return sort_list(c, pairs, jv_int(by_value ? 1 : 0), jv_truthy(cs), jv_truthy(rev), true);
}

static jv f_unique(FARGS) {
    UNUSED_ARGS;
    jv cs = A(0, "case_sensitive", jv_bool(false)), attr = A(1, "attribute", jv_none());
    jv it = jinja_iter_list(c, v), out = jv_list_new(c, 0), seen = jv_list_new(c, 0);
    for (size_t i = 0; i < it.l->n; i++) {
        jv k = sort_key(c, it.l->v[i], attr, jv_truthy(cs));
        bool dup = false;
        for (size_t j = 0; j < seen.l->n && !dup; j++) dup = jv_equal(seen.l->v[j], k), jinja_step(c);
        if (!dup) jv_list_push(c, seen, k), jv_list_push(c, out, it.l->v[i]);
    }
    out.flags = JV_GEN;
    return out;
}

static jv f_map(FARGS) {
    jv out = jv_list_new(c, 4);
    out.flags = JV_GEN;
    if (!jv_truthy(v)) return out; /* as select: nothing for None, "", 0 */
    jv it = jinja_iter_list(c, v);
    jv attr = A(-1, "attribute", jv_none());
    if (attr.type != JV_NONE) {
        jv def = A(-1, "default", jv_undef("default"));
        for (size_t i = 0; i < it.l->n; i++) {
            jv x = attr.type == JV_STR ? jinja_getattr(c, it.l->v[i], attr.s.p, attr.s.n) : jinja_getitem(c, it.l->v[i], attr);
            jv_list_push(c, out, x.type == JV_UNDEF && def.type != JV_UNDEF ? def : x);
        }
        return out;
    }
    if (nargs < 1 || args[0].type != JV_STR) jinja_error(c, MF_ERR_FORMAT, "map: expected a filter name or attribute=");
    const char *name = jarena_strndup(&c->arena, args[0].s.p, args[0].s.n);
    jfilter_fn f = jinja_find_filter(name);
    if (!f) jinja_error(c, MF_ERR_UNSUPPORTED, "map: unknown filter '%s'", name);
    for (size_t i = 0; i < it.l->n; i++) jv_list_push(c, out, f(c, s, it.l->v[i], args + 1, nargs - 1, kwn, kwv, nkw));
    return out;
}

/* select/reject/selectattr/rejectattr: keep items whose test result equals `want`. */
static jv select_common(jctx *c, jv v, jv *args, int nargs, bool attr_mode, bool want) {
    jv out = jv_list_new(c, 0);
    out.flags = JV_GEN;
    if (!jv_truthy(v)) return out; /* Jinja yields nothing for a falsy input (None, "", 0) */
    jv it = jinja_iter_list(c, v);
    jv attr = jv_none();
    if (attr_mode) {
        if (nargs < 1 || args[0].type != JV_STR) jinja_error(c, MF_ERR_FORMAT, "selectattr/rejectattr need an attribute name");
        attr = args[0];
        args++, nargs--;
    }
    jtest_fn t = NULL;
    if (nargs >= 1) {
        if (args[0].type != JV_STR) jinja_error(c, MF_ERR_FORMAT, "select: test name must be a string");
        const char *name = jarena_strndup(&c->arena, args[0].s.p, args[0].s.n);
        t = jinja_find_test(name);
        if (!t) jinja_error(c, MF_ERR_UNSUPPORTED, "unknown test '%s'", name);
        args++, nargs--;
    }
    for (size_t i = 0; i < it.l->n; i++) {
        jinja_step(c);
        jv x = it.l->v[i];
        if (attr_mode) x = jinja_getattr(c, x, attr.s.p, attr.s.n);
        bool r = t ? t(c, x, args, nargs) : jv_truthy(x);
        if (r == want) jv_list_push(c, out, it.l->v[i]);
    }
    out.flags = JV_GEN;
    return out;
}

static jv f_select(FARGS) { UNUSED_ARGS; return select_common(c, v, args, nargs, false, true); }
static jv f_reject(FARGS) { UNUSED_ARGS; return select_common(c, v, args, nargs, false, false); }
static jv f_selectattr(FARGS) { UNUSED_ARGS; return select_common(c, v, args, nargs, true, true); }
static jv f_rejectattr(FARGS) { UNUSED_ARGS; return select_common(c, v, args, nargs, true, false); }

static jv f_safe(FARGS) { UNUSED_ARGS; return jv_to_str(c, v); }

static jv f_escape(FARGS) {
    UNUSED_ARGS;
    jv str = jv_to_str(c, v);
    jbuf b = jbuf_make(c);
    for (size_t i = 0; i < str.s.n; i++) {
        switch (str.s.p[i]) {
        case '&': jbuf_put(&b, "&amp;", 5); break;
        case '<': jbuf_put(&b, "&lt;", 4); break;
        case '>': jbuf_put(&b, "&gt;", 4); break;
        case '"': jbuf_put(&b, "&#34;", 5); break;
        case '\'': jbuf_put(&b, "&#39;", 5); break;
        default: jbuf_putc(&b, str.s.p[i]);
        }
    }
    return jbuf_value(&b);
}

static bool word_char(uint32_t cp) { return cp == '_' || ju_isalpha(cp) || ju_isnumeric(cp); } /* regex \w */

static jv f_wordcount(FARGS) {
    UNUSED_ARGS;
    jv str = jv_to_str(c, v);
    int64_t n = 0;
    bool in = false;
    for (size_t i = 0; i < str.s.n;) {
        uint32_t cp;
        i += ju_decode(str.s.p + i, str.s.n - i, &cp);
        bool w = word_char(cp);
        if (w && !in) n++;
        in = w;
    }
    return jv_int(n);
}

static jv f_center(FARGS) {
    UNUSED_ARGS;
    jv w = A(0, "width", jv_int(80));
    jv a[1] = {w};
    return jinja_call_method(c, jv_to_str(c, v), "center", a, 1, NULL, NULL, 0);
}

static jv f_indent(FARGS) {
    UNUSED_ARGS;
    jv width = A(0, "width", jv_int(4)), first = A(1, "first", jv_bool(false)), blank = A(2, "blank", jv_bool(false));
    if (v.type != JV_STR) jinja_error(c, MF_ERR_FORMAT, "indent: expected a string, got '%s'", jv_type_name(v));
    jv str = v;
    jbuf ind = jbuf_make(c);
    if (width.type == JV_STR) jbuf_put(&ind, width.s.p, width.s.n);
    else for (int64_t i = 0; width.type == JV_INT && i < width.i && i < 1000; i++) jbuf_putc(&ind, ' ');
    jbuf b = jbuf_make(c);
    if (jv_truthy(first)) jbuf_put(&b, ind.p, ind.n);
    /* every line after the first gets the indentation; empty lines only with blank=True */
    size_t i = 0;
    bool first_line = true;
    while (i <= str.s.n) {
        const char *nl = memchr(str.s.p + i, '\n', str.s.n - i);
        size_t end = nl ? (size_t)(nl - str.s.p) : str.s.n;
        if (!first_line && (end > i || jv_truthy(blank))) jbuf_put(&b, ind.p, ind.n);
        jbuf_put(&b, str.s.p + i, end - i);
        if (!nl) break;
        jbuf_putc(&b, '\n');
        i = end + 1;
        first_line = false;
        if (i == str.s.n) break; /* a trailing newline ends the text; no indented empty line after it */
    }
    return jbuf_value(&b);
}

static jv f_batch(FARGS) {
    UNUSED_ARGS;
    jv size = A(0, "linecount", jv_int(1)), fill = A(1, "fill_with", jv_none());
    if (size.type != JV_INT || size.i < 1) jinja_error(c, MF_ERR_FORMAT, "batch: linecount must be a positive integer");
    jv it = jinja_iter_list(c, v), out = jv_list_new(c, 0), cur = jv_list_new(c, 0);
    for (size_t i = 0; i < it.l->n; i++) {
        jv_list_push(c, cur, it.l->v[i]);
        if ((int64_t)cur.l->n == size.i) jv_list_push(c, out, cur), cur = jv_list_new(c, 0);
    }
    if (cur.l->n) {
        if (fill.type != JV_NONE)
            while ((int64_t)cur.l->n < size.i) jv_list_push(c, cur, fill);
        jv_list_push(c, out, cur);
    }
    out.flags = JV_GEN;
    return out;
}

static jv f_reverse(FARGS) {
    UNUSED_ARGS;
    if (v.type == JV_STR) {
        jv it = jinja_iter_list(c, v);
        jbuf b = jbuf_make(c);
        for (size_t i = it.l->n; i-- > 0;) jbuf_put(&b, it.l->v[i].s.p, it.l->v[i].s.n);
        return jbuf_value(&b);
    }
    jv it = jinja_iter_list(c, v), out = jv_list_new(c, it.l->n);
    for (size_t i = it.l->n; i-- > 0;) jv_list_push(c, out, it.l->v[i]);
    /* reversed() gives an iterator; a generator cannot be reversed, so Jinja builds a list */
    out.flags = v.type == JV_LIST && (v.flags & JV_GEN) ? 0 : JV_GEN;
    return out;
}

static jv f_sum(FARGS) {
    UNUSED_ARGS;
    jv attr = A(0, "attribute", jv_none()), acc = A(1, "start", jv_int(0));
    jv it = jinja_iter_list(c, v);
    for (size_t i = 0; i < it.l->n; i++) {
        jv x = attr.type == JV_STR ? jinja_getattr(c, it.l->v[i], attr.s.p, attr.s.n) : it.l->v[i];
        if (!is_num(acc) || !is_num(x)) jinja_error(c, MF_ERR_FORMAT, "sum: unsupported operand types '%s' and '%s'", jv_type_name(acc), jv_type_name(x));
        if (acc.type == JV_FLOAT || x.type == JV_FLOAT) acc = jv_float(num_f(acc) + num_f(x));
        else if (__builtin_add_overflow(acc.type == JV_INT ? acc.i : acc.b, x.type == JV_INT ? x.i : x.b, &acc.i)) jinja_error(c, MF_ERR_RANGE, "sum: integer overflow");
        else acc.type = JV_INT;
    }
    return acc;
}

static jv minmax(jctx *c, jv v, jv *args, int nargs, const char **kwn, jv *kwv, int nkw, int sign) {
    jv cs = A(0, "case_sensitive", jv_bool(false)), attr = A(1, "attribute", jv_none());
    jv it = jinja_iter_list(c, v);
    if (!it.l->n) return jv_undef("min/max of an empty sequence");
    size_t best = 0;
    jv bk = sort_key(c, it.l->v[0], attr, jv_truthy(cs));
    for (size_t i = 1; i < it.l->n; i++) {
        jv k = sort_key(c, it.l->v[i], attr, jv_truthy(cs));
        if (jv_compare(c, k, bk) * sign > 0) best = i, bk = k;
    }
    return it.l->v[best];
}
static jv f_min(FARGS) { UNUSED_ARGS; return minmax(c, v, args, nargs, kwn, kwv, nkw, -1); }
static jv f_max(FARGS) { UNUSED_ARGS; return minmax(c, v, args, nargs, kwn, kwv, nkw, 1); }

static jv f_attr(FARGS) {
    UNUSED_ARGS;
    jv name = A(0, "name", jv_none());
    if (name.type != JV_STR) jinja_error(c, MF_ERR_FORMAT, "attr: expected an attribute name");
    /* attributes only: a dict's keys are items, not attributes */
    if (v.type == JV_DICT && !jinja_has_method(v, name.s.p, name.s.n)) return jv_undef("attribute");
    return jinja_getattr(c, v, name.s.p, name.s.n);
}

/* pprint: repr with dict keys sorted, as pprint.pformat does (its line wrapping past 80 columns is
 * not reproduced) */
static jv sorted_dicts(jctx *c, jv v, int depth) {
    if (depth > 100) return v;
    if (v.type == JV_LIST) {
        jv out = jv_list_new(c, v.l->n);
        out.flags = v.flags;
        for (size_t i = 0; i < v.l->n; i++) jv_list_push(c, out, sorted_dicts(c, v.l->v[i], depth + 1));
        return out;
    }
    if (v.type != JV_DICT) return v;
    jv keys = jv_list_new(c, v.d->n);
    for (size_t i = 0; i < v.d->n; i++) jv_list_push(c, keys, v.d->k[i]);
    keys = sort_list(c, keys, jv_none(), true, false, false);
    jv out = jv_dict_new(c, v.d->n);
    for (size_t i = 0; i < keys.l->n; i++) jv_dict_set(c, out.d, keys.l->v[i], sorted_dicts(c, *jv_dict_get(v.d, keys.l->v[i]), depth + 1));
    return out;
}

static jv f_pprint(FARGS) {
    UNUSED_ARGS;
    jbuf b = jbuf_make(c);
    jv_write_repr(c, &b, sorted_dicts(c, v, 0));
    return jbuf_value(&b);
}

static jv f_format(FARGS) {
    UNUSED_ARGS;
    jv tuple = jv_list_new(c, (size_t)nargs);
    tuple.flags = JV_TUPLE;
    for (int i = 0; i < nargs; i++) jv_list_push(c, tuple, args[i]);
    return jinja_format_percent(c, need_str(c, v, "format"), tuple);
}

static jv f_truncate(FARGS) {
    UNUSED_ARGS;
    jv length = A(0, "length", jv_int(255)), killwords = A(1, "killwords", jv_bool(false));
    jv end = A(2, "end", jv_cstr("...")), leeway = A(3, "leeway", jv_int(5));
    if (v.type != JV_STR) { /* Jinja measures len() of whatever it gets and returns short values untouched */
        int64_t n = f_length(c, s, v, NULL, 0, NULL, NULL, 0).i;
        if (n <= (length.type == JV_INT ? length.i : 255) + (leeway.type == JV_INT ? leeway.i : 5)) return v;
    }
    jv str = jv_to_str(c, v);
    int64_t n = (int64_t)ju_len(str.s.p, str.s.n), len = length.type == JV_INT ? length.i : 255;
    int64_t lw = leeway.type == JV_INT ? leeway.i : 5;
    end = jv_to_str(c, end);
    int64_t el = (int64_t)ju_len(end.s.p, end.s.n);
    if (n <= len + lw) return str;
    int64_t keep = len - el < 0 ? 0 : len - el;
    size_t cut = ju_offset(str.s.p, str.s.n, (size_t)keep);
    if (!jv_truthy(killwords)) {
        size_t k = cut;
        while (k > 0 && str.s.p[k - 1] != ' ') k--;
        if (k > 0) cut = k - 1;
    }
    jbuf b = jbuf_make(c);
    jbuf_put(&b, str.s.p, cut);
    jbuf_put(&b, end.s.p, end.s.n);
    return jbuf_value(&b);
}

/* groupby: (grouper, [items]) tuples sorted by the grouper, as Jinja's do_groupby */
static jv f_groupby(FARGS) {
    UNUSED_ARGS;
    jv attr = A(0, "attribute", jv_none()), def = A(1, "default", jv_undef("default")), cs = A(2, "case_sensitive", jv_bool(false));
    if (attr.type != JV_STR && attr.type != JV_INT) jinja_error(c, MF_ERR_FORMAT, "groupby: expected an attribute name");
    jv it = jinja_iter_list(c, v), keyed = jv_list_new(c, it.l->n);
    for (size_t i = 0; i < it.l->n; i++) { /* pair each item with its key so one stable sort orders both */
        jv k = attr.type == JV_STR ? jinja_getattr(c, it.l->v[i], attr.s.p, attr.s.n) : jinja_getitem(c, it.l->v[i], attr);
        if (k.type == JV_UNDEF && def.type != JV_UNDEF) k = def;
        jv pair = jv_list_new(c, 2);
        jv_list_push(c, pair, k);
        jv_list_push(c, pair, it.l->v[i]);
        jv_list_push(c, keyed, pair);
    }
    jv sorted = sort_list(c, keyed, jv_int(0), jv_truthy(cs), false, true);
    jv out = jv_list_new(c, 4);
    for (size_t i = 0; i < sorted.l->n;) {
        jv k = sorted.l->v[i].l->v[0], group = jv_list_new(c, 4);
        jv kk = !jv_truthy(cs) && k.type == JV_STR ? jinja_str_lower(c, k) : k;
        size_t j = i;
        for (; j < sorted.l->n; j++) {
            jv k2 = sorted.l->v[j].l->v[0];
            if (!jv_equal(!jv_truthy(cs) && k2.type == JV_STR ? jinja_str_lower(c, k2) : k2, kk)) break;
            jv_list_push(c, group, sorted.l->v[j].l->v[1]);
        }
        jv t = jv_list_new(c, 2);
        t.flags = JV_TUPLE;
        jv_list_push(c, t, k);
        jv_list_push(c, t, group);
        jv_list_push(c, out, t);
        i = j;
    }
    return out;
}

/* slice: split into n columns, the first len % n of them one longer (Jinja's do_slice) */
static jv f_slice(FARGS) {
    UNUSED_ARGS;
    jv ns = A(0, "slices", jv_int(1)), fill = A(1, "fill_with", jv_none());
    if (ns.type != JV_INT || ns.i < 1 || ns.i > 100000) jinja_error(c, MF_ERR_FORMAT, "slice: slices must be a positive integer");
    jv it = jinja_iter_list(c, v), out = jv_list_new(c, (size_t)ns.i);
    size_t n = it.l->n, per = n / (size_t)ns.i, extra = n % (size_t)ns.i, off = 0;
    for (size_t s_ = 0; s_ < (size_t)ns.i; s_++) {
        size_t len = per + (s_ < extra);
        jv col = jv_list_new(c, len + 1);
        for (size_t k = 0; k < len; k++) jv_list_push(c, col, it.l->v[off + k]);
        off += len;
        if (fill.type != JV_NONE && s_ >= extra && extra) jv_list_push(c, col, fill);
        jv_list_push(c, out, col);
    }
    return out;
}

static jv f_striptags(FARGS) {
    UNUSED_ARGS;
    /* drop <...> tags and <!-- comments -->, then collapse whitespace runs to one space */
    jv str = jv_to_str(c, v);
    jbuf t = jbuf_make(c);
    for (size_t i = 0; i < str.s.n; i++) {
        if (str.s.p[i] == '<' && i + 3 < str.s.n && !memcmp(str.s.p + i, "<!--", 4)) {
            const char *e = memmem(str.s.p + i, str.s.n - i, "-->", 3);
            if (e) { i = (size_t)(e - str.s.p) + 2; continue; }
        }
        if (str.s.p[i] == '<') {
            const char *e = memchr(str.s.p + i, '>', str.s.n - i);
            if (e) { i = (size_t)(e - str.s.p); continue; }
        }
        jbuf_putc(&t, str.s.p[i]);
    }
    jv words = jinja_call_method(c, jbuf_value(&t), "split", NULL, 0, NULL, NULL, 0);
    jv sp = jv_strn(" ", 1);
    return jinja_call_method(c, sp, "join", &words, 1, NULL, NULL, 0);
}

typedef struct { const char *name; jfilter_fn fn; } filter_ent;
static const filter_ent filters[] = {
    {"tojson", f_tojson}, {"length", f_length}, {"count", f_length}, {"list", f_list}, {"items", f_items},
    {"join", f_join}, {"default", f_default}, {"d", f_default}, {"upper", f_upper}, {"lower", f_lower},
    {"capitalize", f_capitalize}, {"title", f_title}, {"trim", f_trim}, {"replace", f_replace},
    {"first", f_first}, {"last", f_last}, {"string", f_string}, {"int", f_int}, {"float", f_float},
    {"abs", f_abs}, {"round", f_round}, {"sort", f_sort}, {"dictsort", f_dictsort}, {"unique", f_unique},
    {"map", f_map}, {"select", f_select}, {"reject", f_reject}, {"selectattr", f_selectattr},
    {"rejectattr", f_rejectattr}, {"safe", f_safe}, {"escape", f_escape}, {"e", f_escape},
    {"forceescape", f_escape}, {"wordcount", f_wordcount}, {"center", f_center}, {"indent", f_indent},
    {"batch", f_batch}, {"reverse", f_reverse}, {"sum", f_sum}, {"min", f_min}, {"max", f_max},
    {"attr", f_attr}, {"pprint", f_pprint}, {"format", f_format}, {"truncate", f_truncate},
    {"groupby", f_groupby}, {"slice", f_slice}, {"striptags", f_striptags},
};

jfilter_fn jinja_find_filter(const char *name) {
    for (size_t i = 0; i < MF_ARRAY_LEN(filters); i++)
        if (!strcmp(filters[i].name, name)) return filters[i].fn;
    return NULL;
}
