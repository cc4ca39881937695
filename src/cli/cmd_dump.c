/* cmd_dump.c: `minfer dump MODEL TENSOR [-o FILE]` and `minfer dump MODEL --all -o DIR`: dequantize
 * tensors to float32. Without -o it prints the tensor's type, shape, statistics and first values;
 * with -o it writes the values as raw little-endian float32 in row-major order (ne[0] fastest),
 * one file per tensor (DIR/<name>.f32 with --all), for inspecting weights and comparing with other
 * tools. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void dump_usage(FILE *f) {
    fprintf(f,
            "usage: minfer dump MODEL TENSOR [-o FILE]\n"
            "       minfer dump MODEL --all -o DIR\n\n"
            "Dequantizes a tensor to float32. Without -o, prints its type, shape, min/max/mean/rms and\n"
            "first values. With -o, writes raw little-endian float32 values, row-major (the first\n"
            "dimension varies fastest); --all writes every tensor to DIR/<name>.f32.\n");
}

/* Dequantize t row by row, passing each row to out (a FILE, or NULL for statistics only). */
static int dump_tensor(const mf_gguf_tensor *t, mf_file_writer *out, bool print) {
    const int64_t row = t->ne[0];
    int64_t nrows = 1;
    for (uint32_t d = 1; d < MF_GGUF_MAX_DIMS; d++) nrows *= t->ne[d];
    float *buf = malloc((size_t)(row > 0 ? row : 1) * sizeof(float));
    if (!buf) {
        cli_error_status(MF_ERR_NOMEM, "dump");
        return 1;
    }
    /* an unreadable type or a bad row length shows in the first row */
    mf_status st = mf_gguf_tensor_to_f32(t, 0, nrows > 0 && row > 0 ? 1 : 0, buf);
    if (st) {
        cli_error_status(st, "dump");
        free(buf);
        return 1;
    }
    double sum = 0, sum2 = 0;
    float mn = INFINITY, mx = -INFINITY, first[8];
    int nfirst = 0;
    int rc = 0;
    for (int64_t r = 0; r < nrows && row > 0; r++) {
        mf_gguf_tensor_to_f32(t, r, 1, buf);
        if (out && (st = mf_file_writer_write(out, buf, (size_t)row * sizeof(float)))) {
            cli_error_status(st, "dump");
            rc = 1;
            break;
        }
        for (int64_t i = 0; print && i < row; i++) {
            sum += buf[i];
            sum2 += (double)buf[i] * buf[i];
            mn = fminf(mn, buf[i]);
            mx = fmaxf(mx, buf[i]);
            if (nfirst < 8) first[nfirst++] = buf[i];
        }
    }
    if (print && rc == 0) {
        const double n = (double)row * (double)nrows;
        printf("%s: %s [", t->name, mf_type_name(t->type));
        for (uint32_t d = 0; d < t->n_dims; d++) printf("%s%lld", d ? ", " : "", (long long)t->ne[d]);
        printf("], %.0f values\n", n);
        if (n > 0) {
            printf("min %.6g  max %.6g  mean %.6g  rms %.6g\nfirst:", mn, mx, sum / n, sqrt(sum2 / n));
            for (int i = 0; i < nfirst; i++) printf(" %.6g", first[i]);
            printf("\n");
        }
    }
    free(buf);
    return rc;
}

/* Written atomically: on any error the old file (if any) stays exactly as it was. */
static int dump_to_file(const mf_gguf_tensor *t, const char *path) {
    mf_file_writer *w;
    mf_status st = mf_file_writer_open(path, &w);
    if (st) {
        cli_error_status(st, "dump");
        return 1;
    }
    int rc = dump_tensor(t, w, false);
    if (rc) {
        mf_file_writer_abort(w);
    } else if ((st = mf_file_writer_commit(w))) {
        cli_error_status(st, "dump");
        rc = 1;
    }
    return rc;
}

int cmd_dump(int argc, char **argv) {
    const char *model = NULL, *tensor = NULL, *out = NULL;
    bool all = false;
    for (int i = 1; i < argc; i++) {
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            dump_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--all")) {
            all = true;
        } else if ((r = cli_take_value(argc, argv, &i, "-o", &out)) != 0) {
            if (r < 0) return 2;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("dump: unknown option '%s'", argv[i]);
            return 2;
        } else if (!model) {
            model = argv[i];
        } else if (!tensor) {
            tensor = argv[i];
        } else {
            cli_error("dump: unexpected argument '%s'", argv[i]);
            return 2;
        }
    }
    if (!model || (all ? tensor != NULL || !out : !tensor)) {
        dump_usage(stderr);
        return 2;
    }
    if (!(model = cli_model(model))) return 1;
    mf_gguf *g = NULL;
    mf_status s = mf_gguf_open(model, &g);
    if (s != MF_OK) {
        cli_error_status(s, model);
        return 1;
    }
    int rc = 0;
    if (!all) {
        const mf_gguf_tensor *t = mf_gguf_find_tensor(g, tensor);
        if (!t) {
            cli_error("%s: no tensor named '%s' (minfer info lists them)", model, tensor);
            rc = 1;
        } else {
            rc = out ? dump_to_file(t, out) : dump_tensor(t, NULL, true);
        }
    } else {
        if (mkdir(out, 0777) != 0 && errno != EEXIST) {
            cli_error("cannot create directory %s: %s", out, strerror(errno));
            rc = 1;
        }
        for (int64_t i = 0; rc == 0 && i < mf_gguf_n_tensors(g); i++) {
            const mf_gguf_tensor *t = mf_gguf_tensor_at(g, i);
            if (strchr(t->name, '/')) {
                cli_error("tensor name '%s' contains '/'; dump it by name instead", t->name);
                rc = 1;
                break;
            }
            const size_t len = strlen(out) + strlen(t->name) + 8;
            char *path = malloc(len);
            if (!path) {
                rc = 1;
                break;
            }
            snprintf(path, len, "%s/%s.f32", out, t->name);
            rc = dump_to_file(t, path);
            free(path);
        }
    }
    mf_gguf_free(g);
    return rc;
}
