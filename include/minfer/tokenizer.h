/* minfer/tokenizer.h: the byte-level BPE tokenizer of GGUF models (tokenizer.ggml.model = "gpt2"):
 * text to token ids and back, special tokens, and a streaming decoder for generation. Part of the
 * public API (include minfer.h).
 *
 * Encoding follows the model's Hugging Face tokenizer: added tokens (control and user-defined) are
 * cut out of the raw text first (leftmost, longest match first); the text between them is NFC
 * normalized when the model's tokenizer normalizes (qwen2, deepseek-r1-qwen), split by the
 * pre-tokenizer named by tokenizer.ggml.pre, and each piece is BPE-merged by merge rank.
 *
 * Ownership and threads: mf_tokenizer_load copies what it needs, so the mf_gguf may be closed after
 * it. A loaded tokenizer is read-only and may be used by several threads at once; a mf_tok_stream
 * belongs to one thread. Token ids are int32_t; MF_TOKEN_NULL (-1) means "none". */
#ifndef MINFER_TOKENIZER_H
#define MINFER_TOKENIZER_H

#include "minfer.h"
#include "minfer/gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MF_TOKEN_NULL (-1)

/* Token types as stored in tokenizer.ggml.token_type. */
typedef enum mf_token_type {
    MF_TOKEN_UNDEFINED = 0,
    MF_TOKEN_NORMAL = 1,
    MF_TOKEN_UNKNOWN = 2,
    MF_TOKEN_CONTROL = 3,
    MF_TOKEN_USER_DEFINED = 4,
    MF_TOKEN_UNUSED = 5,
    MF_TOKEN_BYTE = 6,
} mf_token_type;

/* Encode flags. */
enum {
    /* Add BOS and/or EOS as the model asks (tokenizer.ggml.add_bos_token / add_eos_token). */
    MF_TOK_ADD_SPECIAL = 1u << 0,
    /* Recognise control-token text (<|im_start|>, <|endoftext|>, ...) in the input. Without it such
     * text is encoded as plain text, so user text cannot inject control tokens. User-defined added
     * tokens (<think>, <tool_call>, ...) are always recognised, as Hugging Face and llama.cpp do. */
    MF_TOK_PARSE_SPECIAL = 1u << 1,
};

/* Decode flags. */
enum {
    /* Show control (and unused) tokens as their text; without it they decode to nothing. */
    MF_TOK_DECODE_SPECIAL = 1u << 0,
};

typedef struct mf_tokenizer mf_tokenizer;

/* The tokenizer of a loaded model, built on first use (thread-safe) and owned by the model; NULL
 * when the model's vocabulary cannot be loaded (the reason is in mf_last_error()). */
const mf_tokenizer *mf_model_tokenizer(const mf_model *m);

/* Load from GGUF metadata. Fails with MF_ERR_UNSUPPORTED naming the value for a tokenizer model
 * other than "gpt2" or an unknown tokenizer.ggml.pre, MF_ERR_FORMAT for malformed arrays, ids out
 * of range, duplicate tokens, or a vocabulary that lacks most single-byte tokens (a few missing
 * bytes, as in SmolLM2, are allowed: such bytes are skipped in input). */
mf_status mf_tokenizer_load(const mf_gguf *g, mf_tokenizer **out);
void mf_tokenizer_free(mf_tokenizer *tok);

/* Encode text[0..len) (any bytes; invalid UTF-8 is encoded byte by byte) into a new array *ids
 * (caller frees with free(); NULL when *n_ids is 0). */
mf_status mf_tokenizer_encode(const mf_tokenizer *tok, const char *text, size_t len, unsigned flags,
                              int32_t **ids, size_t *n_ids);
/* The same into a caller buffer of cap ids. *n_ids is always the full count; if it exceeds cap the
 * call returns MF_ERR_RANGE and the first cap ids are written. */
mf_status mf_tokenizer_encode_into(const mf_tokenizer *tok, const char *text, size_t len, unsigned flags,
                                   int32_t *ids, size_t cap, size_t *n_ids);

int32_t mf_tokenizer_n_vocab(const mf_tokenizer *tok);
/* The pre-tokenizer name as read (e.g. "qwen2"). */
const char *mf_tokenizer_pre(const mf_tokenizer *tok);
/* Token text as stored in the vocabulary (byte-level characters for normal tokens, e.g. "Ġthe"),
 * NUL-terminated; NULL for an id out of range. */
