/* cmd_viz.c: `minfer viz MODEL [--port 8081] [--host 127.0.0.1]`: the graph viewer (src/viz) with
 * live runs of MODEL; open the URL it prints in a browser. */
#include "bench_probe.h"
#include "cli.h"
#include "viz.h"

#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f, "usage: minfer viz MODEL [options]\n"
               "  --host ADDR        address to listen on (default 127.0.0.1)\n"
               "  --port N           port (default 8081; 0: any free port)\n"
               "  -c, --ctx-size N   KV cache tokens of a live run (default 1024)\n"
               "  --max-tokens N     most tokens a run may generate (default 64)\n"
               "  -t, --threads N    CPU threads (default: all)\n"
               "  --no-probe         do not measure the machine's memory bandwidth and int8 peak at start (half a\n"
               "                     second): nodes are then measured against the best node of their pass\n"
               "The page also opens graph and trace files offline (minfer run --dump-graph-json, MINFER_TRACE).\n");
}

static void print_ready(const char *url, void *user) {
    (void)user;
    printf("minfer: viz listening on %s\n", url);
    fflush(stdout);
}

int cmd_viz(int argc, char **argv) {
    mf_viz_params p;
    mf_viz_default_params(&p);
    cli_context_env(&p.ctx);
    bool probe = true;
    for (int i = 1; i < argc; i++) {
        const char *v;
        long long n;
        int r;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if ((r = cli_take_value(argc, argv, &i, "--host", &v))) {
            if (r < 0) return 2;
            p.host = v;
        } else if ((r = cli_take_value(argc, argv, &i, "--port", &v))) {
            if (r < 0 || !cli_parse_int("--port", v, 0, 65535, &n)) return 2;
            p.port = (uint16_t)n;
        } else if ((r = cli_take_value(argc, argv, &i, "-c", &v)) || (r = cli_take_value(argc, argv, &i, "--ctx-size", &v))) {
            if (r < 0 || !cli_parse_int("--ctx-size", v, 16, 1 << 20, &n)) return 2;
            p.n_ctx = (int32_t)n;
        } else if ((r = cli_take_value(argc, argv, &i, "--max-tokens", &v))) {
            if (r < 0 || !cli_parse_int("--max-tokens", v, 1, 4096, &n)) return 2;
            p.max_tokens = (int32_t)n;
        } else if ((r = cli_take_value(argc, argv, &i, "-t", &v)) || (r = cli_take_value(argc, argv, &i, "--threads", &v))) {
            if (r < 0 || !cli_parse_int("--threads", v, 1, 1024, &n)) return 2;
            p.ctx.n_threads = (int32_t)n;
        } else if (!strcmp(argv[i], "--no-probe")) {
            probe = false;
        } else if (argv[i][0] == '-') {
            cli_error("viz: unknown option '%s' (see minfer viz --help)", argv[i]);
            return 2;
        } else if (!p.model) {
            p.model = argv[i];
        } else {
            cli_error("viz: one model only ('%s' and '%s')", p.model, argv[i]);
            return 2;
        }
    }
    if (!p.model) {
        usage(stderr);
        return 2;
    }
    /* the limits each node is measured against, for the threads the run uses (half a second) */
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    const int32_t threads = p.ctx.n_threads > 0 ? p.ctx.n_threads : online > 0 ? (int32_t)CLI_MIN(online, 64) : 1;
    const char *probe_isa;
    if (probe) cli_bench_probe_limits(threads, true, true, &p.mem_bw_gbs, &p.peak_gmacs, &probe_isa);
    p.on_ready = print_ready;
    mf_status st = mf_viz_run(&p);
    if (st) {
        cli_error_status(st, "viz");
        return 1;
    }
    return 0;
}
