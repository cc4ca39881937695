/* jinja_parse.c: recursive-descent parser for the Jinja language of chat templates, from the
 * tokens of jinja_lex.c to the nodes of jinja.h. The grammar and operator precedence follow
 * Jinja2's parser: or < and < not < comparisons < + - < ~ < * / // % < ** < unary - + < filters. */
#include "chat/jinja_lex.h"

#include <stdio.h>
#include <stdlib.h>

#define MAX_PARSE_DEPTH 200

void jinja_parse_fail(P *p, mf_status st, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = snprintf(p->res->err, sizeof p->res->err, "line %d: ", line);
    vsnprintf(p->res->err + k, sizeof p->res->err - (size_t)k, fmt, ap);
    va_end(ap);
    ju_trim_partial(p->res->err);
    p->res->status = st;
    longjmp(p->jb, 1);
}

/* ---- parser ---- */
static jnode *mk(P *p, jnode_kind kind, int line) {
    jnode *n = jarena_alloc(p->a, sizeof *n);
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = line;
    return n;
}

typedef struct { jnode **v; int n, cap; const char **names; } nvec;

static void nv_push(P *p, nvec *v, jnode *x, const char *name) {
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 4;
        jnode **nv = jarena_alloc(p->a, (size_t)cap * sizeof *nv);
        const char **nn = jarena_alloc(p->a, (size_t)cap * sizeof *nn);
        if (v->n) {
            memcpy(nv, v->v, (size_t)v->n * sizeof *nv);
            memcpy(nn, v->names, (size_t)v->n * sizeof *nn);
        }
        v->v = nv;
        v->names = nn;
        v->cap = cap;
    }
    v->names[v->n] = name;
    v->v[v->n++] = x;
}

static jnodes nv_done(nvec *v) { return (jnodes){v->v, v->n}; }

static tok *cur(P *p) { return &p->t[p->i]; }
static tok *look(P *p) { return &p->t[p->i + 1 < p->nt ? p->i + 1 : p->i]; }
static void adv(P *p) { if (p->i + 1 < p->nt) p->i++; }
static bool is_op(P *p, int op) { return cur(p)->type == T_OP && cur(p)->op == op; }
static bool is_name(P *p, const char *name) { return cur(p)->type == T_NAME && !strcmp(cur(p)->p, name); }
static bool skip_op(P *p, int op) { if (is_op(p, op)) { adv(p); return true; } return false; }
static bool skip_name(P *p, const char *name) { if (is_name(p, name)) { adv(p); return true; } return false; }

static const char *describe(tok *t) {
    switch (t->type) {
    case T_EOF: return "end of template";
    case T_DATA: return "template text";
    case T_VAR_BEGIN: return "'{{'";
    case T_VAR_END: return "'}}'";
    case T_BLOCK_BEGIN: return "'{%'";
    case T_BLOCK_END: return "'%}'";
    case T_NAME: return t->p;
    case T_STRING: return "string literal";
    case T_INT: case T_FLOAT: return "number";
    default: return "operator";
    }
}

static void expect_op(P *p, int op) {
    if (!skip_op(p, op)) pfail(p, MF_ERR_FORMAT, cur(p)->line, "expected '%c', got %s", op, describe(cur(p)));
}

static void expect_type(P *p, ttype type, const char *what) {
    if (cur(p)->type != type) pfail(p, MF_ERR_FORMAT, cur(p)->line, "expected %s, got %s", what, describe(cur(p)));
    adv(p);
}

static const char *expect_name(P *p) {
    if (cur(p)->type != T_NAME) pfail(p, MF_ERR_FORMAT, cur(p)->line, "expected a name, got %s", describe(cur(p)));
    const char *s = cur(p)->p;
    adv(p);
    return s;
}

static jnode *parse_expr(P *p, bool with_cond);
static jnode *parse_tuple(P *p, bool simplified, bool with_cond, const char *extra_end, bool explicit_parens);
static jnode *parse_unary(P *p, bool with_filter);
static jnode *parse_primary(P *p, bool with_ns);
static jnode *parse_postfix(P *p, jnode *n);

static void enter(P *p) {
    if (++p->depth > MAX_PARSE_DEPTH) pfail(p, MF_ERR_RANGE, cur(p)->line, "expression nested deeper than %d levels", MAX_PARSE_DEPTH);
}

