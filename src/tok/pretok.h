/* pretok.h: pre-tokenizers: split text into the pieces that BPE encodes one by one, exactly as the
 * models' own regular expressions do (written by hand as leftmost-first backtracking would match,
 * in linear time). Pieces are contiguous and cover the text, so a splitter reports piece ends. */
#ifndef MF_TOK_PRETOK_H
#define MF_TOK_PRETOK_H

#include "core/core.h"

typedef enum mf_pretok_kind {
    /* Qwen2/2.5/3, DeepSeek-R1-Distill-Qwen:
     * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
    MF_PRETOK_QWEN2,
    /* Llama 3: the same with \p{N}{1,3}. */
    MF_PRETOK_LLAMA3,
    /* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    MF_PRETOK_GPT2,
    /* SmolLM: every \p{N} is its own piece, the text between goes through the GPT-2 pattern. */
    MF_PRETOK_SMOLLM,
} mf_pretok_kind;

/* Scratch arrays for one splitter call (reused across calls by one thread; free with _free). */
typedef struct mf_pretok_buf {
    uint32_t *cp;   /* [n] code points (MF_UC_INVALID for a byte that is not valid UTF-8) */
    uint8_t *fl;    /* [n] MF_UC_* class flags */
    uint32_t *off;  /* [n + 1] byte offset of each character, off[n] = text length */
    size_t cap;
} mf_pretok_buf;

void mf_pretok_buf_free(mf_pretok_buf *b);

/* Called once per piece, in order; a nonzero status stops the split and is returned. */
typedef mf_status (*mf_pretok_piece_fn)(void *ctx, const uint8_t *piece, size_t len);

/* Split s[0..n) (n < 4 GiB) and call fn for each piece. */
mf_status mf_pretok_split(mf_pretok_kind kind, const uint8_t *s, size_t n, mf_pretok_buf *buf,
                          mf_pretok_piece_fn fn, void *ctx);

#endif /* MF_TOK_PRETOK_H */
