/* jinja_methods.c: what templates call: global functions (range, namespace, dict, raise_exception,
 * strftime_now) and the Python methods of str, dict and list that chat templates use, plus
 * printf-style "%" formatting and str.format. Mutating methods (list.append, dict.update, ...) are
 * refused, as in Hugging Face's immutable sandbox. */
#include "chat/jinja.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_RANGE 100000 /* Jinja's sandbox limit on range() */


enum { F_RANGE, F_NAMESPACE, F_DICT, F_RAISE, F_STRFTIME, F_COUNT };
static const char *const func_names[F_COUNT] = {"range", "namespace", "dict", "raise_exception", "strftime_now"};

int jinja_find_func(const char *name) {
    for (int i = 0; i < F_COUNT; i++)
        if (!strcmp(func_names[i], name)) return i;
    return -1;
}

static int64_t int_arg(jctx *c, jv v, const char *what) {
    if (v.type == JV_INT) return v.i;
    if (v.type == JV_BOOL) return v.b;
    jinja_error(c, MF_ERR_FORMAT, "%s: expected an integer, got '%s'", what, jv_type_name(v));
}

static jv kw_or_pos(jv *args, int nargs, const char **kwn, jv *kwv, int nkw, int pos, const char *name, jv def) {
    if (pos >= 0 && pos < nargs) return args[pos];
    for (int i = 0; i < nkw; i++)
        if (!strcmp(kwn[i], name)) return kwv[i];
    return def;
}

jv jinja_call_func(jctx *c, int fn, jv *args, int nargs, const char **kwn, jv *kwv, int nkw) {
    switch (fn) {
    case F_RANGE: {
        if (nargs < 1 || nargs > 3) jinja_error(c, MF_ERR_FORMAT, "range expects 1 to 3 arguments, got %d", nargs);
        int64_t start = 0, stop, step = 1;
        if (nargs == 1) stop = int_arg(c, args[0], "range");
        else start = int_arg(c, args[0], "range"), stop = int_arg(c, args[1], "range");
        if (nargs == 3) step = int_arg(c, args[2], "range");
        if (step == 0) jinja_error(c, MF_ERR_FORMAT, "range() arg 3 must not be zero");
        double count = step > 0 ? ((double)stop - (double)start) / (double)step : ((double)start - (double)stop) / (double)-step;
        if (count > MAX_RANGE) jinja_error(c, MF_ERR_RANGE, "range too big: %.0f items (the limit is %d)", count, MAX_RANGE);
        jv l = jv_list_new(c, count > 0 ? (size_t)count + 1 : 1);
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) jv_list_push(c, l, jv_int(i));
        return l;
    }
    case F_NAMESPACE: case F_DICT: {
        jv d = jv_dict_new(c, (size_t)nkw + 4);
        if (fn == F_NAMESPACE) d.type = JV_NS;
        for (int i = 0; i < nargs; i++) {
            if (args[i].type != JV_DICT) jinja_error(c, MF_ERR_FORMAT, "%s() positional arguments must be mappings", func_names[fn]);
            for (size_t k = 0; k < args[i].d->n; k++) jv_dict_set(c, d.d, args[i].d->k[k], args[i].d->v[k]);
        }
        for (int i = 0; i < nkw; i++) jv_dict_set(c, d.d, jv_cstr(kwn[i]), kwv[i]);
        return d;
    }
    case F_RAISE: {
        jv msg = jv_to_str(c, nargs ? args[0] : jv_cstr("raise_exception called"));
        jinja_error(c, MF_ERR_ARG, "the template rejected the conversation: %.*s", (int)MF_MIN(msg.s.n, 400), msg.s.p); /* cut at a character by jinja_error */
    }
    case F_STRFTIME: {
        if (nargs != 1 || args[0].type != JV_STR) jinja_error(c, MF_ERR_FORMAT, "strftime_now expects one format string");
        if (args[0].s.n > 200) jinja_error(c, MF_ERR_RANGE, "strftime_now: format longer than 200 bytes");
        char fmt[256], out[1024];
        memcpy(fmt, args[0].s.p, args[0].s.n);
        fmt[args[0].s.n] = 0;
        time_t t = c->now ? (time_t)c->now : time(NULL);
        struct tm tm;
        if (c->now) gmtime_r(&t, &tm);
        else localtime_r(&t, &tm);
        size_t n = strftime(out, sizeof out, fmt, &tm);
        if (n == 0 && fmt[0]) jinja_error(c, MF_ERR_RANGE, "strftime_now: formatted date too long");
        return jv_strn(jarena_strndup(&c->arena, out, n), n);
    }
    }
    jinja_error(c, MF_ERR_INTERNAL, "unknown function id %d", fn);
}

