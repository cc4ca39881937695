/* cli.h: the minfer program's commands and the small helpers they share. The program is a client
 * of the library's public API (minfer.h) and nothing else.
 * Every command is `int cmd_NAME(int argc, char **argv)` where argv[0] is the command name; it
 * returns the process exit code (0 ok, 1 failure, 2 usage error) and prints errors as one line. */
#ifndef MF_CLI_H
#define MF_CLI_H


#include "minfer.h"
#include "minfer/hub.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLI_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define CLI_MIN(a, b) ((a) < (b) ? (a) : (b))
#define CLI_MAX(a, b) ((a) > (b) ? (a) : (b))
#if defined(__GNUC__)
#define CLI_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define CLI_PRINTF(f, a)
#endif

/* The command table: X(name, function, one-line help). Add a line per command. */
#define MF_CLI_COMMANDS(X)                                                                         \
    X("run", cmd_run, "generate a reply to a prompt (also: minfer MODEL PROMPT)")                 \
    X("chat", cmd_chat, "a conversation: line editing, /commands, saved sessions (also: minfer MODEL)") \
    X("logits", cmd_logits, "write the logits of a list of token ids (float32)")                     \
    X("info", cmd_info, "describe a GGUF model: architecture, shapes, tokenizer, tensors")        \
    X("tokenize", cmd_tokenize, "show the token ids and pieces of a text")                         \
    X("template", cmd_template, "render a conversation (JSON) with the model's chat template")     \
    X("dump", cmd_dump, "dequantize a tensor to float32 (stats, or raw values with -o)")            \
    X("quantize", cmd_quantize, "convert an F32/F16/BF16 model to a quantized type (Q4_K_M, Q8_0, ...)") \
    X("serve", cmd_serve, "an OpenAI-compatible HTTP server (continuous batching, prompt cache)")          \
    X("bench", cmd_bench, "measure prompt and generation speed (llama-bench style: -p 512 -n 128 -t N)") \
    X("pull", cmd_pull, "download a model: hf:ORG/REPO[:QUANT] or ollama:NAME[:TAG] (also: download)") \
    X("download", cmd_pull, "the same as pull")                                                   \
    X("list", cmd_list, "the cached models (Hugging Face cache, Ollama's folder): name, source, type, size, path") \
    X("rm", cmd_rm, "remove a cached model and the blobs nothing else uses")                      \
    X("viz", cmd_viz, "the compute graph in the browser, live: Operators, Pipeline and Shape flow views") \

#define MF_CLI_DECLARE(name, fn, help) int fn(int argc, char **argv);
MF_CLI_COMMANDS(MF_CLI_DECLARE)
#undef MF_CLI_DECLARE

/* Print "minfer: <msg>\n" to stderr. */
void cli_error(const char *fmt, ...) CLI_PRINTF(1, 2);
/* Print the library's last error for a failed status: "minfer: <what>: <message>". */
void cli_error_status(mf_status s, const char *what);
/* Flush standard output and say whether everything written to it so far arrived (false after a
 * failed write: a full disk, a closed pipe); cli_stdout_error names the first failure. A command
 * that streams calls it as it goes and stops on false; main reports it and exits non-zero. */
bool cli_stdout_ok(void);
const char *cli_stdout_error(void);
/* Parse a whole decimal integer in [lo, hi]; on failure print an error naming flag and return false. */
bool cli_parse_int(const char *flag, const char *s, long long lo, long long hi, long long *out);
bool cli_parse_float(const char *flag, const char *s, double lo, double hi, double *out);
/* For option parsing: if argv[*i] equals flag, take the next argument as its value into *val.
 * Returns 1 if matched, 0 if not, -1 (after printing an error) if the value is missing. */
int cli_take_value(int argc, char **argv, int *i, const char *flag, const char **val);

/* The settings the library takes as parameters and the program reads from the environment:
 * MINFER_ISA (scalar, avx2, avx512, neon), MINFER_ORDER (fast), MINFER_TRACE (a JSON file of per-node
 * statistics), MINFER_DUMP_DIR (node values as raw f32, with MINFER_TRACE), MINFER_REPACK (0: as
 * --no-repack; cli_load_params). A bad value is reported and ignored. MINFER_LOG (error, warn, info, debug) is applied by main. */
void cli_context_env(mf_context_params *p);
/* Model load parameters from the flags (--no-mmap, --no-repack) and the environment: MINFER_REPACK=0,
 * or a MINFER_ISA or MINFER_ORDER under which the contexts will not run the best kernels, loads
 * without the kernels' packed copies (mf_model_load_params.no_repack: they would go unused). */
mf_model_load_params cli_load_params(bool no_mmap, bool no_repack);

/* A model reference (a path, a cached model's name, hf:ORG/REPO[:QUANT|:FILE], ollama:NAME[:TAG]) as
 * a local path, downloaded first when it is not cached, with progress on stderr (minfer/hub.h). The
 * path lives until the program exits. NULL after printing the error. */
const char *cli_model(const char *ref);
/* A hub handle with the environment's settings and the progress display (connections 0: the
 * default; quiet: errors only). NULL after printing the error. */
mf_hub *cli_hub_open(int connections, bool quiet);

#endif /* MF_CLI_H */