static void parse_call_args(P *p, jnode *n) {
    expect_op(p, '(');
    nvec args = {0}, kw = {0};
    bool need_comma = false;
    while (!is_op(p, ')')) {
        if (need_comma) {
            expect_op(p, ',');
            if (is_op(p, ')')) break;
        }
        if (is_op(p, '*') || is_op(p, OP_POW)) { /* f(*list, **dict): spread at call time */
            bool star = is_op(p, '*');
            adv(p);
            if (star ? n->c || n->d : n->d != NULL) pfail(p, MF_ERR_FORMAT, cur(p)->line, "invalid syntax for function call expression");
            if (star) n->c = parse_expr(p, true);
            else n->d = parse_expr(p, true);
            need_comma = true;
            continue;
        }
        if (cur(p)->type == T_NAME && look(p)->type == T_OP && look(p)->op == '=') {
            if (n->d) pfail(p, MF_ERR_FORMAT, cur(p)->line, "keyword argument after **kwargs");
            const char *name = cur(p)->p;
            adv(p), adv(p);
            nv_push(p, &kw, parse_expr(p, true), name);
        } else {
            if (kw.n || n->c || n->d) pfail(p, MF_ERR_FORMAT, cur(p)->line, "positional argument follows keyword or * arguments");
            nv_push(p, &args, parse_expr(p, true), NULL);
        }
        need_comma = true;
    }
    expect_op(p, ')');
    n->args = nv_done(&args);
    n->kw = nv_done(&kw);
    n->kw_names = kw.names;
}

static const char *dotted_name(P *p) {
    const char *name = expect_name(p);
    while (is_op(p, '.')) pfail(p, MF_ERR_UNSUPPORTED, cur(p)->line, "dotted filter or test names are not supported");
    return name;
}

static jnode *parse_filter(P *p, jnode *n, bool start_inline) {
    while (is_op(p, '|') || start_inline) {
        if (!start_inline) adv(p);
        start_inline = false;
        int line = cur(p)->line;
        const char *name = dotted_name(p);
        if (!jinja_find_filter(name)) pfail(p, MF_ERR_UNSUPPORTED, line, "unknown filter '%s'", name);
        jnode *f = mk(p, JN_FILTER, line);
        f->a = n;
        f->name = name;
        if (is_op(p, '(')) parse_call_args(p, f);
        n = f;
    }
    return n;
}

static jnode *parse_test(P *p, jnode *n) {
    int line = cur(p)->line;
    adv(p); /* is */
    bool neg = skip_name(p, "not");
    const char *name = dotted_name(p);
    if (!jinja_find_test(name)) pfail(p, MF_ERR_UNSUPPORTED, line, "unknown test '%s'", name);
    jnode *t = mk(p, JN_TEST, line);
    t->a = n;
    t->name = name;
    t->op = neg;
    tok *c = cur(p);
    if (is_op(p, '(')) parse_call_args(p, t);
    else if ((c->type == T_NAME || c->type == T_STRING || c->type == T_INT || c->type == T_FLOAT ||
              (c->type == T_OP && (c->op == '[' || c->op == '{'))) &&
             !is_name(p, "else") && !is_name(p, "or") && !is_name(p, "and")) {
        if (is_name(p, "is")) pfail(p, MF_ERR_FORMAT, c->line, "cannot chain multiple tests with 'is'");
        nvec args = {0};
        nv_push(p, &args, parse_postfix(p, parse_primary(p, false)), NULL);
        t->args = nv_done(&args);
    }
    return t;
}

static jnode *parse_subscribed(P *p) {
    int line = cur(p)->line;
    jnode *parts[3] = {0};
    if (is_op(p, ':')) adv(p);
    else {
        jnode *e = parse_expr(p, true);
        if (!is_op(p, ':')) return e;
        adv(p);
        parts[0] = e;
    }
    if (!is_op(p, ':') && !is_op(p, ']') && !is_op(p, ',')) parts[1] = parse_expr(p, true);
    if (skip_op(p, ':') && !is_op(p, ']') && !is_op(p, ',')) parts[2] = parse_expr(p, true);
    jnode *s = mk(p, JN_SLICE, line);
    s->b = parts[0], s->c = parts[1], s->d = parts[2];
    return s;
}

