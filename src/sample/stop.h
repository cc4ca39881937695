/* stop.h: deciding when generation ends and what text may be shown: the stop-string matcher over
 * the decoded byte stream, the reasons a generation stops, and the well-known end-of-generation
 * token texts.
 *
 * The matcher sees the decoded bytes as they come (any split: a stop string may span several
 * tokens, a token may end inside a UTF-8 character). It returns only valid UTF-8 that can no
 * longer be part of a stop string; it holds back the rest until the next bytes decide. A byte
 * sequence that can never be valid UTF-8 becomes U+FFFD. So a stop string never appears in the
 * output, and neither does half a character. It may sit behind the tokenizer's streaming decoder or take raw token bytes; both work.
 *
 * Generation loop (one matcher per sequence):
 *   mf_stop_feed(m, piece, len, &out, &n, &hit);  print out[0..n);
 *   if (hit >= 0) reason = MF_STOP_STRING -> stop;
 *   on an end-of-generation token or the -n limit: mf_stop_flush(m, &out, &n), print, stop.
 */
#ifndef MF_STOP_H
#define MF_STOP_H

#include "minfer.h"

#include <stdbool.h>
#include <stddef.h>

typedef enum mf_stop_reason {
    MF_STOP_NONE,   /* still generating */
    MF_STOP_EOG,    /* an end-of-generation token (EOS, EOT, <|im_end|>, ...) was sampled */
    MF_STOP_STRING, /* a --stop string appeared in the text */
    MF_STOP_LENGTH, /* the -n limit (or the context) was reached */
} mf_stop_reason;

/* "none", "eog", "stop", "length": short names for logs and the server's finish_reason mapping. */
const char *mf_stop_reason_str(mf_stop_reason r);

typedef struct mf_stop mf_stop;

/* A matcher for n stop strings (copied). n may be 0: then it only holds back incomplete UTF-8.
 * MF_ERR_ARG for a NULL or empty string. */
mf_status mf_stop_create(const char *const *strings, size_t n, mf_stop **out);
void mf_stop_free(mf_stop *m);
/* Forget held bytes and a past match, for a new generation with the same strings. */
void mf_stop_reset(mf_stop *m);

/* Take the next decoded bytes. *out / *out_len: the bytes now safe to show, valid until the next
 * call on m. *matched: the index of the stop string found, or -1: the first one to be completed in
 * the text (on a tie the one starting earliest, then the first given), so the result does not
 * depend on how the text was split. After a match the output ends just before the stop string, the
 * rest is dropped, and later feeds return nothing. MF_ERR_NOMEM only. */
mf_status mf_stop_feed(mf_stop *m, const char *bytes, size_t n, const char **out, size_t *out_len, int *matched);

/* Generation ended another way: return everything held back; an incomplete UTF-8 character at the
 * end becomes U+FFFD. MF_ERR_NOMEM only. */
mf_status mf_stop_flush(mf_stop *m, const char **out, size_t *out_len);

/* Whether a special token's text is one of the usual end-of-generation markers ("<|im_end|>",
 * "<|endoftext|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", ...): with the EOS and EOT ids from the
 * GGUF metadata this gives the set of tokens that end a generation. Only meaningful for control
 * tokens; a normal token that happens to spell such text should not stop generation. */
bool mf_stop_is_eog_text(const char *text, size_t len);

#endif /* MF_STOP_H */
