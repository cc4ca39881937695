/* jinja.h: internals of minfer's Jinja interpreter for chat templates (lexer, parser, values,
 * evaluator, built-in filters/tests/methods). Semantics follow Jinja2 as Hugging Face configures it
 * for chat templates: trim_blocks, lstrip_blocks, loopcontrols, immutable sandbox, Python-style
 * printing of values. Public entry points are in chat.h.
 *
 * Memory: every value, string and node lives in an arena (one per compiled template for the AST and
 * constants, one per render for everything made while rendering). Errors unwind with longjmp to the
 * entry point, which frees the arena wholesale, so no code in between needs cleanup paths. */
#ifndef MF_JINJA_H
#define MF_JINJA_H

#include "chat/jinja_names.h"
#include "core/core.h"

#include "core/arena.h"

#include <setjmp.h>

/* ---- arena ---- */
/* The core arena (mem.limit: 0 = none) with a failure that unwinds instead of returning NULL. */
typedef struct jarena {
    mf_arena mem;
    jmp_buf *on_fail;  /* where to unwind when the limit or malloc fails (set by the owner) */
    char *errbuf;      /* owner's message buffer for that failure */
    size_t errcap;
    mf_status fail_status;
} jarena;

_Noreturn void jarena_fail(jarena *a, mf_status s, const char *fmt, ...) MF_PRINTF(3, 4);

void *jarena_alloc(jarena *a, size_t n);
void jarena_free(jarena *a);
char *jarena_strndup(jarena *a, const char *s, size_t n);

/* ---- values ---- */
typedef enum {
    JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT,
    JV_NS,     /* namespace(): the only mutable object (attribute assignment) */
    JV_MACRO,  /* a {% macro %} or the caller of a {% call %} block */
    JV_FUNC,   /* a global function: range, namespace, dict, raise_exception, strftime_now, ... */
    JV_METHOD, /* obj.name of a built-in type, bound for a later call */
    JV_LOOP,   /* the `loop` variable of a for loop */
} jv_type;

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jnode jnode;
typedef struct jloop jloop;
typedef struct jmacro jmacro;
typedef struct jmethod jmethod;

#define JV_TUPLE 1u /* flag on JV_LIST: printed as (a, b) */
#define JV_GEN 2u   /* flag on JV_LIST: the lazy result of select/map/...: always true, no len() */

typedef struct jv {
    uint8_t type;
    uint8_t flags;
    union {
        bool b;
        int64_t i;
        double f;
        /* JV_STR: UTF-8, not NUL-terminated. JV_UNDEF: p names what is missing and n holds the
         * type of the object it was looked up on (flags say attribute or element), for messages */
        struct { const char *p; size_t n; } s;
        jlist *l;
        jdict *d;       /* JV_DICT and JV_NS */
        jmacro *m;
        int fn;
        jmethod *meth;
        jloop *loop;
    };
} jv;

struct jlist { size_t n, cap; jv *v; };
struct jdict { size_t n, cap; jv *k, *v; }; /* insertion order; linear lookup (chat dicts are small) */
struct jmethod { jv self; const char *name; };

/* ---- AST ---- */
typedef enum {
    /* expressions */
    JN_CONST, JN_NAME, JN_GETATTR, JN_GETITEM, JN_SLICE, JN_CALL, JN_FILTER, JN_TEST,
    JN_NEG, JN_POS, JN_NOT, JN_BINOP, JN_CONCAT, JN_COMPARE, JN_AND, JN_OR, JN_COND,
    JN_LIST, JN_TUPLE, JN_DICT, JN_NSREF,
    /* statements */
    JN_TEXT, JN_PRINT, JN_IF, JN_FOR, JN_SET, JN_SETBLOCK, JN_MACRO, JN_CALLBLOCK, JN_FILTERBLOCK,
    JN_WITH, JN_BREAK, JN_CONTINUE,
} jnode_kind;

/* Binary and comparison operators (JN_BINOP op, JN_COMPARE ops[]). */
typedef enum {
    JOP_ADD, JOP_SUB, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW,
    JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE, JOP_IN, JOP_NOTIN,
} jop;

typedef struct jnodes { jnode **v; int n; } jnodes;