static jnode *parse_postfix(P *p, jnode *n) {
    for (;;) {
        int line = cur(p)->line;
        if (is_op(p, '.')) {
            adv(p);
            if (cur(p)->type == T_NAME) {
                jnode *g = mk(p, JN_GETATTR, line);
                g->a = n;
                g->name = expect_name(p);
                n = g;
            } else if (cur(p)->type == T_INT) {
                jnode *g = mk(p, JN_GETITEM, line), *k = mk(p, JN_CONST, line);
                k->val = cur(p)->val;
                adv(p);
                g->a = n, g->b = k;
                n = g;
            } else pfail(p, MF_ERR_FORMAT, line, "expected a name or number after '.'");
        } else if (is_op(p, '[')) {
            adv(p);
            nvec items = {0};
            while (!is_op(p, ']')) {
                if (items.n) expect_op(p, ',');
                nv_push(p, &items, parse_subscribed(p), NULL);
            }
            expect_op(p, ']');
            if (items.n == 0) pfail(p, MF_ERR_FORMAT, line, "empty subscript");
            for (int k = 0; items.n > 1 && k < items.n; k++)
                if (items.v[k]->kind == JN_SLICE) pfail(p, MF_ERR_UNSUPPORTED, line, "slices inside a tuple subscript ([a:b, c]) are not supported");
            jnode *g = mk(p, JN_GETITEM, line);
            g->a = n;
            if (items.n == 1 && items.v[0]->kind == JN_SLICE) {
                g = items.v[0];
                g->a = n;
            } else if (items.n == 1) g->b = items.v[0];
            else {
                jnode *t = mk(p, JN_TUPLE, line);
                t->args = nv_done(&items);
                g->b = t;
            }
            n = g;
        } else if (is_op(p, '(')) {
            jnode *c = mk(p, JN_CALL, line);
            c->a = n;
            parse_call_args(p, c);
            n = c;
        } else break;
    }
    return n;
}

static jnode *parse_primary(P *p, bool with_ns) {
    tok *t = cur(p);
    jnode *n;
    enter(p);
    if (t->type == T_NAME) {
        adv(p);
        if (!strcmp(t->p, "true") || !strcmp(t->p, "True") || !strcmp(t->p, "false") || !strcmp(t->p, "False")) {
            n = mk(p, JN_CONST, t->line);
            n->val = jv_bool(t->p[0] == 't' || t->p[0] == 'T');
        } else if (!strcmp(t->p, "none") || !strcmp(t->p, "None")) {
            n = mk(p, JN_CONST, t->line);
            n->val = jv_none();
        } else if (with_ns && is_op(p, '.')) {
            adv(p);
            n = mk(p, JN_NSREF, t->line);
            n->name = t->p;
            n->name2 = expect_name(p);
        } else {
            n = mk(p, JN_NAME, t->line);
            n->name = t->p;
        }
    } else if (t->type == T_STRING) {
        n = mk(p, JN_CONST, t->line);
        const char *s = t->p;
        size_t len = t->n;
        adv(p);
        if (cur(p)->type == T_STRING) { /* adjacent literals concatenate */
            jbuf b = {NULL, 0, 0, p->a, SIZE_MAX};
            jbuf_put(&b, s, len);
            while (cur(p)->type == T_STRING) jbuf_put(&b, cur(p)->p, cur(p)->n), adv(p);
            s = b.n ? b.p : "", len = b.n;
        }
        n->val = jv_strn(s, len);
    } else if (t->type == T_INT || t->type == T_FLOAT) {
        n = mk(p, JN_CONST, t->line);
        n->val = t->val;
        adv(p);
    } else if (is_op(p, '(')) {
        adv(p);
        n = parse_tuple(p, false, true, NULL, true);
        expect_op(p, ')');
    } else if (is_op(p, '[')) {
        adv(p);
        n = mk(p, JN_LIST, t->line);
        nvec items = {0};
        while (!is_op(p, ']')) {
            if (items.n) expect_op(p, ',');
            if (is_op(p, ']')) break;
            nv_push(p, &items, parse_expr(p, true), NULL);
        }
        expect_op(p, ']');
        n->args = nv_done(&items);
    } else if (is_op(p, '{')) {
        adv(p);
        n = mk(p, JN_DICT, t->line);
        nvec keys = {0}, vals = {0};
        while (!is_op(p, '}')) {
            if (keys.n) expect_op(p, ',');
            if (is_op(p, '}')) break;
            nv_push(p, &keys, parse_expr(p, true), NULL);
            expect_op(p, ':');
            nv_push(p, &vals, parse_expr(p, true), NULL);
        }
        expect_op(p, '}');
        n->args = nv_done(&keys);
        n->kw = nv_done(&vals);
    } else {
        pfail(p, MF_ERR_FORMAT, t->line, "unexpected %s", describe(t));
    }
    p->depth--;
    return n;
}