/* ---- methods ---- */
static const char *const str_methods[] = {
    "startswith", "endswith", "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "replace", "upper",
    "lower", "title", "capitalize", "swapcase", "find", "rfind", "index", "rindex", "count", "format", "join",
    "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "isnumeric", "isdecimal", "zfill",
    "center", "ljust", "rjust", "partition", "rpartition", "removeprefix", "removesuffix", "casefold", NULL};
static const char *const dict_methods[] = {"get", "items", "keys", "values", "copy", "update", "pop", "popitem",
                                           "setdefault", "clear", NULL};
static const char *const list_methods[] = {"index", "count", "copy", "append", "extend", "insert", "pop", "remove",
                                           "clear", "sort", "reverse", NULL};

static bool in_names(const char *const *names, const char *name, size_t n) {
    for (int i = 0; names[i]; i++)
        if (strlen(names[i]) == n && !memcmp(names[i], name, n)) return true;
    return false;
}

bool jinja_has_method(jv self, const char *name, size_t n) {
    switch (self.type) {
    case JV_STR: return in_names(str_methods, name, n);
    case JV_DICT: return in_names(dict_methods, name, n);
    case JV_LIST: return in_names(list_methods, name, n);
    default: return false;
    }
}

static jv need_str_arg(jctx *c, jv *args, int nargs, int i, const char *m) {
    if (i >= nargs || args[i].type != JV_STR) jinja_error(c, MF_ERR_FORMAT, "str.%s: argument %d must be a string", m, i + 1);
    return args[i];
}

static bool has_prefix(jv s, jv p) { return p.s.n <= s.s.n && !memcmp(s.s.p, p.s.p, p.s.n); }
static bool has_suffix(jv s, jv p) { return p.s.n <= s.s.n && !memcmp(s.s.p + s.s.n - p.s.n, p.s.p, p.s.n); }

