/* tokenizer.h: the tokenizer's API is public (include/minfer/tokenizer.h); this header is what the
 * library's own files include. */
#ifndef MF_TOK_TOKENIZER_H
#define MF_TOK_TOKENIZER_H

#include "core/core.h"
#include "gguf/gguf.h"
#include "minfer/tokenizer.h"

#endif /* MF_TOK_TOKENIZER_H */
