/* cmd_serve.c: `minfer serve MODEL [options]`: the OpenAI-compatible server (src/serve), with
 * llama-server's flag names where the meaning is the same. */
#include "cli.h"
#include "sample_args.h"
#include "serve.h"
#include "spec_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer serve MODEL [options]   (or -m/--model MODEL)\n"
            "  --host ADDR            address to listen on (default 127.0.0.1; 0.0.0.0 or :: for every address)\n"
            "  --port N               port (default 8080; 0: any free port)\n"
            "  -np, --parallel N      slots: requests decoded together (default 4, at most %d)\n"
            "  -c, --ctx-size N       KV cache tokens of all slots together (default 4096 per slot, at most\n"
            "                         the model's context length)\n"
            "  -b, --batch-size N     most tokens one engine step decodes (default 512)\n"
            "  -t, --threads N        CPU threads (default: all)\n"
            "  --threads-http N       HTTP worker threads (default: slots + 4)\n"
            "  --api-key KEY          Bearer key every request (but /health) must carry\n"
            "  --api-key-file FILE    the key, from the first line of FILE\n"
            "  --timeout S            idle connection timeout in seconds (default 600)\n"
            "  --max-queue N          requests that may wait for a busy slot; more get 503 (default 4 x slots)\n"
            "  --alias NAME           the model's name in answers and /v1/models (default: the file name)\n"
            "  --kv-type f16|f32      KV cache type (default f16)\n"
            "  --cors-origin ORIGIN   send Access-Control-Allow-Origin: ORIGIN (default: no CORS)\n"
            "  --sse-ping-interval S  a stream silent for S seconds (waiting for a slot, or its prompt still\n"
            "                         running) gets a ': ping' comment (default 15; 0: none)\n"
            "  --shutdown-grace S     on SIGINT/SIGTERM, how long running requests may finish (default 3)\n"
            "  --no-mmap              read the model into memory instead of mapping it\n"
            "  -nr, --no-repack       keep the weights in the file's layout only (no packed copies for the kernels)\n",
            MF_MAX_SEQ);
    cli_spec_usage(f);
    fprintf(f, "sampling defaults (a request's own fields override them):\n");
    mf_cli_sample_usage(f);
}

static void print_ready(const char *url, void *user) {
    (void)user;
    printf("minfer: listening on %s (OpenAI API at %s/v1)\n", url, url);
    fflush(stdout);
}

/* The first line of a key file, without the line end. */
static char *read_key(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char buf[4096];
    char *line = fgets(buf, sizeof buf, f);
    fclose(f);
    if (!line) return NULL;
    buf[strcspn(buf, "\r\n")] = 0;
    return buf[0] ? strdup(buf) : NULL;
}