static jnode *parse_unary(P *p, bool with_filter) {
    enter(p);
    int line = cur(p)->line;
    jnode *n;
    if (is_op(p, '-') || is_op(p, '+')) {
        n = mk(p, is_op(p, '-') ? JN_NEG : JN_POS, line);
        adv(p);
        n->a = parse_unary(p, false);
    } else n = parse_primary(p, false);
    n = parse_postfix(p, n);
    if (with_filter) {
        for (;;) {
            if (is_op(p, '|')) n = parse_filter(p, n, false);
            else if (is_name(p, "is")) n = parse_test(p, n);
            else if (is_op(p, '(')) n = parse_postfix(p, n);
            else break;
        }
    }
    p->depth--;
    return n;
}

static jnode *binop(P *p, int line, jop op, jnode *a, jnode *b) {
    jnode *n = mk(p, JN_BINOP, line);
    n->op = (uint8_t)op, n->a = a, n->b = b;
    return n;
}

static jnode *parse_pow(P *p) {
    jnode *n = parse_unary(p, true);
    while (is_op(p, OP_POW)) {
        int line = cur(p)->line;
        adv(p);
        n = binop(p, line, JOP_POW, n, parse_unary(p, true));
    }
    return n;
}

static jnode *parse_math2(P *p) {
    jnode *n = parse_pow(p);
    for (;;) {
        int line = cur(p)->line;
        jop op;
        if (is_op(p, '*')) op = JOP_MUL;
        else if (is_op(p, '/')) op = JOP_DIV;
        else if (is_op(p, OP_FLOORDIV)) op = JOP_FLOORDIV;
        else if (is_op(p, '%')) op = JOP_MOD;
        else return n;
        adv(p);
        n = binop(p, line, op, n, parse_pow(p));
    }
}

static jnode *parse_concat(P *p) {
    int line = cur(p)->line;
    jnode *first = parse_math2(p);
    if (!is_op(p, '~')) return first;
    nvec parts = {0};
    nv_push(p, &parts, first, NULL);
    while (skip_op(p, '~')) nv_push(p, &parts, parse_math2(p), NULL);
    jnode *n = mk(p, JN_CONCAT, line);
    n->args = nv_done(&parts);
    return n;
}

static jnode *parse_math1(P *p) {
    jnode *n = parse_concat(p);
    while (is_op(p, '+') || is_op(p, '-')) {
        int line = cur(p)->line;
        jop op = is_op(p, '+') ? JOP_ADD : JOP_SUB;
        adv(p);
        n = binop(p, line, op, n, parse_concat(p));
    }
    return n;
}

static jnode *parse_compare(P *p) {
    int line = cur(p)->line;
    jnode *first = parse_math1(p);
    nvec rhs = {0};
    uint8_t ops[64];
    for (;;) {
        int op = -1;
        tok *t = cur(p);
        if (t->type == T_OP) {
            switch (t->op) {
            case OP_EQ: op = JOP_EQ; break;
            case OP_NE: op = JOP_NE; break;
            case '<': op = JOP_LT; break;
            case OP_LE: op = JOP_LE; break;
            case '>': op = JOP_GT; break;
            case OP_GE: op = JOP_GE; break;
            }
            if (op >= 0) adv(p);
        } else if (is_name(p, "in")) {
            op = JOP_IN;
            adv(p);
        } else if (is_name(p, "not") && look(p)->type == T_NAME && !strcmp(look(p)->p, "in")) {
            op = JOP_NOTIN;
            adv(p), adv(p);
        }
        if (op < 0) break;
        if (rhs.n == (int)sizeof ops) pfail(p, MF_ERR_RANGE, line, "comparison chain too long");
        ops[rhs.n] = (uint8_t)op;
        nv_push(p, &rhs, parse_math1(p), NULL);
    }
    if (!rhs.n) return first;
    jnode *n = mk(p, JN_COMPARE, line);
    n->a = first;
    n->args = nv_done(&rhs);
    n->ops = jarena_alloc(p->a, (size_t)rhs.n);
    memcpy(n->ops, ops, (size_t)rhs.n);
    return n;
}