/* str.split / rsplit: sep None splits on whitespace runs and drops empty parts. */
static jv str_split(jctx *c, jv self, jv sep, int64_t maxsplit, bool from_right) {
    jv out = jv_list_new(c, 4);
    const char *p = self.s.p;
    size_t n = self.s.n;
    if (sep.type == JV_STR && sep.s.n == 0) jinja_error(c, MF_ERR_FORMAT, "str.split: empty separator");
    if (sep.type != JV_STR) {
        jv parts = jv_list_new(c, 4);
        size_t i = 0;
        int64_t splits = 0;
        if (from_right) { /* split from the right, then reverse */
            size_t end = n;
            for (;;) {
                end -= ju_space_suffix(p, end);
                if (end == 0) break;
                if (maxsplit >= 0 && splits == maxsplit) { jv_list_push(c, parts, jv_strn(p, end)); break; }
                size_t st = end;
                while (st > 0 && !ju_space_suffix(p, st)) st--;
                jv_list_push(c, parts, jv_strn(p + st, end - st));
                splits++;
                end = st;
            }
            for (size_t k = parts.l->n; k-- > 0;) jv_list_push(c, out, parts.l->v[k]);
            return out;
        }
        for (;;) {
            i += ju_space_prefix(p + i, n - i);
            if (i >= n) break;
            if (maxsplit >= 0 && splits == maxsplit) {
                size_t e = n - ju_space_suffix(p + i, n - i);
                jv_list_push(c, out, jv_strn(p + i, e - i));
                break;
            }
            size_t j = i;
            while (j < n) {
                size_t w = ju_space_prefix(p + j, n - j);
                if (w) break;
                uint32_t cp;
                j += ju_decode(p + j, n - j, &cp);
            }
            jv_list_push(c, out, jv_strn(p + i, j - i));
            splits++;
            i = j;
        }
        return out;
    }
    if (from_right) {
        jv parts = jv_list_new(c, 4);
        size_t end = n;
        int64_t splits = 0;
        for (;;) {
            const char *hit = NULL;
            if (maxsplit < 0 || splits < maxsplit)
                for (size_t k = end; k >= sep.s.n && !hit; k--)
                    if (!memcmp(p + k - sep.s.n, sep.s.p, sep.s.n)) hit = p + k - sep.s.n;
            if (!hit) { jv_list_push(c, parts, jv_strn(p, end)); break; }
            jv_list_push(c, parts, jv_strn(hit + sep.s.n, (size_t)(p + end - hit - (ptrdiff_t)sep.s.n)));
            end = (size_t)(hit - p);
            splits++;
        }
        for (size_t k = parts.l->n; k-- > 0;) jv_list_push(c, out, parts.l->v[k]);
        return out;
    }
    int64_t splits = 0;
    for (;;) {
        jinja_step(c);
        const char *hit = (maxsplit < 0 || splits < maxsplit) ? memmem(p, n, sep.s.p, sep.s.n) : NULL;
        if (!hit) { jv_list_push(c, out, jv_strn(p, n)); break; }
        jv_list_push(c, out, jv_strn(p, (size_t)(hit - p)));
        n -= (size_t)(hit - p) + sep.s.n;
        p = hit + sep.s.n;
        splits++;
    }
    return out;
}

static int64_t find_cp(jv self, jv sub, bool from_right) {
    if (sub.s.n > self.s.n) return -1;
    const char *hit = NULL;
    if (!from_right) hit = sub.s.n ? memmem(self.s.p, self.s.n, sub.s.p, sub.s.n) : self.s.p;
    else
        for (size_t k = self.s.n - sub.s.n + 1; k-- > 0 && !hit;)
            if (!memcmp(self.s.p + k, sub.s.p, sub.s.n)) hit = self.s.p + k;
    return hit ? (int64_t)ju_len(self.s.p, (size_t)(hit - self.s.p)) : -1;
}

static jv pad(jctx *c, jv self, int64_t width, jv fill, int where) {
    int64_t n = (int64_t)ju_len(self.s.p, self.s.n);
    if (width > 1000000) jinja_error(c, MF_ERR_RANGE, "padding width %lld is too large", (long long)width);
    if (width <= n) return self;
    const char *f = " ";
    size_t fl = 1;
    if (fill.type == JV_STR) f = fill.s.p, fl = fill.s.n;
    int64_t total = width - n, left = where < 0 ? 0 : where > 0 ? total : total / 2 + (total & width & 1);
    jbuf b = jbuf_make(c);
    for (int64_t i = 0; i < left; i++) jbuf_put(&b, f, fl);
    jbuf_put(&b, self.s.p, self.s.n);
    for (int64_t i = 0; i < total - left; i++) jbuf_put(&b, f, fl);
    return jbuf_value(&b);
}

static bool all_cp(jv self, bool (*pred)(uint32_t)) {
    if (!self.s.n) return false;
    for (size_t i = 0; i < self.s.n;) {
        uint32_t cp;
        i += ju_decode(self.s.p + i, self.s.n - i, &cp);
        if (!pred(cp)) return false;
    }
    return true;
}
static bool cp_digit(uint32_t cp) { return cp >= '0' && cp <= '9'; }
static bool cp_alnum(uint32_t cp) { return ju_isnumeric(cp) || ju_isalpha(cp); }