/* One node type for everything; which fields mean what, per kind:
 *   CONST val | NAME name | GETATTR a.name | GETITEM a[b] | SLICE a[b:c:d] (NULL = omitted)
 *   CALL a(args, kw, *c, **d) | FILTER a|name(args, kw, *c, **d) (a NULL: a block's body)
 *   TEST a is [not: op=1] name(args, kw, *c, **d) | NEG/POS/NOT a | BINOP a op b | CONCAT args
 *   COMPARE a (ops[i] args[i])... | AND/OR a b | COND a if b else c | LIST/TUPLE args
 *   DICT keys args, values kw | NSREF name.attr (attr in name2)
 *   TEXT val | PRINT a | IF a then args else kw | FOR targets in b if c: args else kw (d: targets)
 *   SET d = a | SETBLOCK d, filter chain a, body args | MACRO name(params kw_names, defaults kw) args
 *   CALLBLOCK a = call, params/defaults like MACRO, body args | FILTERBLOCK chain a, body args
 *   WITH names kw_names = values kw, body args */
struct jnode {
    uint8_t kind;
    uint8_t op;
    int line;
    const char *name, *name2;
    jnode *a, *b, *c, *d;
    jnodes args, kw;
    const char **kw_names;
    uint8_t *ops;
    jv val;
};

/* ---- lexer / parser ---- */
typedef struct jparse_result {
    jnodes body;
    char err[512];
    mf_status status;
} jparse_result;

/* Parse a template into nodes allocated from arena a. Returns MF_OK or an error with res->err set. */
mf_status jinja_parse(jarena *a, const char *src, size_t len, jparse_result *res);

/* ---- evaluation context ---- */
typedef struct jscope jscope;
struct jscope {
    jscope *parent;
    jdict vars;
    bool captured; /* a macro defined here keeps it alive, so a loop may not recycle it */
};

struct jmacro {
    const jnode *def;  /* JN_MACRO or JN_CALLBLOCK */
    jscope *closure;
    jv caller;         /* for a macro called from a call block: the block; else undefined */
};

struct jloop {
    jlist *items;
    size_t index0;
    int depth;
};

typedef struct jctx {
    jarena arena;
    jmp_buf fail;
    char err[512];
    mf_status status;
    char *out;  /* output buffer (malloc'd; grown with realloc) */
    size_t out_len, out_cap, max_output;
    int depth, max_depth;
    uint64_t steps, max_steps;
    int64_t now; /* strftime_now time, seconds since the epoch; 0 = current local time */
    int line;    /* line of the node being evaluated, for messages */
} jctx;

_Noreturn void jinja_error(jctx *c, mf_status s, const char *fmt, ...) MF_PRINTF(3, 4);
void jinja_step(jctx *c);

/* value helpers (jinja_value.c) */
static inline jv jv_undef(const char *hint) { jv v = {.type = JV_UNDEF}; v.s.p = hint; v.s.n = 0; return v; }
static inline jv jv_none(void) { jv v = {.type = JV_NONE}; return v; }
static inline jv jv_bool(bool b) { jv v = {.type = JV_BOOL}; v.b = b; return v; }
static inline jv jv_int(int64_t i) { jv v = {.type = JV_INT}; v.i = i; return v; }
static inline jv jv_float(double f) { jv v = {.type = JV_FLOAT}; v.f = f; return v; }
static inline jv jv_strn(const char *p, size_t n) { jv v = {.type = JV_STR}; v.s.p = p ? p : ""; v.s.n = n; return v; }
static inline jv jv_cstr(const char *p) { return jv_strn(p, strlen(p)); }
jv jv_list_new(jctx *c, size_t cap);
void jv_list_push(jctx *c, jv list, jv item);
jv jv_dict_new(jctx *c, size_t cap);
void jv_dict_set(jctx *c, jdict *d, jv key, jv val);
jv *jv_dict_get(const jdict *d, jv key);
jv *jv_dict_get_str(const jdict *d, const char *key, size_t n);

bool jv_truthy(jv v);
bool jv_equal(jv a, jv b);
int jv_compare(jctx *c, jv a, jv b); /* <0, 0, >0; error for unorderable types */
const char *jv_type_name(jv v);

/* Growable byte buffer in the render arena. */
typedef struct jbuf { char *p; size_t n, cap; jarena *a; size_t max; } jbuf;
static inline jbuf jbuf_make(jctx *c) { jbuf b = {NULL, 0, 0, &c->arena, c->max_output}; return b; }
void jbuf_put(jbuf *b, const char *s, size_t n);
void jbuf_putc(jbuf *b, char ch);
void jbuf_printf(jbuf *b, const char *fmt, ...) MF_PRINTF(2, 3);
jv jbuf_value(jbuf *b);

void jv_write_str(jctx *c, jbuf *b, jv v);  /* Python str() */
void jv_write_repr(jctx *c, jbuf *b, jv v); /* Python repr() */
jv jv_to_str(jctx *c, jv v);
void jv_write_json(jctx *c, jbuf *b, jv v, int indent, const char *item_sep, const char *key_sep,
                   bool ensure_ascii, bool sort_keys, int level);