static jnode *parse_not(P *p) {
    if (is_name(p, "not")) {
        int line = cur(p)->line;
        adv(p);
        enter(p);
        jnode *n = mk(p, JN_NOT, line);
        n->a = parse_not(p);
        p->depth--;
        return n;
    }
    return parse_compare(p);
}

static jnode *parse_and(P *p) {
    jnode *n = parse_not(p);
    while (is_name(p, "and")) {
        jnode *x = mk(p, JN_AND, cur(p)->line);
        adv(p);
        x->a = n, x->b = parse_not(p);
        n = x;
    }
    return n;
}

static jnode *parse_or(P *p) {
    jnode *n = parse_and(p);
    while (is_name(p, "or")) {
        jnode *x = mk(p, JN_OR, cur(p)->line);
        adv(p);
        x->a = n, x->b = parse_and(p);
        n = x;
    }
    return n;
}

static jnode *parse_expr(P *p, bool with_cond) {
    enter(p);
    jnode *n = parse_or(p);
    while (with_cond && is_name(p, "if")) {
        jnode *c = mk(p, JN_COND, cur(p)->line);
        adv(p);
        c->a = n;
        c->b = parse_or(p);
        if (skip_name(p, "else")) c->c = parse_expr(p, true);
        n = c;
    }
    p->depth--;
    return n;
}

static bool tuple_end(P *p, const char *extra_end) {
    tok *t = cur(p);
    if (t->type == T_VAR_END || t->type == T_BLOCK_END || t->type == T_EOF || is_op(p, ')')) return true;
    return extra_end && is_name(p, extra_end);
}

static jnode *parse_tuple(P *p, bool simplified, bool with_cond, const char *extra_end, bool explicit_parens) {
    int line = cur(p)->line;
    nvec items = {0};
    bool is_tuple = false;
    for (;;) {
        if (items.n) expect_op(p, ',');
        if (tuple_end(p, extra_end)) break;
        nv_push(p, &items, simplified ? parse_primary(p, true) : parse_expr(p, with_cond), NULL);
        if (is_op(p, ',')) is_tuple = true;
        else break;
    }
    if (!is_tuple) {
        if (items.n) return items.v[0];
        if (!explicit_parens) pfail(p, MF_ERR_FORMAT, line, "expected an expression, got %s", describe(cur(p)));
    }
    jnode *n = mk(p, JN_TUPLE, line);
    n->args = nv_done(&items);
    return n;
}

/* ---- statements ---- */
static jnodes subparse(P *p, const char *const *end_tags);

static jnodes parse_body(P *p, const char *const *end_tags, const char *opener, int line) {
    skip_op(p, ':');
    expect_type(p, T_BLOCK_END, "'%}'");
    jnodes body = subparse(p, end_tags);
    if (cur(p)->type == T_EOF) pfail(p, MF_ERR_FORMAT, line, "'%s' block is never closed (expected '%s')", opener, end_tags[0]);
    return body;
}

static void check_target(P *p, jnode *t, bool allow_ns) {
    if (t->kind == JN_NAME || (allow_ns && t->kind == JN_NSREF)) return;
    if (t->kind == JN_TUPLE) {
        for (int i = 0; i < t->args.n; i++) check_target(p, t->args.v[i], allow_ns);
        return;
    }
    pfail(p, MF_ERR_FORMAT, t->line, "cannot assign to this expression");
}

static void parse_signature(P *p, jnode *n) {
    nvec params = {0}, defaults = {0};
    expect_op(p, '(');
    while (!is_op(p, ')')) {
        if (params.n) expect_op(p, ',');
        const char *name = expect_name(p);
        jnode *def = NULL;
        if (skip_op(p, '=')) def = parse_expr(p, true);
        else if (defaults.n && defaults.v[defaults.n - 1]) pfail(p, MF_ERR_FORMAT, cur(p)->line, "non-default argument follows default argument");
        nv_push(p, &params, NULL, name);
        nv_push(p, &defaults, def, NULL);
    }
    expect_op(p, ')');
    n->kw = nv_done(&defaults);
    n->kw_names = params.names;
}