static jv str_method(jctx *c, jv self, const char *m, jv *args, int nargs, const char **kwn, jv *kwv, int nkw) {
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        if (nargs < 1) jinja_error(c, MF_ERR_FORMAT, "str.%s needs an argument", m);
        bool start = m[0] == 's';
        jv probe = args[0];
        if (probe.type == JV_LIST) {
            for (size_t i = 0; i < probe.l->n; i++)
                if (probe.l->v[i].type == JV_STR && (start ? has_prefix(self, probe.l->v[i]) : has_suffix(self, probe.l->v[i]))) return jv_bool(true);
            return jv_bool(false);
        }
        need_str_arg(c, args, nargs, 0, m);
        return jv_bool(start ? has_prefix(self, probe) : has_suffix(self, probe));
    }
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip"))
        return jinja_str_strip(c, self, nargs ? args[0] : jv_none(), m[0] != 'r', m[0] != 'l');
    if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
        jv sep = kw_or_pos(args, nargs, kwn, kwv, nkw, 0, "sep", jv_none());
        jv ms = kw_or_pos(args, nargs, kwn, kwv, nkw, 1, "maxsplit", jv_int(-1));
        return str_split(c, self, sep, int_arg(c, ms, "split"), m[0] == 'r');
    }
    if (!strcmp(m, "splitlines")) {
        jv out = jv_list_new(c, 4);
        size_t i = 0;
        while (i < self.s.n) {
            const char *nl = memchr(self.s.p + i, '\n', self.s.n - i);
            size_t e = nl ? (size_t)(nl - self.s.p) : self.s.n;
            size_t e2 = e > i && self.s.p[e - 1] == '\r' ? e - 1 : e;
            jv_list_push(c, out, jv_strn(self.s.p + i, e2 - i));
            i = e + 1;
        }
        return out;
    }
    if (!strcmp(m, "replace")) {
        jv cnt = kw_or_pos(args, nargs, kwn, kwv, nkw, 2, "count", jv_int(-1));
        return jinja_str_replace(c, self, need_str_arg(c, args, nargs, 0, m), need_str_arg(c, args, nargs, 1, m), int_arg(c, cnt, "replace"));
    }
    if (!strcmp(m, "upper")) return jinja_str_upper(c, self);
    if (!strcmp(m, "lower") || !strcmp(m, "casefold")) return jinja_str_lower(c, self);
    if (!strcmp(m, "title") || !strcmp(m, "capitalize") || !strcmp(m, "swapcase")) {
        /* title: title case after an uncased character, else lower case; capitalize: title case
         * first, lower case after; swapcase: each cased letter to the other case */
        jbuf b = jbuf_make(c);
        bool prev_cased = false, first = true;
        for (size_t i = 0; i < self.s.n;) {
            uint32_t cp;
            size_t k = ju_decode(self.s.p + i, self.s.n - i, &cp);
            bool lower = m[0] == 't' ? prev_cased : m[0] == 'c' ? !first : true; /* swapcase lowers a capital sigma */
            if (lower && cp == 0x3A3) ju_encode(&b, ju_sigma_is_final(self.s.p, self.s.n, i, k) ? 0x3C2 : 0x3C3);
            else if (m[0] == 't') ju_put_case(&b, cp, prev_cased ? 'l' : 't');
            else if (m[0] == 'c') ju_put_case(&b, cp, first ? 't' : 'l');
            else if (ju_iscased(cp) && !ju_case_changes(cp, 'u') && ju_case_changes(cp, 'l')) ju_put_case(&b, cp, 'l');
            else if (ju_iscased(cp) && !ju_case_changes(cp, 'l') && ju_case_changes(cp, 'u')) ju_put_case(&b, cp, 'u');
            else ju_encode(&b, cp); /* uncased, or title case (neither upper nor lower) */
            prev_cased = ju_iscased(cp);
            first = false;
            i += k;
        }
        return jbuf_value(&b);
    }
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") || !strcmp(m, "rindex")) {
        int64_t r = find_cp(self, need_str_arg(c, args, nargs, 0, m), m[0] == 'r');
        if (r < 0 && strstr(m, "index")) jinja_error(c, MF_ERR_FORMAT, "str.%s: substring not found", m);
        return jv_int(r);
    }
    if (!strcmp(m, "count")) {
        jv sub = need_str_arg(c, args, nargs, 0, m);
        if (!sub.s.n) return jv_int((int64_t)ju_len(self.s.p, self.s.n) + 1);
        int64_t k = 0;
        for (const char *p = self.s.p, *e = self.s.p + self.s.n; (p = memmem(p, (size_t)(e - p), sub.s.p, sub.s.n)); p += sub.s.n) k++;
        return jv_int(k);
    }
    if (!strcmp(m, "format")) {
        jbuf b = jbuf_make(c);
        int auto_idx = 0, numbering = 0;
        for (size_t i = 0; i < self.s.n; i++) {
            char ch = self.s.p[i];
            if ((ch == '{' || ch == '}') && i + 1 < self.s.n && self.s.p[i + 1] == ch) { jbuf_putc(&b, ch); i++; continue; }
            if (ch != '{') { jbuf_putc(&b, ch); continue; }
            const char *close = memchr(self.s.p + i, '}', self.s.n - i);
            if (!close) jinja_error(c, MF_ERR_FORMAT, "str.format: single '{' in format string");
            const char *f = self.s.p + i + 1;
            size_t fl = (size_t)(close - f);
            bool repr = fl >= 2 && f[fl - 2] == '!' && f[fl - 1] == 'r';
            if (fl >= 2 && f[fl - 2] == '!') fl -= 2;
            if (memchr(f, ':', fl)) jinja_error(c, MF_ERR_UNSUPPORTED, "str.format: format specs are not supported");
            jv val;
            if (fl == 0 || cp_digit((uint32_t)f[0])) {
                /* as Python: one format string numbers its fields either automatically or by hand */
                int mode = fl == 0 ? 1 : 2;
                if (numbering && numbering != mode)
                    jinja_error(c, MF_ERR_FORMAT, "str.format: cannot switch between automatic and manual field numbering");
                numbering = mode;
            }
            if (fl == 0) val = auto_idx < nargs ? args[auto_idx++] : jv_undef("format argument");
            else if (cp_digit((uint32_t)f[0])) {
                /* A positional field is digits only; the index is bounded before it can overflow. */
                int64_t idx = 0;
                for (size_t k = 0; k < fl; k++) {
                    if (!cp_digit((uint32_t)f[k])) jinja_error(c, MF_ERR_UNSUPPORTED, "str.format: unsupported field {%.*s}", (int)fl, f);
                    if (idx <= nargs) idx = idx * 10 + (f[k] - '0');
                }
                val = idx < nargs ? args[idx] : jv_undef("format argument");
            } else {
                val = jv_undef("format argument");
                for (int k = 0; k < nkw; k++)
                    if (strlen(kwn[k]) == fl && !memcmp(kwn[k], f, fl)) val = kwv[k];
            }
            if (val.type == JV_UNDEF) jinja_error(c, MF_ERR_FORMAT, "str.format: missing argument for {%.*s}", (int)fl, f);
            repr ? jv_write_repr(c, &b, val) : jv_write_str(c, &b, val);
            i = (size_t)(close - self.s.p);
        }
        return jbuf_value(&b);
    }
    if (!strcmp(m, "join")) {
        if (nargs < 1) jinja_error(c, MF_ERR_FORMAT, "str.join needs an iterable");
        jv it = jinja_iter_list(c, args[0]);
        jbuf b = jbuf_make(c);
        for (size_t i = 0; i < it.l->n; i++) {
            if (it.l->v[i].type != JV_STR) jinja_error(c, MF_ERR_FORMAT, "str.join: sequence item %zu: expected str, got '%s'", i, jv_type_name(it.l->v[i]));
            if (i) jbuf_put(&b, self.s.p, self.s.n);
            jbuf_put(&b, it.l->v[i].s.p, it.l->v[i].s.n);
        }
        return jbuf_value(&b);
    }
    if (!strcmp(m, "isdigit") || !strcmp(m, "isnumeric") || !strcmp(m, "isdecimal")) return jv_bool(all_cp(self, ju_isnumeric));
    if (!strcmp(m, "isalpha")) return jv_bool(all_cp(self, ju_isalpha));
    if (!strcmp(m, "isalnum")) return jv_bool(all_cp(self, cp_alnum));
    if (!strcmp(m, "isspace")) return jv_bool(all_cp(self, ju_isspace));
    if (!strcmp(m, "isupper") || !strcmp(m, "islower")) {
        jv u = jinja_str_upper(c, self), l = jinja_str_lower(c, self);
        bool cased = !jv_equal(u, l);
        return jv_bool(cased && jv_equal(self, m[2] == 'u' ? u : l));
    }
    if (!strcmp(m, "zfill")) {
        int64_t w = nargs ? int_arg(c, args[0], "zfill") : 0;
        int64_t n = (int64_t)ju_len(self.s.p, self.s.n);
        if (w > 1000000) jinja_error(c, MF_ERR_RANGE, "zfill width too large");
        jbuf b = jbuf_make(c);
        size_t at = self.s.n && (self.s.p[0] == '-' || self.s.p[0] == '+');
        jbuf_put(&b, self.s.p, at);
        for (int64_t i = n; i < w; i++) jbuf_putc(&b, '0');
        jbuf_put(&b, self.s.p + at, self.s.n - at);
        return jbuf_value(&b);
    }
    if (!strcmp(m, "center") || !strcmp(m, "ljust") || !strcmp(m, "rjust")) {
        int64_t w = nargs ? int_arg(c, args[0], m) : 0;
        return pad(c, self, w, nargs > 1 ? args[1] : jv_none(), m[0] == 'c' ? 0 : m[0] == 'l' ? -1 : 1);
    }
    if (!strcmp(m, "partition") || !strcmp(m, "rpartition")) {
        jv sep = need_str_arg(c, args, nargs, 0, m);
        int64_t at = find_cp(self, sep, m[0] == 'r');
        jv t = jv_list_new(c, 3);
        t.flags = JV_TUPLE;
        if (at < 0) {
            jv e = jv_strn("", 0);
            if (m[0] == 'r') jv_list_push(c, t, e), jv_list_push(c, t, e), jv_list_push(c, t, self);
            else jv_list_push(c, t, self), jv_list_push(c, t, e), jv_list_push(c, t, e);
            return t;
        }
        size_t off = ju_offset(self.s.p, self.s.n, (size_t)at);
        jv_list_push(c, t, jv_strn(self.s.p, off));
        jv_list_push(c, t, sep);
        jv_list_push(c, t, jv_strn(self.s.p + off + sep.s.n, self.s.n - off - sep.s.n));
        return t;
    }
    if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
        jv a = need_str_arg(c, args, nargs, 0, m);
        if (m[6] == 'p') return has_prefix(self, a) ? jv_strn(self.s.p + a.s.n, self.s.n - a.s.n) : self;
        return has_suffix(self, a) ? jv_strn(self.s.p, self.s.n - a.s.n) : self;
    }
    jinja_error(c, MF_ERR_UNSUPPORTED, "str.%s is not supported", m);
}

