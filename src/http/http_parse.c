/* http_parse.c: the pure helpers over what clients send: request targets (path and query,
 * percent-decoded, NULs and control bytes refused), Content-Type, JSON with a nesting limit,
 * the constant-time key comparison, and the OpenAI error object with a UTF-8-safe message. */
#include "http/http_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

/* ---- request targets ---- */

static int hex_val(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decode src[0..n) into dst (which has room for n + 1 bytes), '+' as space when plus. The decoded
 * bytes are refused when they hold a NUL, or a control byte when no_ctl. `what` names the part. */
static mf_status decode(const char *src, size_t n, char *dst, bool plus, bool no_ctl, const char *what) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)src[i];
        if (c == '%') {
            int hi = i + 2 < n ? hex_val((unsigned char)src[i + 1]) : -1;
            int lo = i + 2 < n ? hex_val((unsigned char)src[i + 2]) : -1;
            if (hi < 0 || lo < 0)
                return mf_fail(MF_ERR_FORMAT, "%s: '%%' at byte %zu is not followed by two hex digits", what, i);
            c = (unsigned char)(hi * 16 + lo);
            i += 2;
        } else if (plus && c == '+') {
            c = ' ';
        }
        if (c == 0) return mf_fail(MF_ERR_FORMAT, "%s holds a NUL byte", what);
        if (no_ctl && (c < 0x20 || c == 0x7f))
            return mf_fail(MF_ERR_FORMAT, "%s holds the control byte 0x%02x", what, c);
        dst[o++] = (char)c;
    }
    dst[o] = '\0';
    return MF_OK;
}

mf_status mf_http_target_parse(const char *raw, size_t len, mf_http_target *t) {
    memset(t, 0, sizeof *t);
    if (len == 0 || raw[0] != '/')
        return mf_fail(MF_ERR_FORMAT, "request target must start with '/' (origin form)");
    if (memchr(raw, '\0', len)) return mf_fail(MF_ERR_FORMAT, "request target holds a NUL byte");
    const char *q = memchr(raw, '?', len);
    size_t path_len = q ? (size_t)(q - raw) : len;
    size_t n_pairs = 0;
    if (q)
        for (const char *c = q + 1; c < raw + len; c++) n_pairs += *c == '&';
    if (q) n_pairs++;
    if (n_pairs > MF_HTTP_MAX_QUERY)
        return mf_fail(MF_ERR_FORMAT, "more than %d query parameters", MF_HTTP_MAX_QUERY);
    /* One block: two pointer arrays, then the decoded path and pairs (never longer than raw). */
    size_t ptrs = 2 * n_pairs * sizeof(char *), bytes;
    if (!mf_add_size(ptrs, len, &bytes) || !mf_add_size(bytes, 2 * n_pairs + 2, &bytes))
        return mf_fail(MF_ERR_FORMAT, "request target too long");
    char *block = mf_malloc(bytes);
    if (!block) return MF_ERR_NOMEM;
    t->block = block;
    t->keys = (char **)block;
    t->vals = t->keys + n_pairs;
    char *out = block + ptrs;
    t->path = out;
    mf_status st = decode(raw, path_len, out, false, true, "path");
    if (st) goto fail;
    out += strlen(out) + 1;
    if (q) {
        const char *c = q + 1, *end = raw + len;
        while (c <= end) {
            const char *amp = memchr(c, '&', (size_t)(end - c));
            const char *stop = amp ? amp : end;
            if (stop > c) {
                const char *eq = memchr(c, '=', (size_t)(stop - c));
                const char *kend = eq ? eq : stop;
                t->keys[t->n_query] = out;
                if ((st = decode(c, (size_t)(kend - c), out, true, false, "query parameter name"))) goto fail;
                out += strlen(out) + 1;
                t->vals[t->n_query] = out;
                if (eq) {
                    if ((st = decode(eq + 1, (size_t)(stop - eq - 1), out, true, false, "query parameter value")))
                        goto fail;
                } else {
                    *out = '\0';
                }
                out += strlen(out) + 1;
                t->n_query++;
            }
            if (!amp) break;
            c = amp + 1;
        }
    }
    return MF_OK;
fail:
    mf_http_target_free(t);
    return st;
}

void mf_http_target_free(mf_http_target *t) {
    if (!t) return;
    free(t->block);
    memset(t, 0, sizeof *t);
}

/* ---- Content-Type ---- */

static const char *skip_ows(const char *s) {
    while (*s == ' ' || *s == '\t') s++;
    return s;
}

