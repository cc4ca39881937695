/* jinja_lex.c: the chat-template lexer. Whitespace handling matches Jinja2 with trim_blocks and
 * lstrip_blocks on (as Hugging Face sets them): "{%-"/"-%}" strip all whitespace on that side, a
 * block or comment tag alone on its line takes the line's indentation with it, and the first
 * newline after "%}" or "#}" is dropped; "+" turns the lstrip or trim off for one tag. Inside tags,
 * tokens follow Python literal syntax (string escapes, 0x/0o/0b and 1_000 integers, floats). */
#include "chat/jinja_lex.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static tok *push_tok(P *p, ttype type, int line) {
    if (p->nt == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 256;
        tok *t = realloc(p->t, cap * sizeof *t);
        if (!t) pfail(p, MF_ERR_NOMEM, line, "out of memory lexing the template");
        p->t = t;
        p->cap = cap;
    }
    tok *t = &p->t[p->nt++];
    memset(t, 0, sizeof *t);
    t->type = (uint8_t)type;
    t->line = line;
    return t;
}

static int count_nl(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '\n';
    return k;
}

static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Emit the text before a tag, applying '-' (strip all trailing whitespace) or lstrip_blocks
 * (drop the indentation when the tag is alone on its line so far). */
static void emit_text(P *p, const char *text, size_t len, char sign, bool lstrip_ok, bool line_starting, int line) {
    if (sign == '-') {
        len -= ju_space_suffix(text, len);
    } else if (sign != '+' && lstrip_ok) {
        size_t l = len;
        while (l > 0 && text[l - 1] != '\n') l--;
        if ((l > 0 || line_starting) && l < len && ju_space_prefix(text + l, len - l) == len - l) len = l;
    }
    if (len) {
        tok *t = push_tok(p, T_DATA, line);
        t->p = text;
        t->n = len;
    }
}

static size_t skip_ws(const char *s, size_t n, size_t i) { return i + ju_space_prefix(s + i, n - i); }

/* Python string-literal unescaping, as Jinja does with the unicode-escape codec. */
static void lex_string(P *p, size_t *pos, int *line) {
    const char *s = p->s;
    char q = s[*pos];
    size_t i = *pos + 1, start = i;
    while (i < p->n && s[i] != q) i += s[i] == '\\' ? 2 : 1;
    if (i >= p->n) pfail(p, MF_ERR_FORMAT, *line, "unterminated string literal");
    jbuf b = {NULL, 0, 0, p->a, SIZE_MAX};
    for (size_t k = start; k < i;) {
        if (s[k] != '\\' || k + 1 >= i) { jbuf_putc(&b, s[k++]); continue; }
        char e = s[k + 1];
        k += 2;
        int hex = 0;
        switch (e) {
        case '\n': break;
        case '\\': jbuf_putc(&b, '\\'); break;
        case '\'': jbuf_putc(&b, '\''); break;
        case '"': jbuf_putc(&b, '"'); break;
        case 'a': jbuf_putc(&b, '\a'); break;
        case 'b': jbuf_putc(&b, '\b'); break;
        case 'f': jbuf_putc(&b, '\f'); break;
        case 'n': jbuf_putc(&b, '\n'); break;
        case 'r': jbuf_putc(&b, '\r'); break;
        case 't': jbuf_putc(&b, '\t'); break;
        case 'v': jbuf_putc(&b, '\v'); break;
        case 'x': hex = 2; break;
        case 'u': hex = 4; break;
        case 'U': hex = 8; break;
        default:
            if (e >= '0' && e <= '7') {
                uint32_t v = (uint32_t)(e - '0');
                for (int d = 0; d < 2 && k < i && s[k] >= '0' && s[k] <= '7'; d++) v = v * 8 + (uint32_t)(s[k++] - '0');
                ju_encode(&b, v);
            } else {
                jbuf_putc(&b, '\\');
                jbuf_putc(&b, e);
            }
        }
        if (hex) {
            uint32_t v = 0;
            for (int d = 0; d < hex; d++, k++) {
                char h = k < i ? s[k] : 0;
                int x = h >= '0' && h <= '9' ? h - '0' : (h | 32) >= 'a' && (h | 32) <= 'f' ? (h | 32) - 'a' + 10 : -1;
                if (x < 0) pfail(p, MF_ERR_FORMAT, *line, "truncated \\%c escape in string literal", e);
                v = v * 16 + (uint32_t)x;
            }
            if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
                pfail(p, MF_ERR_FORMAT, *line, "escape \\%c%0*x is not a valid code point", e, hex, v);
            ju_encode(&b, v);
        }
    }
    tok *t = push_tok(p, T_STRING, *line);
    t->p = b.n ? b.p : "";
    t->n = b.n;
    *line += count_nl(s + *pos, i + 1 - *pos);
    *pos = i + 1;
}