jv jinja_call_method(jctx *c, jv self, const char *m, jv *args, int nargs, const char **kwn, jv *kwv, int nkw) {
    if (self.type == JV_STR) return str_method(c, self, m, args, nargs, kwn, kwv, nkw);
    if (self.type == JV_LOOP && !strcmp(m, "cycle")) {
        if (nargs < 1) jinja_error(c, MF_ERR_FORMAT, "loop.cycle needs at least one argument");
        return args[self.loop->index0 % (size_t)nargs];
    }
    if (self.type == JV_DICT) {
        if (!strcmp(m, "get")) {
            if (nargs < 1) jinja_error(c, MF_ERR_FORMAT, "dict.get needs a key");
            jv *v = jv_dict_get(self.d, args[0]);
            return v ? *v : nargs > 1 ? args[1] : jv_none();
        }
        if (!strcmp(m, "items") || !strcmp(m, "keys") || !strcmp(m, "values")) {
            jv out = jv_list_new(c, self.d->n);
            for (size_t i = 0; i < self.d->n; i++) {
                if (m[0] == 'k') jv_list_push(c, out, self.d->k[i]);
                else if (m[0] == 'v') jv_list_push(c, out, self.d->v[i]);
                else {
                    jv pair = jv_list_new(c, 2);
                    pair.flags = JV_TUPLE;
                    jv_list_push(c, pair, self.d->k[i]);
                    jv_list_push(c, pair, self.d->v[i]);
                    jv_list_push(c, out, pair);
                }
            }
            return out;
        }
        if (!strcmp(m, "copy")) {
            jv d = jv_dict_new(c, self.d->n);
            for (size_t i = 0; i < self.d->n; i++) jv_dict_set(c, d.d, self.d->k[i], self.d->v[i]);
            return d;
        }
    }
    if (self.type == JV_LIST) {
        if (!strcmp(m, "index") || !strcmp(m, "count")) {
            if (nargs < 1) jinja_error(c, MF_ERR_FORMAT, "list.%s needs an argument", m);
            int64_t k = 0;
            for (size_t i = 0; i < self.l->n; i++) {
                if (!jv_equal(self.l->v[i], args[0])) continue;
                if (m[0] == 'i') return jv_int((int64_t)i);
                k++;
            }
            if (m[0] == 'i') jinja_error(c, MF_ERR_FORMAT, "list.index: value is not in the list");
            return jv_int(k);
        }
        if (!strcmp(m, "copy")) {
            jv out = jv_list_new(c, self.l->n);
            for (size_t i = 0; i < self.l->n; i++) jv_list_push(c, out, self.l->v[i]);
            return out;
        }
    }
    jinja_error(c, MF_ERR_UNSUPPORTED, "%s.%s() modifies its object, which chat templates may not do (the sandbox forbids it)",
                jv_type_name(self), m);
}