static jnode *parse_statement(P *p) {
    tok *t = cur(p);
    int line = t->line;
    if (t->type != T_NAME) pfail(p, MF_ERR_FORMAT, line, "tag name expected, got %s", describe(t));
    const char *kw = t->p;
    adv(p);
    if (!strcmp(kw, "if")) {
        static const char *const ends[] = {"elif", "else", "endif", NULL};
        static const char *const endif[] = {"endif", NULL};
        jnode *root = mk(p, JN_IF, line), *n = root;
        for (;;) {
            n->a = parse_tuple(p, false, false, NULL, false);
            n->args = parse_body(p, ends, "if", line);
            if (skip_name(p, "elif")) {
                jnode *e = mk(p, JN_IF, cur(p)->line);
                jnode **one = jarena_alloc(p->a, sizeof *one);
                one[0] = e;
                n->kw = (jnodes){one, 1};
                n = e;
                continue;
            }
            if (skip_name(p, "else")) {
                n->kw = parse_body(p, endif, "if", line);
                adv(p);
            } else adv(p); /* endif */
            return root;
        }
    }
    if (!strcmp(kw, "for")) {
        static const char *const ends[] = {"endfor", "else", NULL};
        static const char *const endfor[] = {"endfor", NULL};
        jnode *n = mk(p, JN_FOR, line);
        n->d = parse_tuple(p, true, true, "in", false);
        check_target(p, n->d, false);
        if (!skip_name(p, "in")) pfail(p, MF_ERR_FORMAT, cur(p)->line, "expected 'in' in for loop, got %s", describe(cur(p)));
        n->b = parse_tuple(p, false, false, "recursive", false);
        if (skip_name(p, "if")) n->c = parse_expr(p, true);
        if (is_name(p, "recursive")) pfail(p, MF_ERR_UNSUPPORTED, line, "recursive for loops are not supported");
        p->loops++;
        n->args = parse_body(p, ends, "for", line);
        p->loops--;
        if (skip_name(p, "else")) { /* runs when nothing was iterated: not inside this loop */
            n->kw = parse_body(p, endfor, "for", line);
        }
        adv(p);
        return n;
    }
    if (!strcmp(kw, "set")) {
        jnode *target = parse_tuple(p, true, true, NULL, false);
        check_target(p, target, true);
        if (skip_op(p, '=')) {
            jnode *n = mk(p, JN_SET, line);
            n->d = target;
            n->a = parse_tuple(p, false, true, NULL, false);
            return n;
        }
        static const char *const ends[] = {"endset", NULL};
        jnode *n = mk(p, JN_SETBLOCK, line);
        n->d = target;
        n->a = parse_filter(p, NULL, false);
        n->args = parse_body(p, ends, "set", line);
        adv(p);
        return n;
    }
    if (!strcmp(kw, "macro")) {
        static const char *const ends[] = {"endmacro", NULL};
        jnode *n = mk(p, JN_MACRO, line);
        n->name = expect_name(p);
        parse_signature(p, n);
        int loops = p->loops; /* a macro body is a function of its own: loops outside do not count */
        p->loops = 0;
        n->args = parse_body(p, ends, "macro", line);
        p->loops = loops;
        adv(p);
        return n;
    }
    if (!strcmp(kw, "call")) {
        static const char *const ends[] = {"endcall", NULL};
        jnode *n = mk(p, JN_CALLBLOCK, line);
        if (is_op(p, '(')) parse_signature(p, n);
        n->a = parse_expr(p, true);
        if (n->a->kind != JN_CALL) pfail(p, MF_ERR_FORMAT, line, "{%% call %%} expects a macro call");
        int loops = p->loops;
        p->loops = 0;
        n->args = parse_body(p, ends, "call", line);
        p->loops = loops;
        adv(p);
        return n;
    }
    if (!strcmp(kw, "filter")) {
        static const char *const ends[] = {"endfilter", NULL};
        jnode *n = mk(p, JN_FILTERBLOCK, line);
        n->a = parse_filter(p, NULL, true);
        n->args = parse_body(p, ends, "filter", line);
        adv(p);
        return n;
    }
    if (!strcmp(kw, "with")) {
        static const char *const ends[] = {"endwith", NULL};
        jnode *n = mk(p, JN_WITH, line);
        nvec vals = {0};
        while (cur(p)->type != T_BLOCK_END) {
            if (vals.n) expect_op(p, ',');
            const char *name = expect_name(p);
            expect_op(p, '=');
            nv_push(p, &vals, parse_expr(p, true), name);
        }
        n->kw = nv_done(&vals);
        n->kw_names = vals.names;
        n->args = parse_body(p, ends, "with", line);
        adv(p);
        return n;
    }
    if (!strcmp(kw, "generation")) { /* Hugging Face's assistant-mask marker: renders its body in a scope */
        static const char *const ends[] = {"endgeneration", NULL};
        jnode *n = mk(p, JN_WITH, line);
        n->args = parse_body(p, ends, "generation", line);
        adv(p);
        return n;
    }
    if (!strcmp(kw, "print")) {
        jnode *n = mk(p, JN_PRINT, line);
        n->a = parse_tuple(p, false, true, NULL, false);
        return n;
    }
    if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
        if (!p->loops) pfail(p, MF_ERR_FORMAT, line, "'%s' outside of a for loop", kw);
        return mk(p, kw[0] == 'b' ? JN_BREAK : JN_CONTINUE, line);
    }
    static const char *const unsupported[] = {"extends", "block", "include", "import", "from", "autoescape", "do", "trans", NULL};
    for (int i = 0; unsupported[i]; i++)
        if (!strcmp(kw, unsupported[i])) pfail(p, MF_ERR_UNSUPPORTED, line, "the '%s' tag is not supported in chat templates", kw);
    pfail(p, MF_ERR_FORMAT, line, "unknown or misplaced tag '%s'", kw);
}