static void lex_number(P *p, size_t *pos, int line) {
    const char *s = p->s;
    size_t i = *pos, n = p->n;
    char buf[64];
    size_t k = 0;
    bool is_float = false;
    int base = 10;
    if (s[i] == '0' && i + 1 < n && strchr("bBoOxX", s[i + 1]) && s[i + 1]) {
        base = (s[i + 1] | 32) == 'b' ? 2 : (s[i + 1] | 32) == 'o' ? 8 : 16;
        i += 2;
        while (i < n && (s[i] == '_' || isxdigit((unsigned char)s[i]))) {
            if (s[i] != '_' && k < sizeof buf - 1) buf[k++] = s[i];
            i++;
        }
    } else {
        while (i < n && (is_digit(s[i]) || (s[i] == '_' && i + 1 < n && is_digit(s[i + 1])))) {
            if (s[i] != '_' && k < sizeof buf - 1) buf[k++] = s[i];
            i++;
        }
        if (i + 1 < n && s[i] == '.' && is_digit(s[i + 1])) {
            is_float = true;
            buf[k < sizeof buf - 1 ? k++ : k] = '.';
            i++;
            while (i < n && (is_digit(s[i]) || (s[i] == '_' && i + 1 < n && is_digit(s[i + 1])))) {
                if (s[i] != '_' && k < sizeof buf - 1) buf[k++] = s[i];
                i++;
            }
        }
        size_t e = i;
        if (e < n && (s[e] | 32) == 'e') {
            e++;
            if (e < n && (s[e] == '+' || s[e] == '-')) e++;
            if (e < n && is_digit(s[e])) {
                is_float = true;
                if (k < sizeof buf - 1) buf[k++] = 'e';
                if ((s[i + 1] == '-' || s[i + 1] == '+') && k < sizeof buf - 1) buf[k++] = s[i + 1];
                i = e;
                while (i < n && (is_digit(s[i]) || s[i] == '_')) {
                    if (s[i] != '_' && k < sizeof buf - 1) buf[k++] = s[i];
                    i++;
                }
            }
        }
    }
    buf[k] = 0;
    if (k >= sizeof buf - 1) pfail(p, MF_ERR_FORMAT, line, "number literal too long");
    tok *t = push_tok(p, is_float ? T_FLOAT : T_INT, line);
    if (is_float) t->val = jv_float(strtod(buf, NULL));
    else {
        errno = 0;
        unsigned long long v = strtoull(buf, NULL, base);
        if (errno || v > INT64_MAX) pfail(p, MF_ERR_UNSUPPORTED, line, "integer literal %s is out of the 64-bit range", buf);
        t->val = jv_int((int64_t)v);
    }
    *pos = i;
}

/* Tokens inside {{ }} or {% %}; returns the position after the end tag. */
static size_t lex_tag(P *p, size_t i, int *line, bool block, bool *ended_nl) {
    const char *s = p->s;
    size_t n = p->n;
    int balance = 0;
    for (;;) {
        size_t j = skip_ws(s, n, i);
        *line += count_nl(s + i, j - i);
        i = j;
        if (i >= n) pfail(p, MF_ERR_FORMAT, *line, "unexpected end of template inside a %s tag", block ? "{% %}" : "{{ }}");
        if (balance == 0) {
            const char *end = block ? "%}" : "}}";
            size_t at = 0;
            char sign = 0;
            if ((s[i] == '-' || (block && s[i] == '+')) && i + 2 < n + 0 && !strncmp(s + i + 1, end, 2)) sign = s[i], at = i + 1;
            else if (i + 1 < n && !strncmp(s + i, end, 2)) at = i;
            if (at || (i + 1 < n && !strncmp(s + i, end, 2))) {
                push_tok(p, block ? T_BLOCK_END : T_VAR_END, *line);
                size_t after = at + 2;
                *ended_nl = false;
                if (sign == '-') {
                    size_t w = skip_ws(s, n, after);
                    *line += count_nl(s + after, w - after);
                    *ended_nl = w > after && s[w - 1] == '\n';
                    after = w;
                } else if (sign != '+' && block && after < n && s[after] == '\n') {
                    after++, (*line)++;
                    *ended_nl = true;
                }
                return after;
            }
        }
        char ch = s[i];
        if (is_digit(ch)) { lex_number(p, &i, *line); continue; }
        if (is_name_start(ch)) {
            size_t k = i;
            while (k < n && is_name_char(s[k])) k++;
            tok *t = push_tok(p, T_NAME, *line);
            t->p = jarena_strndup(p->a, s + i, k - i);
            t->n = k - i;
            i = k;
            continue;
        }
        if (ch == '\'' || ch == '"') { lex_string(p, &i, line); continue; }
        static const struct { const char *s; int op; } two[] = {
            {"//", OP_FLOORDIV}, {"**", OP_POW}, {"==", OP_EQ}, {"!=", OP_NE}, {"<=", OP_LE}, {">=", OP_GE}};
        int op = 0;
        for (size_t k = 0; k < MF_ARRAY_LEN(two); k++)
            if (i + 1 < n && s[i] == two[k].s[0] && s[i + 1] == two[k].s[1]) op = two[k].op;
        if (op) {
            push_tok(p, T_OP, *line)->op = op;
            i += 2;
            continue;
        }
        if (!strchr("+-/*%~[](){}<>=.:|,;", ch) || ch == 0) {
            uint32_t cp; /* name the whole character: the message must stay valid UTF-8 */
            size_t k = ju_decode(s + i, n - i, &cp);
            if (cp < 0x20 || cp == 0x7F || (k == 1 && cp >= 0x80)) pfail(p, MF_ERR_FORMAT, *line, "unexpected character U+%04X in a tag", cp);
            pfail(p, MF_ERR_FORMAT, *line, "unexpected character '%.*s' in a tag", (int)k, s + i);
        }
        if (ch == '(' || ch == '[' || ch == '{') balance++;
        if (ch == ')' || ch == ']' || ch == '}') {
            if (balance == 0) pfail(p, MF_ERR_FORMAT, *line, "unexpected '%c'", ch);
            balance--;
        }
        push_tok(p, T_OP, *line)->op = ch;
        i++;
    }
}