/* ---- printf-style formatting: "fmt" % value-or-tuple ---- */
#define MAX_FORMAT_WIDTH 4096

static int parse_count(jctx *c, const jv *fmt, size_t *i) {
    int v = 0;
    while (*i < fmt->s.n && fmt->s.p[*i] >= '0' && fmt->s.p[*i] <= '9') {
        v = v * 10 + (fmt->s.p[(*i)++] - '0');
        if (v > MAX_FORMAT_WIDTH) jinja_error(c, MF_ERR_RANGE, "format width or precision larger than %d", MAX_FORMAT_WIDTH);
    }
    return v;
}

jv jinja_format_percent(jctx *c, jv fmt, jv args) {
    jbuf b = jbuf_make(c);
    size_t ai = 0;
    bool tuple = args.type == JV_LIST && (args.flags & JV_TUPLE);
    for (size_t i = 0; i < fmt.s.n; i++) {
        char ch = fmt.s.p[i];
        if (ch != '%') { jbuf_putc(&b, ch); continue; }
        if (++i >= fmt.s.n) jinja_error(c, MF_ERR_FORMAT, "incomplete format");
        if (fmt.s.p[i] == '%') { jbuf_putc(&b, '%'); continue; }
        char flags[8];
        size_t nf = 0;
        while (i < fmt.s.n && strchr("-+ #0", fmt.s.p[i]) && fmt.s.p[i]) {
            if (nf < sizeof flags - 1) flags[nf++] = fmt.s.p[i];
            i++;
        }
        flags[nf] = 0;
        int width = parse_count(c, &fmt, &i), prec = -1;
        if (i < fmt.s.n && fmt.s.p[i] == '.') i++, prec = parse_count(c, &fmt, &i);
        if (i >= fmt.s.n) jinja_error(c, MF_ERR_FORMAT, "incomplete format");
        char conv = fmt.s.p[i];
        jv v;
        if (tuple) {
            if (ai >= args.l->n) jinja_error(c, MF_ERR_FORMAT, "not enough arguments for format string");
            v = args.l->v[ai++];
        } else {
            if (ai++) jinja_error(c, MF_ERR_FORMAT, "not enough arguments for format string");
            v = args;
        }
        if (conv == 's' || conv == 'r') { /* width and precision count code points, as in Python */
            jbuf sb = jbuf_make(c);
            conv == 's' ? jv_write_str(c, &sb, v) : jv_write_repr(c, &sb, v);
            size_t n = sb.n, cps = ju_len(sb.p, sb.n);
            if (prec >= 0 && (size_t)prec < cps) n = ju_offset(sb.p, sb.n, (size_t)prec), cps = (size_t)prec;
            bool left = strchr(flags, '-') != NULL;
            for (size_t k = cps; !left && k < (size_t)width; k++) jbuf_putc(&b, ' ');
            jbuf_put(&b, sb.p, n);
            for (size_t k = cps; left && k < (size_t)width; k++) jbuf_putc(&b, ' ');
            continue;
        }
        bool integer = strchr("dixXo", conv) != NULL;
        if (!integer && !strchr("feEgG", conv)) jinja_error(c, MF_ERR_UNSUPPORTED, "unsupported format character '%c'", conv);
        if (v.type != JV_INT && v.type != JV_BOOL && v.type != JV_FLOAT)
            jinja_error(c, MF_ERR_FORMAT, "%%%c format: a real number is required, not %s", conv, jv_type_name(v));
        double x = v.type == JV_FLOAT ? v.f : v.type == JV_INT ? (double)v.i : v.b;
        char spec[24];
        if (integer) { /* by hand: Python keeps 0-padding with a precision, prints -ff and 0o17 */
            if (v.type == JV_FLOAT && !(isfinite(x) && fabs(x) < 9.2e18)) jinja_error(c, MF_ERR_RANGE, "%%%c format: %g is out of range", conv, x);
            long long iv = v.type == JV_INT ? v.i : v.type == JV_BOOL ? v.b : (long long)x;
            unsigned long long mag = iv < 0 ? 0ULL - (unsigned long long)iv : (unsigned long long)iv;
            char digits[32];
            snprintf(spec, sizeof spec, "%%ll%c", conv == 'i' ? 'u' : conv == 'd' ? 'u' : conv);
            int nd = snprintf(digits, sizeof digits, spec, mag);
            const char *sign = iv < 0 ? "-" : strchr(flags, '+') ? "+" : strchr(flags, ' ') ? " " : "";
            const char *prefix = !strchr(flags, '#') ? "" : conv == 'x' ? "0x" : conv == 'X' ? "0X" : conv == 'o' ? "0o" : "";
            int zeros = prec > nd ? prec - nd : 0;
            int len = (int)(strlen(sign) + strlen(prefix)) + zeros + nd;
            bool left = strchr(flags, '-') != NULL, zero_pad = !left && strchr(flags, '0') != NULL;
            for (int k = len; !left && !zero_pad && k < width; k++) jbuf_putc(&b, ' ');
            jbuf_put(&b, sign, strlen(sign));
            jbuf_put(&b, prefix, strlen(prefix));
            for (int k = len; zero_pad && k < width; k++) jbuf_putc(&b, '0');
            for (int k = 0; k < zeros; k++) jbuf_putc(&b, '0');
            jbuf_put(&b, digits, (size_t)nd);
            for (int k = len; left && k < width; k++) jbuf_putc(&b, ' ');
            continue;
        }
        /* floats: C's conversions match Python's for these letters; 1e308 needs 309 digits */
        size_t cap = (size_t)width + (size_t)(prec > 0 ? prec : 0) + 400;
        char *tmp = jarena_alloc(&c->arena, cap);
        snprintf(spec, sizeof spec, "%%%s*.*%c", flags, conv);
        int n = snprintf(tmp, cap, spec, width, prec < 0 ? 6 : prec, x);
        jbuf_put(&b, tmp, n < 0 ? 0 : MF_MIN((size_t)n, cap - 1));
    }
    /* Python: a lone argument left unused is an error unless it is subscriptable (list, dict) */
    if ((tuple && ai < args.l->n) || (!tuple && ai == 0 && args.type != JV_DICT && args.type != JV_LIST))
        jinja_error(c, MF_ERR_FORMAT, "not all arguments converted during string formatting");
    return jbuf_value(&b);
}