bool mf_http_tchar(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

bool mf_http_content_type_is(const char *value, const char *mime) {
    if (!value || !mime) return false;
    const char *s = skip_ows(value);
    size_t n = strlen(mime);
    if (strncasecmp(s, mime, n) != 0) return false;
    s += n;
    for (;;) {
        s = skip_ows(s);
        if (*s == '\0') return true;
        if (*s != ';') return false;
        s = skip_ows(s + 1);
        if (*s == '\0') return true; /* a trailing ';' */
        const char *name = s;
        while (mf_http_tchar((unsigned char)*s)) s++;
        size_t name_len = (size_t)(s - name);
        if (name_len == 0 || *s != '=') return false;
        s++;
        char val[32];
        size_t vl = 0;
        bool fits = true;
        if (*s == '"') {
            for (s++; *s && *s != '"'; s++) {
                if (*s == '\\' && s[1]) s++;
                if (vl + 1 < sizeof val) val[vl++] = *s;
                else fits = false;
            }
            if (*s != '"') return false;
            s++;
        } else {
            for (; mf_http_tchar((unsigned char)*s); s++) {
                if (vl + 1 < sizeof val) val[vl++] = *s;
                else fits = false;
            }
            if (vl == 0) return false;
        }
        val[vl] = '\0';
        if (name_len == 7 && strncasecmp(name, "charset", 7) == 0 &&
            (!fits || (strcasecmp(val, "utf-8") != 0 && strcasecmp(val, "utf8") != 0)))
            return false;
    }
}

/* ---- JSON ---- */

/* Line and character column (1-based, UTF-8 continuation bytes not counted, as jansson counts)
 * of byte `at` in text. */
static void line_col(const char *text, size_t at, int *line, int *col) {
    int l = 1, c = 0;
    for (size_t i = 0; i <= at; i++) {
        unsigned char b = (unsigned char)text[i];
        if (i < at && b == '\n') {
            l++;
            c = 0;
        } else if ((b & 0xc0) != 0x80) {
            c++;
        }
    }
    *line = l;
    *col = c;
}

json_t *mf_http_json_parse(const char *text, size_t len, int max_depth, char *msg, size_t msg_cap) {
    if (msg_cap) msg[0] = '\0';
    /* jansson's own limit is 2048 levels; ours comes first, found by a scan that only follows
     * strings and brackets (the parser below judges everything else). */
    int depth = 0;
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth) {
                int line, col;
                line_col(text, i, &line, &col);
                snprintf(msg, msg_cap, "JSON nested deeper than %d levels at line %d, column %d", max_depth, line,
                         col);
                return NULL;
            }
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--;
        }
    }
    json_error_t err;
    json_t *v = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (!v) {
        if (len == 0) snprintf(msg, msg_cap, "the body is empty; a JSON value was expected");
        else if (strstr(err.text, "JSON_ALLOW_NUL")) /* valid JSON, but no string here may hold a NUL */
            snprintf(msg, msg_cap, "a string at line %d, column %d holds \\u0000 (a NUL character), which is not "
                     "accepted", err.line, err.column);
        else snprintf(msg, msg_cap, "invalid JSON at line %d, column %d: %s", err.line, err.column, err.text);
    }
    return v;
}

/* ---- secrets ---- */

bool mf_http_secret_equal(const char *secret, const char *candidate, size_t candidate_len) {
    size_t n = strlen(secret);
    /* Every byte of the secret is looked at whatever the candidate holds; the length difference
     * is folded into the same accumulator, so no branch depends on where the first mismatch is. */
    volatile unsigned char diff = (unsigned char)((n ^ candidate_len) != 0);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = i < candidate_len ? (unsigned char)candidate[i] : 0;
        diff |= (unsigned char)secret[i] ^ c;
    }
    return diff == 0;
}

/* ---- errors ---- */

/* Length of the valid UTF-8 sequence at s (up to n bytes), 0 if there is none. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) len = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) len = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, cp = c & 0x07;
    else return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

size_t mf_http_utf8_sanitize(char *dst, size_t cap, const char *src) {
    const unsigned char *s = (const unsigned char *)src;
    size_t n = strlen(src), o = 0;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_len(s + i, n - i);
        size_t take = l ? l : 1;
        if (o + take >= cap) break;
        if (l) memcpy(dst + o, s + i, l);
        else dst[o] = '?';
        o += take;
        i += take;
    }
    dst[o] = '\0';
    return o;
}

const char *mf_http_error_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 501: return "not_supported_error";
    case 503: return "unavailable_error";
    default: return status >= 400 && status < 500 ? "invalid_request_error" : "server_error";
    }
}

json_t *mf_http_error_json(int status, const char *message, const char *param, const char *code) {
    char m[MF_HTTP_MSG_MAX + 1], p[256], c[256];
    mf_http_utf8_sanitize(m, sizeof m, message ? message : "");
    json_t *err = json_object(), *o = json_object();
    if (!err || !o) goto fail;
    if (json_object_set_new(o, "message", json_string(m)) ||
        json_object_set_new(o, "type", json_string(mf_http_error_type(status))))
        goto fail;
    if (param) mf_http_utf8_sanitize(p, sizeof p, param);
    if (code) mf_http_utf8_sanitize(c, sizeof c, code);
    if (json_object_set_new(o, "param", param ? json_string(p) : json_null()) ||
        json_object_set_new(o, "code", code ? json_string(c) : json_null()))
        goto fail;
    if (json_object_set_new(err, "error", o)) { /* o is taken even on failure */
        json_decref(err);
        return NULL;
    }
    return err;
fail:
    json_decref(o);
    json_decref(err);
    return NULL;
}