static bool raw_begin(const char *s, size_t n, size_t i, size_t *after, char *sign_after) {
    i = skip_ws(s, n, i);
    if (i + 3 > n || strncmp(s + i, "raw", 3) || (i + 3 < n && is_name_char(s[i + 3]))) return false;
    i = skip_ws(s, n, i + 3);
    *sign_after = 0;
    if (i + 2 < n && s[i] == '-' && !strncmp(s + i + 1, "%}", 2)) {
        *sign_after = '-';
        *after = skip_ws(s, n, i + 3);
        return true;
    }
    if (i + 1 < n && !strncmp(s + i, "%}", 2)) {
        *after = i + 2;
        return true;
    }
    return false;
}

void jinja_lex(P *p) {
    const char *s = p->s;
    size_t n = p->n, pos = 0;
    int line = 1;
    bool line_starting = true;
    while (pos < n) {
        size_t t = pos;
        while (t + 1 < n && !(s[t] == '{' && (s[t + 1] == '{' || s[t + 1] == '%' || s[t + 1] == '#'))) t++;
        if (t + 1 >= n) {
            emit_text(p, s + pos, n - pos, 0, false, false, line);
            break;
        }
        char kind = s[t + 1], sign = 0;
        size_t after = t + 2;
        if (after < n && (s[after] == '-' || s[after] == '+')) sign = s[after++];
        size_t raw_after;
        char raw_sign;
        bool is_raw = kind == '%' && raw_begin(s, n, after, &raw_after, &raw_sign);
        emit_text(p, s + pos, t - pos, sign, kind != '{', line_starting, line);
        line += count_nl(s + pos, after - pos);
        line_starting = false;
        if (is_raw) {
            line += count_nl(s + after, raw_after - after);
            /* raw body up to {% endraw %}, with the same whitespace rules on both tags */
            size_t k = raw_after;
            for (;; k++) {
                if (k + 1 >= n) pfail(p, MF_ERR_FORMAT, line, "missing {%% endraw %%}");
                if (s[k] != '{' || s[k + 1] != '%') continue;
                size_t q = k + 2;
                char es = 0;
                if (q < n && (s[q] == '-' || s[q] == '+')) es = s[q++];
                q = skip_ws(s, n, q);
                if (q + 6 > n || strncmp(s + q, "endraw", 6)) continue;
                q = skip_ws(s, n, q + 6);
                size_t end;
                bool nl = false;
                if (q + 2 < n && s[q] == '-' && !strncmp(s + q + 1, "%}", 2)) end = skip_ws(s, n, q + 3), nl = end > q + 3 && s[end - 1] == '\n';
                else if (q + 2 < n && s[q] == '+' && !strncmp(s + q + 1, "%}", 2)) end = q + 3;
                else if (q + 1 < n && !strncmp(s + q, "%}", 2)) {
                    end = q + 2;
                    if (end < n && s[end] == '\n') end++, nl = true;
                } else continue;
                emit_text(p, s + raw_after, k - raw_after, es, true, false, line);
                line += count_nl(s + raw_after, end - raw_after);
                line_starting = nl;
                pos = end;
                break;
            }
            continue;
        }
        if (kind == '#') {
            if (after >= n) break; /* Jinja ignores a comment opener that ends the template */
            size_t k = after;
            while (k + 1 < n && !(s[k] == '#' && s[k + 1] == '}')) k++;
            if (k + 1 >= n) pfail(p, MF_ERR_FORMAT, line, "missing end of comment tag '#}'");
            size_t end = k + 2;
            line_starting = false;
            if (k > after && s[k - 1] == '-') end = skip_ws(s, n, end);
            else if (!(k > after && s[k - 1] == '+') && end < n && s[end] == '\n') end++;
            line_starting = end > k + 2 && s[end - 1] == '\n';
            line += count_nl(s + after, end - after);
            pos = end;
            continue;
        }
        push_tok(p, kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN, line);
        pos = lex_tag(p, after, &line, kind == '%', &line_starting);
    }
    push_tok(p, T_EOF, line);
}

