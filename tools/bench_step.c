/* bench_step.c: the cost of one continuous-batching step as `minfer serve` forms it, through the
 * public API: S sequences decoding one token each, alone (a decode-only step) or beside a chunk of
 * C prompt tokens of another sequence that already holds D tokens (a prefilling step). Each step's
 * tokens are removed from the cache after it, so every repetition runs at the same positions and
 * depth. Prints the median of each kind of step, and what a prompt token adds to a step
 * (the figure the server's prompt budget divides by); with --ops, a per-op split of both kinds from
 * a separate run with a node callback (its statistics slow that run, so its total is not the
 * median's). Random token ids: the cost does not depend on them.
 *   usage: bench_step MODEL [-t THREADS] [-s S] [-c C] [-d D] [-p PROMPT] [-r REPS] [--ops]
 *   (defaults: 2 threads, S 3, C 16, D 0, a 32-token prompt per decoding sequence, 30 repetitions)
 *   e.g. bench_step qwen2-0.5b-Q4_0.gguf -s 3 -c 16 -d 2000 */
#include "minfer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Per-op seconds of one kind of step, summed over its repetitions (matmuls split by weight name). */
enum { MAX_OPS = 64 };
typedef struct {
    char name[48];
    double s[2]; /* decode-only, prefilling */
} op_time;

typedef struct {
    op_time ops[MAX_OPS];
    int n;
    int kind; /* the step running: 0 decode-only, 1 prefilling, -1 none */
} op_log;

static void on_node(const mf_node_event *ev, void *user) {
    op_log *log = user;
    if (log->kind < 0) return;
    char key[48];
    if (!strcmp(ev->op, "matmul")) { /* "ffn_up-3" -> "matmul ffn_up" */
        const char *dash = strrchr(ev->name, '-');
        snprintf(key, sizeof key, "matmul %.*s", (int)(dash ? dash - ev->name : (long)strlen(ev->name)), ev->name);
    } else {
        snprintf(key, sizeof key, "%s", ev->op);
    }
    for (int i = 0; i < log->n; i++)
        if (!strcmp(log->ops[i].name, key)) {
            log->ops[i].s[log->kind] += ev->seconds;
            return;
        }
    if (log->n == MAX_OPS) return;
    op_time *o = &log->ops[log->n++];
    snprintf(o->name, sizeof o->name, "%s", key);
    o->s[0] = o->s[1] = 0;
    o->s[log->kind] = ev->seconds;
}

typedef struct {
    int threads, S, C, D, prompt, reps;
    mf_isa isa;
    mf_float_order order;
} bench_args;

static uint64_t rng = 88172645463325252ull;
static int32_t rnd_token(int32_t n_vocab) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (int32_t)((rng >> 33) % (uint64_t)(n_vocab > 1000 ? 1000 : n_vocab)) + (n_vocab > 1100 ? 100 : 0);
}

/* Decode b, report failure. */
static int decode(mf_context *c, const mf_batch *b) {
    if (mf_context_decode(c, b) == MF_OK) return 0;
    fprintf(stderr, "bench_step: decode of %d tokens failed: %s\n", b->n_tokens, mf_last_error());
    return -1;
}

/* One context: the S decoding sequences' prompts and sequence S's D tokens, then reps pairs of
 * steps (decode-only, prefilling) at fixed positions; times[0..reps) and times[reps..2 reps). */
static int run(const mf_model *m, const bench_args *a, op_log *log, double *times) {
    mf_context_params cp = mf_context_default_params();
    cp.n_threads = a->threads;
    cp.isa = a->isa; /* MINFER_ISA and MINFER_ORDER, as the minfer commands read them */
    cp.order = a->order;
    cp.n_ctx = a->S * (a->prompt + 1) + a->D + a->C + 16;
    if (log) cp.node_callback = on_node, cp.node_callback_user = log;
    mf_context *c;
    if (mf_context_create(m, &cp, &c)) {
        fprintf(stderr, "bench_step: %s\n", mf_last_error());
        return -1;
    }
    const int32_t n_vocab = mf_model_n_vocab(m), cap = a->prompt > 512 ? a->prompt : 512;
    const int32_t nb = a->S + a->C > cap ? a->S + a->C : cap;
    int32_t *tok = malloc((size_t)nb * sizeof *tok), *pos = malloc((size_t)nb * sizeof *pos),
            *seq = malloc((size_t)nb * sizeof *seq);
    int8_t *lg = malloc((size_t)nb);
    int rc = !tok || !pos || !seq || !lg ? -1 : 0;
    if (rc) fprintf(stderr, "bench_step: out of memory\n");
    if (log) log->kind = -1;
    /* the decoding sequences' prompts, then the prefilling sequence's depth in chunks of 512 */
    for (int32_t s = 0; s <= a->S && !rc; s++) {
        const int32_t n = s < a->S ? a->prompt : a->D;
        for (int32_t done = 0; done < n && !rc;) {
            const int32_t k = n - done < 512 ? n - done : 512;
            for (int32_t j = 0; j < k; j++)
                tok[j] = rnd_token(n_vocab), pos[j] = done + j, seq[j] = s, lg[j] = j == k - 1;
            const mf_batch b = {.n_tokens = k, .tokens = tok, .pos = pos, .seq = seq, .logits = lg};
            rc = decode(c, &b);
            done += k;
        }
    }
    for (int r = 0; r < 2 * a->reps && !rc; r++) {
        const int kind = r % 2;
        int32_t n = 0;
        for (int32_t s = 0; s < a->S; s++)
            tok[n] = rnd_token(n_vocab), pos[n] = a->prompt, seq[n] = s, lg[n++] = 1;
        for (int32_t j = 0; kind && j < a->C; j++)
            tok[n] = rnd_token(n_vocab), pos[n] = a->D + j, seq[n] = a->S, lg[n++] = 0;
        if (n == 0) continue;
        const mf_batch b = {.n_tokens = n, .tokens = tok, .pos = pos, .seq = seq, .logits = lg};
        if (log) log->kind = kind;
        const double t0 = mf_time_s();
        rc = decode(c, &b);
        times[kind * a->reps + r / 2] = mf_time_s() - t0;
        if (log) log->kind = -1;
        for (int32_t s = 0; s < a->S && !rc; s++) rc = mf_context_seq_rm(c, s, a->prompt, -1) ? -1 : 0;
        if (kind && !rc) rc = mf_context_seq_rm(c, a->S, a->D, -1) ? -1 : 0;
    }
    free(tok), free(pos), free(seq), free(lg);
    mf_context_free(c);
    return rc;
}