void jv_write_float(jbuf *b, double f); /* Python float repr */

/* UTF-8 helpers on strings. */
size_t ju_len(const char *p, size_t n);                      /* code points */
void ju_trim_partial(char *s); /* cut a UTF-8 sequence left incomplete by truncation at the end */
size_t ju_offset(const char *p, size_t n, size_t cp_index);  /* byte offset of code point i (n if past) */
size_t ju_decode(const char *p, size_t n, uint32_t *cp);     /* bytes used (1 on invalid) */
void ju_encode(jbuf *b, uint32_t cp);
bool ju_isspace(uint32_t cp);
size_t ju_space_prefix(const char *p, size_t n);  /* bytes of leading Python whitespace */
size_t ju_space_suffix(const char *p, size_t n);  /* bytes of trailing Python whitespace */
uint32_t ju_upper(uint32_t cp); /* simple (one code point) mappings */
uint32_t ju_lower(uint32_t cp);
/* Append Python's full mapping of cp: kind 'u' upper, 'l' lower, 't' title ("ß" -> "SS"/"Ss"). */
void ju_put_case(jbuf *b, uint32_t cp, char kind);
bool ju_case_changes(uint32_t cp, char kind); /* whether the 'u' or 'l' mapping changes cp */
/* Whether the capital sigma at s[at, at+len) lowers to final sigma (U+03C2) rather than U+03C3. */
bool ju_sigma_is_final(const char *s, size_t n, size_t at, size_t len);
bool ju_iscased(uint32_t cp);  /* has case: what str.title() looks at */
bool ju_isalpha(uint32_t cp);  /* str.isalpha */
bool ju_isnumeric(uint32_t cp); /* str.isnumeric */
bool ju_case_ignorable(uint32_t cp); /* apostrophes, combining marks...: see through for final sigma */

/* JSON (jansson) -> value, for the render context. */
struct json_t;
jv jv_from_json(jctx *c, const struct json_t *j, int depth);

/* ---- evaluator and built-ins ---- */
jv jinja_eval(jctx *c, jscope *s, const jnode *n);
/* Run a template body; errors longjmp to c->fail (the caller's setjmp). */
void jinja_exec(jctx *c, jscope *root, jnodes body);
jscope *jscope_new(jctx *c, jscope *parent);
jv jinja_format_percent(jctx *c, jv fmt, jv args); /* Python's "fmt" % args */
jv jinja_call_value(jctx *c, jscope *s, jv fn, jv *args, int nargs, const char **kwn, jv *kwv, int nkw);
void jscope_set(jctx *c, jscope *s, const char *name, jv v);
jv jscope_get(jscope *s, const char *name);
jv jinja_getattr(jctx *c, jv obj, const char *name, size_t n);
jv jinja_getitem(jctx *c, jv obj, jv key);
jv jinja_iter_list(jctx *c, jv v); /* list of items a for loop sees: list, dict keys, string chars */

/* Built-ins look-up (names checked at parse time). */
typedef jv (*jfilter_fn)(jctx *c, jscope *s, jv v, jv *args, int nargs, const char **kwn, jv *kwv, int nkw);
typedef bool (*jtest_fn)(jctx *c, jv v, jv *args, int nargs);
jfilter_fn jinja_find_filter(const char *name);
jtest_fn jinja_find_test(const char *name);
int jinja_find_func(const char *name); /* global function id, -1 if none */
jv jinja_call_func(jctx *c, int fn, jv *args, int nargs, const char **kwn, jv *kwv, int nkw);
jv jinja_call_method(jctx *c, jv self, const char *name, jv *args, int nargs, const char **kwn, jv *kwv, int nkw);
bool jinja_has_method(jv self, const char *name, size_t n);
/* String operations shared by filters and methods (jinja_filters.c): upper/lower map code points,
 * strip takes Python whitespace or a set of characters (chars not a string), replace count < 0 = all. */
jv jinja_str_upper(jctx *c, jv str);
jv jinja_str_lower(jctx *c, jv str);
jv jinja_str_strip(jctx *c, jv str, jv chars, bool left, bool right);
jv jinja_str_replace(jctx *c, jv str, jv old, jv new_, int64_t count);
jv jinja_apply_filter(jctx *c, jscope *s, const char *name, jv v, jv *args, int nargs);
bool jinja_apply_test(jctx *c, const char *name, jv v, jv *args, int nargs);

#endif /* MF_JINJA_H */