static jnodes subparse(P *p, const char *const *end_tags) {
    nvec body = {0};
    enter(p);
    for (;;) {
        tok *t = cur(p);
        if (t->type == T_EOF) break;
        if (t->type == T_DATA) {
            jnode *n = mk(p, JN_TEXT, t->line);
            n->val = jv_strn(t->p, t->n);
            nv_push(p, &body, n, NULL);
            adv(p);
        } else if (t->type == T_VAR_BEGIN) {
            adv(p);
            jnode *n = mk(p, JN_PRINT, t->line);
            n->a = parse_tuple(p, false, true, NULL, false);
            expect_type(p, T_VAR_END, "'}}'");
            nv_push(p, &body, n, NULL);
        } else if (t->type == T_BLOCK_BEGIN) {
            adv(p);
            if (end_tags && cur(p)->type == T_NAME)
                for (int i = 0; end_tags[i]; i++)
                    if (!strcmp(cur(p)->p, end_tags[i])) {
                        p->depth--;
                        return nv_done(&body);
                    }
            nv_push(p, &body, parse_statement(p), NULL);
            expect_type(p, T_BLOCK_END, "'%}'");
        } else pfail(p, MF_ERR_FORMAT, t->line, "unexpected %s", describe(t));
    }
    p->depth--;
    return nv_done(&body);
}

/* Kept out of line so no local of the lexer lives in the frame that calls setjmp. */
__attribute__((noinline)) static void parse_all(P *p) {
    jinja_lex(p);
    p->res->body = subparse(p, NULL);
}

mf_status jinja_parse(jarena *a, const char *src, size_t len, jparse_result *res) {
    /* P lives on the heap: its fields change between setjmp and a longjmp, which would leave a
     * local copy indeterminate */
    P *p = calloc(1, sizeof *p);
    if (!p) return mf_fail(MF_ERR_NOMEM, "out of memory parsing a chat template");
    p->a = a;
    p->res = res;
    res->status = MF_OK;
    res->err[0] = 0;
    jmp_buf *prev = a->on_fail;
    a->on_fail = &p->jb;
    a->errbuf = res->err;
    a->errcap = sizeof res->err;
    if (setjmp(p->jb)) {
        if (res->status == MF_OK) res->status = a->fail_status ? a->fail_status : MF_ERR_NOMEM;
        mf_status st = res->status;
        free(p->t);
        free(p);
        a->on_fail = prev;
        return st;
    }
    /* \r\n and \r become \n; one trailing newline is dropped (keep_trailing_newline off) */
    char *s = jarena_alloc(a, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else s[n++] = src[i];
    }
    if (n && s[n - 1] == '\n') n--;
    s[n] = 0;
    p->s = s, p->n = n;
    parse_all(p);
    free(p->t);
    free(p);
    a->on_fail = prev;
    return MF_OK;
}