const char *mf_tokenizer_piece(const mf_tokenizer *tok, int32_t id);
/* Id of a token by its stored text, or MF_TOKEN_NULL. */
int32_t mf_tokenizer_find(const mf_tokenizer *tok, const char *piece, size_t len);
mf_token_type mf_tokenizer_token_type(const mf_tokenizer *tok, int32_t id); /* UNDEFINED if out of range */
bool mf_tokenizer_is_control(const mf_tokenizer *tok, int32_t id);
/* End of generation: EOS, EOT, EOM and the tokens llama.cpp recognises by text (<|im_end|>,
 * <|endoftext|>, <|eot_id|>, <|end_of_text|>, FIM pad/repo/file-separator tokens, ...). */
bool mf_tokenizer_is_eog(const mf_tokenizer *tok, int32_t id);
/* All end-of-generation ids, ascending; *n receives the count. */
const int32_t *mf_tokenizer_eog_ids(const mf_tokenizer *tok, size_t *n);
int32_t mf_tokenizer_bos(const mf_tokenizer *tok);
int32_t mf_tokenizer_eos(const mf_tokenizer *tok);
int32_t mf_tokenizer_eot(const mf_tokenizer *tok);
int32_t mf_tokenizer_pad(const mf_tokenizer *tok);
bool mf_tokenizer_add_bos(const mf_tokenizer *tok);
bool mf_tokenizer_add_eos(const mf_tokenizer *tok);

/* The bytes a token stands for (byte-level decoded; an added token's text; nothing for a control
 * token unless MF_TOK_DECODE_SPECIAL). *bytes points into the tokenizer, valid while it lives; it
 * may end inside a UTF-8 character. MF_ERR_RANGE for an id out of range. */
mf_status mf_tokenizer_token_to_bytes(const mf_tokenizer *tok, int32_t id, unsigned flags,
                                      const uint8_t **bytes, size_t *len);
/* Decode ids into a new NUL-terminated buffer *out (caller frees), the exact bytes concatenated
 * (not checked for UTF-8). */
mf_status mf_tokenizer_decode(const mf_tokenizer *tok, const int32_t *ids, size_t n, unsigned flags,
                              char **out, size_t *out_len);

/* The length of the longest prefix of s[0..n) that is valid UTF-8 (n when all of it is; overlong
 * forms and surrogates are invalid), so a program can refuse text that is not and name the byte. */
size_t mf_utf8_valid_len(const char *s, size_t n);

/* Streaming decoder for generated tokens. push() returns the text that is now safe to show: only
 * complete UTF-8 characters (a sequence that can never complete becomes U+FFFD), and, when stop
 * strings are set, never text that could be the start of a stop string (the matcher of
 * sample/stop.h: the first stop string to be completed wins). When a stop string
 * appears, the text before it is returned, mf_tok_stream_stopped() gives its index, and later
 * pushes return nothing. The returned pointer is valid until the next call on the stream. Pushing
 * allocates nothing once the stream's buffers have grown to the longest token and stop string. */
typedef struct mf_tok_stream mf_tok_stream;

mf_status mf_tok_stream_create(const mf_tokenizer *tok, unsigned decode_flags, mf_tok_stream **out);
void mf_tok_stream_free(mf_tok_stream *s);
/* Forget pending text and the stop state (keeps the stop strings). */
void mf_tok_stream_reset(mf_tok_stream *s);
/* Set the stop strings (copied; n = 0 clears them). Empty strings are ignored. */
mf_status mf_tok_stream_set_stops(mf_tok_stream *s, const char *const *stops, size_t n);
mf_status mf_tok_stream_push(mf_tok_stream *s, int32_t id, const char **text, size_t *len);
/* End of generation: return everything held back (an incomplete character as U+FFFD). */
mf_status mf_tok_stream_flush(mf_tok_stream *s, const char **text, size_t *len);
/* Index of the stop string that ended the stream, or -1. */
int mf_tok_stream_stopped(const mf_tok_stream *s);

#ifdef __cplusplus
}
#endif
#endif /* MINFER_TOKENIZER_H */
