/* main.c: the minfer program: dispatches `minfer COMMAND ...` to the command table in cli.h. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} cli_command;

#define MF_CLI_ENTRY(name, fn, help) {name, fn, help},
static const cli_command commands[] = {MF_CLI_COMMANDS(MF_CLI_ENTRY){NULL, NULL, NULL}};
#undef MF_CLI_ENTRY

static void usage(FILE *f) {
    fprintf(f, "minfer %s: local LLM inference for GGUF models\n\nusage: minfer COMMAND [ARGS]\n\ncommands:\n",
            MINFER_VERSION);
    for (size_t i = 0; commands[i].name; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n`minfer COMMAND --help` describes a command.\n");
}

/* A word that is no file and has no '/' or '.' is a command name (`minfer serve` before there is
 * one), not a model to open. */
static bool looks_like_command(const char *a) {
    struct stat st;
    return a[0] != '-' && !strpbrk(a, "/.") && stat(a, &st) != 0;
}

/* Whatever a command printed must have reached standard output: a failed write (a full disk,
 * `> /dev/full`) is an error, never a silent exit 0. */
static int finish_stdout(int rc) {
    if (!cli_stdout_ok() && rc == 0) { /* a command that failed has said why */
        cli_error("cannot write to standard output: %s", cli_stdout_error());
        return 1;
    }
    return rc;
}

int main(int argc, char **argv) {
    const char *log = getenv("MINFER_LOG");
    mf_log_level level;
    if (log && *log) {
        if (mf_log_level_from_name(log, &level) == MF_OK)
            mf_log_set_level(level);
        else
            cli_error("warning: MINFER_LOG: %s; keeping the default (warn)", mf_last_error());
    }
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        mf_context_params cp = mf_context_default_params();
        cli_context_env(&cp);
        printf("minfer %s\ncpu kernels: %s\ncpu: %s\n", MINFER_VERSION, mf_isa_kernels_name(cp.isa),
               mf_cpu_name()[0] ? mf_cpu_name() : "unknown");
        if (mf_cuda_built()) {
            int n = mf_cuda_device_count();
            printf("cuda: %d device%s%s%s\n", n, n == 1 ? "" : "s", n ? "" : ": ", n ? "" : mf_last_error());
            for (int i = 0; i < n; i++) {
                mf_cuda_device d;
                if (mf_cuda_device_info(i, &d) == MF_OK)
                    printf("  %d: %s, compute %d.%d, %.1f GiB, %d SMs\n", i, d.name, d.major, d.minor,
                           (double)d.total_mem / (1 << 30), d.multiprocessors);
            }
        } else {
            printf("cuda: not built (cmake -DMINFER_CUDA=ON)\n");
        }
        return 0;
    }
    int rc = -1;
    for (size_t i = 0; commands[i].name && rc < 0; i++)
        if (!strcmp(argv[1], commands[i].name)) rc = commands[i].fn(argc - 1, argv + 1);
    if (rc < 0 && looks_like_command(argv[1])) {
        cli_error("unknown command '%s' (`minfer help` lists the commands; to run a model, give the path of its "
                  "GGUF file)", argv[1]);
        return 2;
    }
    /* `minfer MODEL [PROMPT]` is `minfer run MODEL [PROMPT]` */
    if (rc < 0) rc = cmd_run(argc, argv);
    return finish_stdout(rc);
}