int cmd_serve(int argc, char **argv) {
    mf_serve_params p;
    mf_serve_default_params(&p);
    cli_context_env(&p.ctx);
    char *key_from_file = NULL;
    cli_spec_opts spec;
    cli_spec_opts_init(&spec);
    int rc = 2;
    for (int i = 1; i < argc; i++) {
        int r = mf_cli_sample_arg(argc, argv, &i, &p.defaults);
        if (r == 0) r = cli_spec_arg(argc, argv, &i, &spec);
        if (r < 0) goto done;
        if (r > 0) continue;
        const char *v;
        long long n;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            rc = 0;
            goto done;
        } else if (!strcmp(argv[i], "--no-mmap")) {
            p.no_mmap = true;
        } else if (!strcmp(argv[i], "-nr") || !strcmp(argv[i], "--no-repack")) {
            p.no_repack = true;
        } else if ((r = cli_take_value(argc, argv, &i, "-m", &v)) || (r = cli_take_value(argc, argv, &i, "--model", &v))) {
            if (r < 0) goto done;
            p.model = v;
        } else if ((r = cli_take_value(argc, argv, &i, "--host", &v))) {
            if (r < 0) goto done;
            p.host = v;
        } else if ((r = cli_take_value(argc, argv, &i, "--port", &v))) {
            if (r < 0 || !cli_parse_int("--port", v, 0, 65535, &n)) goto done;
            p.port = (uint16_t)n;
        } else if ((r = cli_take_value(argc, argv, &i, "-np", &v)) || (r = cli_take_value(argc, argv, &i, "--parallel", &v))) {
            if (r < 0 || !cli_parse_int("--parallel", v, 1, MF_MAX_SEQ, &n)) goto done;
            p.n_parallel = (int32_t)n;
        } else if ((r = cli_take_value(argc, argv, &i, "-c", &v)) || (r = cli_take_value(argc, argv, &i, "--ctx-size", &v))) {
            if (r < 0 || !cli_parse_int("--ctx-size", v, 0, 1 << 24, &n)) goto done;
            p.n_ctx = (int32_t)n;
        } else if ((r = cli_take_value(argc, argv, &i, "-b", &v)) || (r = cli_take_value(argc, argv, &i, "--batch-size", &v))) {
            if (r < 0 || !cli_parse_int("--batch-size", v, 1, 8192, &n)) goto done;
            p.n_batch = (int32_t)n;
        } else if ((r = cli_take_value(argc, argv, &i, "-t", &v)) || (r = cli_take_value(argc, argv, &i, "--threads", &v))) {
            if (r < 0 || !cli_parse_int("--threads", v, 1, 1024, &n)) goto done;
            p.n_threads = (int32_t)n;
        } else if ((r = cli_take_value(argc, argv, &i, "--threads-http", &v))) {
            if (r < 0 || !cli_parse_int("--threads-http", v, 1, 1024, &n)) goto done;
            p.n_http_threads = (int32_t)n;
        } else if ((r = cli_take_value(argc, argv, &i, "--api-key", &v))) {
            if (r < 0) goto done;
            p.api_key = v;
        } else if ((r = cli_take_value(argc, argv, &i, "--api-key-file", &v))) {
            if (r < 0) goto done;
            free(key_from_file);
            if (!(key_from_file = read_key(v))) {
                cli_error("--api-key-file: cannot read a key from '%s'", v);
                goto done;
            }
            p.api_key = key_from_file;
        } else if ((r = cli_take_value(argc, argv, &i, "--timeout", &v)) || (r = cli_take_value(argc, argv, &i, "-to", &v))) {
            if (r < 0 || !cli_parse_int("--timeout", v, 1, 86400, &n)) goto done;
            p.timeout_s = (int32_t)n;
        } else if ((r = cli_take_value(argc, argv, &i, "--max-queue", &v))) {
            if (r < 0 || !cli_parse_int("--max-queue", v, 1, 1 << 20, &n)) goto done;
            p.max_queue = (int32_t)n;
        } else if ((r = cli_take_value(argc, argv, &i, "--alias", &v)) || (r = cli_take_value(argc, argv, &i, "-a", &v))) {
            if (r < 0) goto done;
            p.alias = v;
        } else if ((r = cli_take_value(argc, argv, &i, "--sse-ping-interval", &v))) {
            if (r < 0 || !cli_parse_int("--sse-ping-interval", v, 0, 3600, &n)) goto done;
            p.sse_ping_s = (int32_t)n;
        } else if ((r = cli_take_value(argc, argv, &i, "--shutdown-grace", &v))) {
            double g;
            if (r < 0 || !cli_parse_float("--shutdown-grace", v, 0, 3600, &g)) goto done;
            p.shutdown_grace_s = g;
        } else if ((r = cli_take_value(argc, argv, &i, "--cors-origin", &v))) {
            if (r < 0) goto done;
            p.cors_origin = v;
        } else if ((r = cli_take_value(argc, argv, &i, "--kv-type", &v))) {
            if (r < 0) goto done;
            if (strcmp(v, "f16") && strcmp(v, "f32")) {
                cli_error("--kv-type: '%s' is not f16 or f32", v);
                goto done;
            }
            p.kv_f32 = !strcmp(v, "f32");
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("serve: unknown option '%s' (see minfer serve --help)", argv[i]);
            goto done;
        } else if (!p.model) {
            p.model = argv[i];
        } else {
            cli_error("serve: unexpected argument '%s'", argv[i]);
            goto done;
        }
    }
    if (!p.model) {
        usage(stderr);
        goto done;
    }
    if (!(p.model = cli_model(p.model))) goto done; /* a path, a cached name, hf:..., ollama:... */
    p.spec = spec.p;
    cli_spec_warn_unused(&spec);
    if (spec.draft_path && !(p.draft_model = cli_model(spec.draft_path))) goto done;
    p.on_ready = print_ready;
    p.no_repack = cli_load_params(p.no_mmap, p.no_repack).no_repack;
    mf_status st = mf_serve_run(&p);
    if (st) {
        cli_error_status(st, "serve");
        rc = 1;
    } else {
        rc = 0;
    }
done:
    mf_sample_settings_free(&p.defaults);
    free(key_from_file);
    return rc;
}