static int parse_int(const char *flag, const char *v, int lo, int hi, int *out) {
    char *end;
    const long x = strtol(v, &end, 10);
    if (*v && !*end && x >= lo && x <= hi) {
        *out = (int)x;
        return 0;
    }
    fprintf(stderr, "bench_step: %s %s: use %d .. %d\n", flag, v, lo, hi);
    return -1;
}

int main(int argc, char **argv) {
    bench_args a = {.threads = 2, .S = 3, .C = 16, .D = 0, .prompt = 32, .reps = 30};
    const char *path = NULL;
    int ops = 0;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        int *dst = !strcmp(f, "-t") ? &a.threads : !strcmp(f, "-s") ? &a.S : !strcmp(f, "-c") ? &a.C
                 : !strcmp(f, "-d") ? &a.D : !strcmp(f, "-p") ? &a.prompt : !strcmp(f, "-r") ? &a.reps : NULL;
        if (dst) {
            const int lo = dst == &a.S || dst == &a.C || dst == &a.D ? 0 : 1;
            if (i + 1 == argc || parse_int(f, argv[i + 1], lo, dst == &a.threads ? 256 : 1 << 20, dst)) return 2;
            i++;
        } else if (!strcmp(f, "--ops")) {
            ops = 1;
        } else if (f[0] != '-' && !path) {
            path = f;
        } else {
            fprintf(stderr, "usage: bench_step MODEL [-t THREADS] [-s S] [-c C] [-d D] [-p PROMPT] [-r REPS] [--ops]\n");
            return 2;
        }
    }
    if (!path || a.S + a.C == 0 || a.S + 1 > MF_MAX_SEQ) {
        fprintf(stderr, "usage: bench_step MODEL [-t THREADS] [-s S] [-c C] [-d D] [-p PROMPT] [-r REPS] [--ops]\n"
                        "  (at least one token per step: S + C > 0; S < %d)\n", MF_MAX_SEQ);
        return 2;
    }
    mf_model *m;
    /* MINFER_ISA picks the kernels' level as for the minfer commands; the load then keeps the
     * file's layout (packed weights are the best level's). MINFER_REPACK=0: as --no-repack. */
    const char *repack = getenv("MINFER_REPACK"), *isa = getenv("MINFER_ISA");
    if (isa && *isa && mf_isa_from_name(isa, &a.isa) != MF_OK) {
        fprintf(stderr, "bench_step: MINFER_ISA: %s\n", mf_last_error());
        return 2;
    }
    const char *order = getenv("MINFER_ORDER");
    if (order && *order && strcmp(order, "fast") && strcmp(order, "exact")) {
        fprintf(stderr, "bench_step: MINFER_ORDER: '%s' is not fast or exact\n", order);
        return 2;
    }
    a.order = order && !strcmp(order, "fast") ? MF_ORDER_FAST : MF_ORDER_EXACT;
    const mf_model_load_params lp = {.no_repack = (repack && !strcmp(repack, "0")) ||
                                                  mf_isa_resolve(a.isa) != mf_isa_resolve(MF_ISA_AUTO)};
    if (mf_model_load_ex(path, &lp, &m)) {
        fprintf(stderr, "bench_step: %s\n", mf_last_error());
        return 1;
    }
    double *times = calloc(2 * (size_t)a.reps, sizeof *times);
    op_log *log = ops ? calloc(1, sizeof *log) : NULL;
    int rc = !times || (ops && !log) ? -1 : run(m, &a, NULL, times);
    if (!rc) {
        qsort(times, (size_t)a.reps, sizeof *times, cmp_double);
        qsort(times + a.reps, (size_t)a.reps, sizeof *times, cmp_double);
        const double dec = a.S ? times[a.reps / 2] : 0, pre = times[a.reps + a.reps / 2];
        printf("%s: %d threads, %d decoding sequences, a %d-token prompt chunk at depth %d, median of %d\n", path,
               a.threads, a.S, a.C, a.D, a.reps);
        if (a.S) printf("  decode-only step (%d tokens)     %8.2f ms\n", a.S, 1e3 * dec);
        printf("  prefilling step (%d + %d tokens)  %8.2f ms", a.S, a.C, 1e3 * pre);
        if (a.S) printf("  (%.2fx the decode-only step)", pre / dec);
        printf("\n");
        if (a.C) printf("  a prompt token adds            %8.3f ms\n", 1e3 * (pre - dec) / a.C);
    }
    if (!rc && ops && !(rc = run(m, &a, log, times))) {
        printf("  per op (a run with a node callback; ms per step)   decode-only   prefilling\n");
        for (int i = 0; i < log->n; i++)
            printf("    %-30s %12.3f %12.3f\n", log->ops[i].name, 1e3 * log->ops[i].s[0] / a.reps,
                   1e3 * log->ops[i].s[1] / a.reps);
    }
    free(times);
    free(log);
    mf_model_free(m);
    return rc ? 1 : 0;
}
