/* cli_util.c: the helpers every command shares: one-line errors and checked number parsing. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("minfer: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void cli_error_status(mf_status s, const char *what) {
    const char *msg = mf_last_error();
    cli_error("%s: %s", what, msg[0] ? msg : mf_status_str(s));
}

bool cli_parse_int(const char *flag, const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        cli_error("%s: '%s' is not an integer in [%lld, %lld]", flag, s, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_float(const char *flag, const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        cli_error("%s: '%s' is not a number in [%g, %g]", flag, s, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

int cli_take_value(int argc, char **argv, int *i, const char *flag, const char **val) {
    if (strcmp(argv[*i], flag) != 0) return 0;
    if (*i + 1 >= argc) {
        cli_error("%s needs a value", flag);
        return -1;
    }
    *val = argv[++*i];
    return 1;
}

void cli_context_env(mf_context_params *p) {
    const char *isa = getenv("MINFER_ISA"), *order = getenv("MINFER_ORDER");
    if (isa && *isa && mf_isa_from_name(isa, &p->isa) != MF_OK) cli_error("MINFER_ISA: %s", mf_last_error());
    if (order && *order) {
        if (!strcmp(order, "fast"))
            p->order = MF_ORDER_FAST;
        else if (!strcmp(order, "exact"))
            p->order = MF_ORDER_EXACT;
        else
            cli_error("MINFER_ORDER: '%s' is not fast or exact", order);
    }
    const char *trace = getenv("MINFER_TRACE"), *dump = getenv("MINFER_DUMP_DIR");
    if (trace && *trace) p->trace_path = trace;
    if (dump && *dump) p->trace_dump_dir = dump;
}

mf_model_load_params cli_load_params(bool no_mmap, bool no_repack) {
    const char *isa = getenv("MINFER_ISA"), *order = getenv("MINFER_ORDER"), *repack = getenv("MINFER_REPACK");
    mf_isa level = MF_ISA_AUTO;
    if (isa && *isa && mf_isa_from_name(isa, &level) != MF_OK) level = MF_ISA_AUTO; /* cli_context_env reports it */
    no_repack |= mf_isa_resolve(level) != mf_isa_resolve(MF_ISA_AUTO) || (order && !strcmp(order, "fast")) ||
                 (repack && !strcmp(repack, "0"));
    return (mf_model_load_params){.no_mmap = no_mmap, .no_repack = no_repack};
}

static int stdout_errno; /* the errno of the first failed write to stdout, -1 when unknown */

bool cli_stdout_ok(void) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return true;
    if (!stdout_errno) stdout_errno = errno ? errno : -1;
    return false;
}

const char *cli_stdout_error(void) { return stdout_errno > 0 ? strerror(stdout_errno) : "write error"; }
