/* main.c: the minfer program: dispatches `minfer COMMAND ...` to the command table in cli.h. */
#include "cli/cli.h"
#include "cuda/cuda.h"
#include "simd/simd.h"

#include <stdlib.h>
#include <string.h>

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

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("minfer %s\ncpu kernels: %s\n", MINFER_VERSION, mf_simd_isa_name());
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
    for (size_t i = 0; commands[i].name; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    /* `minfer MODEL [PROMPT]` is `minfer run MODEL [PROMPT]` once the run command exists. */
    for (size_t i = 0; commands[i].name; i++)
        if (!strcmp(commands[i].name, "run")) return commands[i].fn(argc, argv);
    cli_error("unknown command '%s' (see minfer --help)", argv[1]);
    return 2;
}
