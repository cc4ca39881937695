/* cmd_tokenize.c: `minfer tokenize MODEL TEXT`: show the token ids and pieces the model's tokenizer
 * makes of a text (works on vocabulary-only GGUF files too). */
#include "cli.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static void tokenize_usage(FILE *f) {
    fprintf(f,
            "usage: minfer tokenize MODEL (TEXT | - | --file F) [options] [-- TEXT]\n"
            "  TEXT            the text to tokenize; '-' reads standard input\n"
            "  --file F        read the text from file F (bytes exactly as they are)\n"
            "  --ids           print only the ids, as one JSON array on one line\n"
            "  --json          print a JSON array of {\"id\", \"piece\"} objects\n"
            "  --no-special    treat control-token text (<|im_start|>, ...) as plain text\n"
            "  --no-add-special  do not add BOS/EOS even if the model asks for them\n"
            "  --bench N       encode N times and print only the speed (best run) and token count\n"
            "Default output: one line per token, \"ID -> 'piece'\".\n");
}

/* Read a whole stream; returns a malloc'd buffer (NULL on failure, with an error printed). */
static char *read_all(FILE *f, const char *name, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    if (!buf) {
        cli_error("%s: out of memory", name);
        return NULL;
    }
    if (ferror(f)) {
        cli_error("%s: read error", name);
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* Print bytes as text, escaping what is not valid UTF-8 (and control characters) as \xNN. */
static void print_escaped(const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = b[i];
        if (c == '\n') fputs("\\n", stdout), i++;
        else if (c == '\r') fputs("\\r", stdout), i++;
        else if (c == '\t') fputs("\\t", stdout), i++;
        else if (c < 0x20 || c == 0x7F) printf("\\x%02X", c), i++;
        else if (c < 0x80) putchar(c), i++;
        else {
            /* Accept a well-formed multi-byte sequence as is. */
            size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
            bool ok = len && c <= 0xF4 && i + len <= n;
            for (size_t k = 1; ok && k < len; k++) ok = (b[i + k] & 0xC0) == 0x80;
            if (ok) {
                json_t *j = json_stringn((const char *)b + i, len); /* rejects overlong forms, surrogates */
                ok = j != NULL;
                json_decref(j);
            }
            if (ok) {
                fwrite(b + i, 1, len, stdout);
                i += len;
            } else {
                printf("\\x%02X", c);
                i++;
            }
        }
    }
}

static int print_json(const mf_tokenizer *tok, const int32_t *ids, size_t n) {
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        const uint8_t *b;
        size_t len;
        mf_tokenizer_token_to_bytes(tok, ids[i], MF_TOK_DECODE_SPECIAL, &b, &len);
        json_t *o = json_object();
        json_object_set_new(o, "id", json_integer(ids[i]));
        json_t *piece = json_stringn((const char *)b, len);
        if (!piece) {
            /* Not valid UTF-8 on its own (part of a character): give the bytes too. */
            json_t *bytes = json_array();
            for (size_t k = 0; k < len; k++) json_array_append_new(bytes, json_integer(b[k]));
            json_object_set_new(o, "bytes", bytes);
            char *lossy = malloc(len * 3 + 1);
            size_t m = 0;
            for (size_t k = 0; lossy && k < len; k++) {
                if (b[k] < 0x80) lossy[m++] = (char)b[k];
                else memcpy(lossy + m, "\xEF\xBF\xBD", 3), m += 3;
            }
            piece = lossy ? json_stringn(lossy, m) : json_string("");
            free(lossy);
        }
        json_object_set_new(o, "piece", piece);
        json_array_append_new(arr, o);
    }
    char *s = arr ? json_dumps(arr, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(arr);
    if (!s) {
        cli_error("tokenize: out of memory writing JSON");
        return 1;
    }
    puts(s);
    free(s);
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *text_arg = NULL, *file = NULL;
    bool ids_only = false, json = false, parse_special = true, add_special = true;
    const char *bench_arg = NULL;
    long long bench = 0;
    bool options_done = false; /* after "--", every argument is positional (text may start with "--") */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options_done || a[0] != '-' || a[1] != '-' || !a[2]) {
            if (!options_done && !strcmp(a, "--")) options_done = true;
            else if (!options_done && !strcmp(a, "-h")) {
                tokenize_usage(stdout);
                return 0;
            }
            else if (!model) model = a;
            else if (!text_arg) text_arg = a;
            else {
                cli_error("tokenize: unexpected argument '%s' (quote the text as one argument)", a);
                return 2;
            }
            continue;
        }
        int r = cli_take_value(argc, argv, &i, "--file", &file);
        if (!r) r = cli_take_value(argc, argv, &i, "--bench", &bench_arg);
        if (r < 0) return 2;
        if (r) continue;
        if (!strcmp(a, "--help")) {
            tokenize_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--ids")) ids_only = true;
        else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--no-special")) parse_special = false;
        else if (!strcmp(a, "--no-add-special")) add_special = false;
        else {
            cli_error("tokenize: unknown option '%s' (use -- before a text that starts with --)", a);
            return 2;
        }
    }
    if (bench_arg && !cli_parse_int("--bench", bench_arg, 1, 1000000, &bench)) return 2;
    if (!model || (!text_arg && !file)) {
        cli_error("tokenize: %s (see minfer tokenize --help)", !model ? "missing MODEL and TEXT" : "missing TEXT");
        return 2;
    }
    if (text_arg && file) {
        cli_error("tokenize: give the text either as an argument or with --file, not both");
        return 2;
    }

    char *owned = NULL;
    const char *text;
    size_t len;
    if (file || !strcmp(text_arg, "-")) {
        FILE *f = file ? fopen(file, "rb") : stdin;
        if (!f) {
            cli_error("tokenize: cannot open '%s': %s", file, strerror(errno));
            return 1;
        }
        owned = read_all(f, file ? file : "stdin", &len);
        if (file) fclose(f);
        if (!owned) return 1;
        text = owned;
    } else {
        text = text_arg;
        len = strlen(text_arg);
    }

    mf_gguf *g = NULL;
    mf_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = 1;
    if (!(model = cli_model(model))) return 1;
    mf_status s = mf_gguf_open(model, &g);
    if (s) {
        cli_error_status(s, model);
        goto done;
    }
    if ((s = mf_tokenizer_load(g, &tok))) {
        cli_error_status(s, model);
        goto done;
    }
    unsigned flags = (parse_special ? MF_TOK_PARSE_SPECIAL : 0) | (add_special ? MF_TOK_ADD_SPECIAL : 0);
    if ((s = mf_tokenizer_encode(tok, text, len, flags, &ids, &n))) {
        cli_error_status(s, "tokenize");
        goto done;
    }
    if (bench) {
        double best = 1e30;
        for (long long r = 0; r < bench; r++) {
            free(ids);
            double t0 = mf_time_s();
            s = mf_tokenizer_encode(tok, text, len, flags, &ids, &n);
            double dt = mf_time_s() - t0;
            if (s) {
                cli_error_status(s, "tokenize");
                goto done;
            }
            if (dt < best) best = dt;
        }
        printf("tokenize: %zu bytes -> %zu tokens, best of %lld: %.3f ms, %.2f MB/s\n", len, n, bench, best * 1e3,
               len / best / 1e6);
        rc = 0;
    } else if (ids_only) {
        putchar('[');
        for (size_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
        puts("]");
        rc = 0;
    } else if (json) {
        rc = print_json(tok, ids, n);
    } else {
        for (size_t i = 0; i < n; i++) {
            const uint8_t *b;
            size_t blen;
            mf_tokenizer_token_to_bytes(tok, ids[i], MF_TOK_DECODE_SPECIAL, &b, &blen);
            printf("%6d -> '", ids[i]);
            print_escaped(b, blen);
            puts("'");
        }
        rc = 0;
    }
done:
    free(ids);
    mf_tokenizer_free(tok);
    mf_gguf_free(g);
    free(owned);
    return rc;
}
