/* jinja_lex.h: what the chat-template lexer and parser share: tokens, the parser state and the
 * error exit (a longjmp to jinja_parse, which owns the state). */
#ifndef MF_JINJA_LEX_H
#define MF_JINJA_LEX_H

#include "chat/jinja.h"

typedef enum { T_EOF, T_DATA, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STRING, T_INT, T_FLOAT, T_OP } ttype;

/* two-character operators get codes outside the ASCII range */
enum { OP_FLOORDIV = 256, OP_POW, OP_EQ, OP_NE, OP_LE, OP_GE };

typedef struct {
    uint8_t type;
    int op;
    int line;
    const char *p; /* T_DATA, T_NAME, T_STRING: text (T_STRING: unescaped) */
    size_t n;
    jv val;        /* T_INT, T_FLOAT */
} tok;

typedef struct {
    jarena *a;
    jmp_buf jb;
    jparse_result *res;
    const char *s;
    size_t n;
    tok *t;
    size_t nt, cap, i;
    int depth;
    int loops; /* for-loop bodies around the statement being parsed, up to the enclosing macro */
} P;


/* Record "line N: message" with status st and unwind to jinja_parse. */
_Noreturn void jinja_parse_fail(P *p, mf_status st, int line, const char *fmt, ...) MF_PRINTF(4, 5);
#define pfail jinja_parse_fail

/* Tokenise p->s[0..p->n) into p->t (whitespace control applied; comments dropped). */
void jinja_lex(P *p);

#endif /* MF_JINJA_LEX_H */
