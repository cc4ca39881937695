/* jinja_eval.c: the tree-walking evaluator: scopes (a for-loop iteration, a macro call, a with,
 * filter or set block each open one; if does not), statements, operators with Python semantics (int/float
 * promotion, floor division and modulo, str/list concatenation and repetition), attribute and
 * item access with Jinja's fallbacks, slicing, macros and call blocks, and output capture. */
#include "chat/jinja.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef enum { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE } flow;

void jinja_error(jctx *c, mf_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = snprintf(c->err, sizeof c->err, "line %d: ", c->line);
    vsnprintf(c->err + k, sizeof c->err - (size_t)k, fmt, ap);
    va_end(ap);
    ju_trim_partial(c->err);
    c->status = s;
    longjmp(c->fail, 1);
}

void jinja_step(jctx *c) {
    if (++c->steps > c->max_steps)
        jinja_error(c, MF_ERR_RANGE, "rendering took more than %llu steps (a runaway loop?)", (unsigned long long)c->max_steps);
}

/* An undefined value remembers why it is undefined (flags, owner type in s.n) so that using it
 * reports what Jinja reports: "'x' is undefined", "'dict object' has no attribute 'x'",
 * "list object has no element 3". */
#define UNDEF_ATTR 2u
#define UNDEF_ELEM 4u

static jv undef_from(jv owner, const char *name, uint8_t kind) {
    jv u = jv_undef(name);
    u.flags = kind;
    u.s.n = owner.type;
    return u;
}

static const char *owner_name(size_t t) {
    jv v = {.type = (uint8_t)t};
    return t == JV_LIST ? "list" : jv_type_name(v);
}

static _Noreturn void undefined_error(jctx *c, jv v) {
    const char *name = v.s.p ? v.s.p : "value";
    if (v.flags & UNDEF_ATTR) {
        if (v.s.n == JV_NONE) jinja_error(c, MF_ERR_FORMAT, "'None' has no attribute '%s'", name);
        jinja_error(c, MF_ERR_FORMAT, "'%s object' has no attribute '%s'", owner_name(v.s.n), name);
    }
    if (v.flags & UNDEF_ELEM) {
        if (v.s.n == JV_NONE) jinja_error(c, MF_ERR_FORMAT, "None has no element %s", name);
        jinja_error(c, MF_ERR_FORMAT, "%s object has no element %s", owner_name(v.s.n), name);
    }
    jinja_error(c, MF_ERR_FORMAT, "'%s' is undefined", name);
}

/* ---- scopes ---- */
static jscope *scope_new(jctx *c, jscope *parent) {
    jscope *s = jarena_alloc(&c->arena, sizeof *s);
    s->parent = parent;
    s->vars = *jv_dict_new(c, 4).d;
    s->captured = false;
    return s;
}

void jscope_set(jctx *c, jscope *s, const char *name, jv v) { jv_dict_set(c, &s->vars, jv_cstr(name), v); }

jv jscope_get(jscope *s, const char *name) {
    size_t n = strlen(name);
    for (; s; s = s->parent) {
        jv *v = jv_dict_get_str(&s->vars, name, n);
        if (v) return *v;
    }
    int fn = jinja_find_func(name);
    if (fn >= 0) {
        jv f = {.type = JV_FUNC};
        f.fn = fn;
        return f;
    }
    return jv_undef(name);
}

/* ---- output ---- */
static void emit(jctx *c, const char *p, size_t n) {
    if (n == 0) return;
    if (n > c->max_output - c->out_len)
        jinja_error(c, MF_ERR_RANGE, "rendered text exceeds the output limit of %zu bytes", c->max_output);
    if (c->out_cap - c->out_len < n) {
        size_t cap = c->out_cap ? c->out_cap : 4096;
        while (cap - c->out_len < n) cap *= 2;
        char *o = realloc(c->out, cap);
        if (!o) jinja_error(c, MF_ERR_NOMEM, "out of memory growing the output to %zu bytes", cap);
        c->out = o;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
}

static void emit_value(jctx *c, jv v) {
    if (v.type == JV_STR) emit(c, v.s.p, v.s.n);
    else if (v.type != JV_UNDEF) {
        jv s = jv_to_str(c, v);
        emit(c, s.s.p, s.s.n);
    }
}

static flow exec_body(jctx *c, jscope *s, jnodes body);

/* Run a body with its output captured into a string instead of the template output. A break or
 * continue inside (a filter or set block in a loop) leaves the block at once and drops its text,
 * as the inline Python Jinja generates does; *f (may be NULL) reports it. */
static jv capture_flow(jctx *c, jscope *s, jnodes body, flow *f) {
    size_t start = c->out_len;
    flow r = exec_body(c, s, body);
    if (f) *f = r;
    if (c->out_len == start || r != FLOW_NEXT) {
        c->out_len = start;
        return jv_strn("", 0);
    }
    jv v = jv_strn(jarena_strndup(&c->arena, c->out + start, c->out_len - start), c->out_len - start);
    c->out_len = start;
    return v;
}

static jv capture(jctx *c, jscope *s, jnodes body) { return capture_flow(c, s, body, NULL); }

/* ---- attribute / item access ---- */
static jv loop_attr(jctx *c, jloop *l, const char *name) {
    size_t i = l->index0, n = l->items->n;
    if (!strcmp(name, "index")) return jv_int((int64_t)i + 1);
    if (!strcmp(name, "index0")) return jv_int((int64_t)i);
    if (!strcmp(name, "revindex")) return jv_int((int64_t)(n - i));
    if (!strcmp(name, "revindex0")) return jv_int((int64_t)(n - i - 1));
    if (!strcmp(name, "first")) return jv_bool(i == 0);
    if (!strcmp(name, "last")) return jv_bool(i + 1 == n);
    if (!strcmp(name, "length")) return jv_int((int64_t)n);
    if (!strcmp(name, "depth")) return jv_int(l->depth);
    if (!strcmp(name, "depth0")) return jv_int(l->depth - 1);
    if (!strcmp(name, "previtem")) return i > 0 ? l->items->v[i - 1] : jv_undef("previtem");
    if (!strcmp(name, "nextitem")) return i + 1 < n ? l->items->v[i + 1] : jv_undef("nextitem");
    if (!strcmp(name, "cycle")) {
        jv m = {.type = JV_METHOD};
        m.meth = jarena_alloc(&c->arena, sizeof *m.meth);
        m.meth->self.type = JV_LOOP;
        m.meth->self.loop = l;
        m.meth->name = "cycle";
        return m;
    }
    return jv_undef(name);
}

static jv bind_method(jctx *c, jv obj, const char *name) {
    jv m = {.type = JV_METHOD};
    m.meth = jarena_alloc(&c->arena, sizeof *m.meth);
    m.meth->self = obj;
    m.meth->name = name;
    return m;
}

jv jinja_getattr(jctx *c, jv obj, const char *name, size_t n) {
    switch (obj.type) {
    case JV_UNDEF: undefined_error(c, obj);
    case JV_DICT: {
        if (jinja_has_method(obj, name, n)) return bind_method(c, obj, jarena_strndup(&c->arena, name, n));
        jv *v = jv_dict_get_str(obj.d, name, n);
        return v ? *v : undef_from(obj, jarena_strndup(&c->arena, name, n), UNDEF_ATTR);
    }
    case JV_NS: {
        jv *v = jv_dict_get_str(obj.d, name, n);
        return v ? *v : undef_from(obj, jarena_strndup(&c->arena, name, n), UNDEF_ATTR);
    }
    case JV_LOOP: return loop_attr(c, obj.loop, jarena_strndup(&c->arena, name, n));
    default:
        if (jinja_has_method(obj, name, n)) return bind_method(c, obj, jarena_strndup(&c->arena, name, n));
        return undef_from(obj, jarena_strndup(&c->arena, name, n), UNDEF_ATTR);
    }
}

static bool as_index(jv k, int64_t *i) {
    if (k.type == JV_INT) return *i = k.i, true;
    if (k.type == JV_BOOL) return *i = k.b, true;
    return false;
}

static jv undef_elem(jctx *c, jv obj, int64_t i) {
    char num[24];
    snprintf(num, sizeof num, "%lld", (long long)i);
    return undef_from(obj, jarena_strndup(&c->arena, num, strlen(num)), UNDEF_ELEM);
}

jv jinja_getitem(jctx *c, jv obj, jv key) {
    int64_t i;
    switch (obj.type) {
    case JV_UNDEF: undefined_error(c, obj);
    case JV_DICT: case JV_NS: {
        jv *v = jv_dict_get(obj.d, key);
        if (v) return *v;
        break;
    }
    case JV_LIST:
        if (obj.flags & JV_GEN) return undef_from(obj, "index", UNDEF_ELEM);
        if (as_index(key, &i)) {
            int64_t n = (int64_t)obj.l->n;
            if (i < 0) i += n;
            return i >= 0 && i < n ? obj.l->v[i] : undef_elem(c, obj, key.type == JV_INT ? key.i : key.b);
        }
        break;
    case JV_STR:
        if (as_index(key, &i)) {
            int64_t n = (int64_t)ju_len(obj.s.p, obj.s.n);
            if (i < 0) i += n;
            if (i < 0 || i >= n) return undef_elem(c, obj, key.type == JV_INT ? key.i : key.b);
            size_t a = ju_offset(obj.s.p, obj.s.n, (size_t)i), b = ju_offset(obj.s.p, obj.s.n, (size_t)i + 1);
            return jv_strn(obj.s.p + a, b - a);
        }
        break;
    default: break;
    }
    if (key.type == JV_STR && obj.type != JV_NS) return jinja_getattr(c, obj, key.s.p, key.s.n);
    if (key.type == JV_STR) return undef_from(obj, jarena_strndup(&c->arena, key.s.p, key.s.n), UNDEF_ATTR);
    jbuf kb = jbuf_make(c);
    jv_write_repr(c, &kb, key);
    jbuf_putc(&kb, 0);
    return undef_from(obj, kb.p, UNDEF_ELEM);
}

/* Python slice semantics: clamp start/stop for the step's direction. */
static jv do_slice(jctx *c, jv obj, jv a, jv b, jv st) {
    int64_t step = 1, start = 0, stop = 0;
    if (obj.type == JV_UNDEF) undefined_error(c, obj);
    if (st.type != JV_NONE && st.type != JV_UNDEF && !as_index(st, &step)) jinja_error(c, MF_ERR_FORMAT, "slice step must be an integer");
    if (step == 0) jinja_error(c, MF_ERR_FORMAT, "slice step cannot be zero");
    bool is_str = obj.type == JV_STR;
    /* Jinja compiles slices to plain Python subscription: non-sequences raise (plain indexes do not) */
    if (!is_str && (obj.type != JV_LIST || (obj.flags & JV_GEN)))
        jinja_error(c, MF_ERR_FORMAT, obj.type == JV_DICT ? "unhashable type: 'slice'" : "'%s' object is not subscriptable", jv_type_name(obj));
    int64_t n = is_str ? (int64_t)ju_len(obj.s.p, obj.s.n) : (int64_t)obj.l->n;
    bool has_a = a.type != JV_NONE && a.type != JV_UNDEF, has_b = b.type != JV_NONE && b.type != JV_UNDEF;
    if ((has_a && !as_index(a, &start)) || (has_b && !as_index(b, &stop))) jinja_error(c, MF_ERR_FORMAT, "slice indices must be integers or None");
    if (step > 0) {
        if (!has_a) start = 0;
        else if (start < 0) start = start + n < 0 ? 0 : start + n;
        else if (start > n) start = n;
        if (!has_b) stop = n;
        else if (stop < 0) stop = stop + n < 0 ? 0 : stop + n;
        else if (stop > n) stop = n;
    } else {
        if (!has_a) start = n - 1;
        else if (start < 0) start = start + n < 0 ? -1 : start + n;
        else if (start >= n) start = n - 1;
        if (!has_b) stop = -1;
        else if (stop < 0) stop = stop + n < 0 ? -1 : stop + n;
        else if (stop >= n) stop = n - 1;
    }
    if (is_str && step == 1) {
        if (stop < start) stop = start;
        size_t x = ju_offset(obj.s.p, obj.s.n, (size_t)start), y = ju_offset(obj.s.p, obj.s.n, (size_t)stop);
        return jv_strn(obj.s.p + x, y - x);
    }
    jbuf sb = jbuf_make(c);
    jv out = is_str ? jv_none() : jv_list_new(c, 0);
    if (!is_str) out.flags = obj.flags;
    /* code point offsets of a string, so a reversed slice is linear */
    size_t *offs = NULL;
    if (is_str) {
        offs = jarena_alloc(&c->arena, ((size_t)n + 1) * sizeof *offs);
        for (int64_t k = 0; k <= n; k++) offs[k] = k == 0 ? 0 : ju_offset(obj.s.p + offs[k - 1], obj.s.n - offs[k - 1], 1) + offs[k - 1];
    }
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
        jinja_step(c);
        if (is_str) jbuf_put(&sb, obj.s.p + offs[k], offs[k + 1] - offs[k]);
        else jv_list_push(c, out, obj.l->v[k]);
    }
    return is_str ? jbuf_value(&sb) : out;
}

jv jinja_iter_list(jctx *c, jv v) {
    switch (v.type) {
    case JV_UNDEF: return jv_list_new(c, 1);
    case JV_LIST: return v;
    case JV_DICT: case JV_NS: {
        jv l = jv_list_new(c, v.d->n);
        for (size_t i = 0; i < v.d->n; i++) jv_list_push(c, l, v.d->k[i]);
        return l;
    }
    case JV_STR: {
        jv l = jv_list_new(c, v.s.n);
        for (size_t i = 0; i < v.s.n;) {
            uint32_t cp;
            size_t k = ju_decode(v.s.p + i, v.s.n - i, &cp);
            while (i + k < v.s.n && ((unsigned char)v.s.p[i + k] & 0xC0) == 0x80) k++;
            jv_list_push(c, l, jv_strn(v.s.p + i, k));
            i += k;
        }
        return l;
    }
    default: jinja_error(c, MF_ERR_FORMAT, "'%s' object is not iterable", jv_type_name(v));
    }
}

/* ---- operators ---- */
static bool is_num(jv v) { return v.type == JV_BOOL || v.type == JV_INT || v.type == JV_FLOAT; }
static double num_f(jv v) { return v.type == JV_FLOAT ? v.f : v.type == JV_INT ? (double)v.i : (double)v.b; }
static int64_t num_i(jv v) { return v.type == JV_INT ? v.i : v.type == JV_BOOL ? (int64_t)v.b : 0; }

static const char *op_sym(jop op) {
    static const char *const s[] = {"+", "-", "*", "/", "//", "%", "**"};
    return op <= JOP_POW ? s[op] : "?";
}

static jv repeat(jctx *c, jv seq, int64_t times) {
    if (times < 0) times = 0;
    size_t unit = seq.type == JV_STR ? seq.s.n : seq.l->n * sizeof(jv), total;
    if (!mf_mul_size(unit, (size_t)times, &total) || total > c->max_output)
        jinja_error(c, MF_ERR_RANGE, "repeating a %s %lld times exceeds the output limit of %zu bytes", jv_type_name(seq), (long long)times, c->max_output);
    if (seq.type == JV_STR) {
        jbuf b = jbuf_make(c);
        for (int64_t i = 0; i < times; i++) jinja_step(c), jbuf_put(&b, seq.s.p, seq.s.n);
        return jbuf_value(&b);
    }
    jv out = jv_list_new(c, 0);
    out.flags = seq.flags;
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < seq.l->n; k++) jinja_step(c), jv_list_push(c, out, seq.l->v[k]);
    return out;
}

static jv binop(jctx *c, jop op, jv a, jv b) {
    if (a.type == JV_UNDEF) undefined_error(c, a);
    if (b.type == JV_UNDEF) undefined_error(c, b);
    if (is_num(a) && is_num(b)) {
        bool fl = a.type == JV_FLOAT || b.type == JV_FLOAT;
        int64_t x = num_i(a), y = num_i(b), r;
        double fx = num_f(a), fy = num_f(b);
        switch (op) {
        case JOP_ADD:
            if (fl) return jv_float(fx + fy);
            if (__builtin_add_overflow(x, y, &r)) break;
            return jv_int(r);
        case JOP_SUB:
            if (fl) return jv_float(fx - fy);
            if (__builtin_sub_overflow(x, y, &r)) break;
            return jv_int(r);
        case JOP_MUL:
            if (fl) return jv_float(fx * fy);
            if (__builtin_mul_overflow(x, y, &r)) break;
            return jv_int(r);
        case JOP_DIV:
            if (fy == 0) jinja_error(c, MF_ERR_FORMAT, "division by zero");
            return jv_float(fx / fy);
        case JOP_FLOORDIV:
        case JOP_MOD:
            if (fl ? fy == 0 : y == 0) jinja_error(c, MF_ERR_FORMAT, "integer division or modulo by zero");
            if (fl) {
                /* Python: the remainder takes the divisor's sign, a zero one too (3.0 % -3 is -0.0) */
                double m = fmod(fx, fy);
                if (m != 0) {
                    if ((m < 0) != (fy < 0)) m += fy;
                } else m = copysign(0.0, fy);
                return op == JOP_MOD ? jv_float(m) : jv_float(floor(fx / fy));
            }
            if (x == INT64_MIN && y == -1) break;
            {
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) q--, m += y;
                return op == JOP_MOD ? jv_int(m) : jv_int(q);
            }
        case JOP_POW:
            if (!fl && y >= 0) {
                int64_t acc = 1;
                for (int64_t k = 0; k < y; k++) {
                    if (__builtin_mul_overflow(acc, x, &acc)) jinja_error(c, MF_ERR_RANGE, "integer overflow in **");
                    if (acc == 0 || acc == 1) break;
                    jinja_step(c);
                }
                if (acc == 1 && x == -1) acc = (y % 2) ? -1 : 1;
                return jv_int(acc);
            }
            return jv_float(pow(fx, fy));
        default: break;
        }
        jinja_error(c, MF_ERR_RANGE, "integer overflow in %s", op_sym(op));
    }
    if (op == JOP_ADD && a.type == JV_STR && b.type == JV_STR) {
        jbuf r = jbuf_make(c);
        jbuf_put(&r, a.s.p, a.s.n);
        jbuf_put(&r, b.s.p, b.s.n);
        return jbuf_value(&r);
    }
    if (op == JOP_ADD && a.type == JV_LIST && b.type == JV_LIST && a.flags == b.flags && !(a.flags & JV_GEN)) {
        jv r = jv_list_new(c, a.l->n + b.l->n);
        r.flags = a.flags;
        for (size_t i = 0; i < a.l->n; i++) jv_list_push(c, r, a.l->v[i]);
        for (size_t i = 0; i < b.l->n; i++) jv_list_push(c, r, b.l->v[i]);
        return r;
    }
    if (op == JOP_MUL && (a.type == JV_STR || a.type == JV_LIST) && (b.type == JV_INT || b.type == JV_BOOL)) return repeat(c, a, num_i(b));
    if (op == JOP_MUL && (b.type == JV_STR || b.type == JV_LIST) && (a.type == JV_INT || a.type == JV_BOOL)) return repeat(c, b, num_i(a));
    if (op == JOP_MOD && a.type == JV_STR) return jinja_format_percent(c, a, b);
    if (op == JOP_ADD && (a.type == JV_STR || a.type == JV_LIST))
        jinja_error(c, MF_ERR_FORMAT, "can only concatenate %s (not \"%s\") to %s", jv_type_name(a), jv_type_name(b), jv_type_name(a));
    jinja_error(c, MF_ERR_FORMAT, "unsupported operand type(s) for %s: '%s' and '%s'", op_sym(op), jv_type_name(a), jv_type_name(b));
}

static bool contains(jctx *c, jv container, jv item) {
    switch (container.type) {
    case JV_UNDEF: return false;
    case JV_STR:
        if (item.type != JV_STR) jinja_error(c, MF_ERR_FORMAT, "'in <string>' requires string as left operand, not %s", jv_type_name(item));
        if (item.s.n == 0) return true;
        return memmem(container.s.p, container.s.n, item.s.p, item.s.n) != NULL;
    case JV_LIST:
        for (size_t i = 0; i < container.l->n; i++)
            if (jv_equal(container.l->v[i], item)) return true;
        return false;
    case JV_DICT: case JV_NS:
        if ((item.type == JV_LIST && !(item.flags & JV_TUPLE)) || item.type == JV_DICT)
            jinja_error(c, MF_ERR_FORMAT, "unhashable type: '%s'", jv_type_name(item));
        return jv_dict_get(container.d, item) != NULL;
    default: jinja_error(c, MF_ERR_FORMAT, "argument of type '%s' is not iterable", jv_type_name(container));
    }
}

static bool compare(jctx *c, jop op, jv a, jv b) {
    switch (op) {
    case JOP_EQ: return jv_equal(a, b);
    case JOP_NE: return !jv_equal(a, b);
    case JOP_IN: return contains(c, b, a);
    case JOP_NOTIN: return !contains(c, b, a);
    default: break;
    }
    if (a.type == JV_UNDEF) undefined_error(c, a);
    if (b.type == JV_UNDEF) undefined_error(c, b);
    int r = jv_compare(c, a, b);
    switch (op) {
    case JOP_LT: return r < 0;
    case JOP_LE: return r <= 0;
    case JOP_GT: return r > 0;
    default: return r >= 0;
    }
}

/* ---- calls ---- */
typedef struct { jv *args; int n; const char **kwn; jv *kwv; int nkw; } jargs;

static jargs eval_args(jctx *c, jscope *s, const jnode *n) {
    jargs a = {0};
    jv star = n->c ? jinja_iter_list(c, jinja_eval(c, s, n->c)) : jv_list_new(c, 1);
    jv dstar = n->d ? jinja_eval(c, s, n->d) : jv_dict_new(c, 1);
    if (dstar.type != JV_DICT) jinja_error(c, MF_ERR_FORMAT, "argument after ** must be a mapping, not %s", jv_type_name(dstar));
    if (star.l->n > 10000 || dstar.d->n > 10000) jinja_error(c, MF_ERR_RANGE, "too many call arguments");
    a.n = n->args.n + (int)star.l->n;
    a.nkw = n->kw.n + (int)dstar.d->n;
    a.args = jarena_alloc(&c->arena, sizeof(jv) * (size_t)(a.n + 1));
    a.kwv = jarena_alloc(&c->arena, sizeof(jv) * (size_t)(a.nkw + 1));
    a.kwn = n->kw_names;
    for (int i = 0; i < n->args.n; i++) a.args[i] = jinja_eval(c, s, n->args.v[i]);
    for (size_t i = 0; i < star.l->n; i++) a.args[n->args.n + (int)i] = star.l->v[i];
    for (int i = 0; i < n->kw.n; i++) a.kwv[i] = jinja_eval(c, s, n->kw.v[i]);
    if (dstar.d->n) {
        const char **names = jarena_alloc(&c->arena, sizeof(char *) * (size_t)(a.nkw + 1));
        for (int i = 0; i < n->kw.n; i++) names[i] = n->kw_names[i];
        for (size_t i = 0; i < dstar.d->n; i++) {
            jv k = dstar.d->k[i];
            if (k.type != JV_STR) jinja_error(c, MF_ERR_FORMAT, "keywords must be strings");
            names[n->kw.n + (int)i] = jarena_strndup(&c->arena, k.s.p, k.s.n);
            a.kwv[n->kw.n + (int)i] = dstar.d->v[i];
        }
        a.kwn = names;
    }
    return a;
}

static jv call_macro(jctx *c, jmacro *m, jv *args, int nargs, const char **kwn, jv *kwv, int nkw, jv caller) {
    const jnode *def = m->def;
    if (++c->depth > c->max_depth) jinja_error(c, MF_ERR_RANGE, "macro calls nested deeper than %d levels", c->max_depth);
    int saved_line = c->line;
    jscope *s = scope_new(c, m->closure);
    int np = def->kw.n;
    bool *set = jarena_alloc(&c->arena, (size_t)np + 1);
    memset(set, 0, (size_t)np + 1);
    jv varargs = jv_list_new(c, 0), kwargs = jv_dict_new(c, 0);
    varargs.flags = JV_TUPLE;
    for (int i = 0; i < nargs; i++) {
        if (i < np) jscope_set(c, s, def->kw_names[i], args[i]), set[i] = true;
        else jv_list_push(c, varargs, args[i]);
    }
    for (int k = 0; k < nkw; k++) {
        int i = 0;
        while (i < np && strcmp(def->kw_names[i], kwn[k])) i++;
        if (i < np) jscope_set(c, s, def->kw_names[i], kwv[k]), set[i] = true;
        else jv_dict_set(c, kwargs.d, jv_cstr(kwn[k]), kwv[k]);
    }
    for (int i = 0; i < np; i++)
        if (!set[i]) jscope_set(c, s, def->kw_names[i], def->kw.v[i] ? jinja_eval(c, s, def->kw.v[i]) : jv_undef(def->kw_names[i]));
    jscope_set(c, s, "varargs", varargs);
    jscope_set(c, s, "kwargs", kwargs);
    if (caller.type != JV_UNDEF) jscope_set(c, s, "caller", caller);
    jv r = capture(c, s, def->args);
    c->line = saved_line;
    c->depth--;
    return r;
}

jv jinja_call_value(jctx *c, jscope *s, jv fn, jv *args, int nargs, const char **kwn, jv *kwv, int nkw) {
    (void)s;
    jinja_step(c);
    switch (fn.type) {
    case JV_MACRO: return call_macro(c, fn.m, args, nargs, kwn, kwv, nkw, jv_undef("caller"));
    case JV_FUNC: return jinja_call_func(c, fn.fn, args, nargs, kwn, kwv, nkw);
    case JV_METHOD: return jinja_call_method(c, fn.meth->self, fn.meth->name, args, nargs, kwn, kwv, nkw);
    case JV_UNDEF: undefined_error(c, fn);
    default: jinja_error(c, MF_ERR_FORMAT, "'%s' object is not callable", jv_type_name(fn));
    }
}

/* A filter node applied to `input` (a block's captured text) when its chain bottoms out at NULL. */
static jv eval_filter(jctx *c, jscope *s, const jnode *n, jv input) {
    jv v = n->a ? (n->a->kind == JN_FILTER ? eval_filter(c, s, n->a, input) : jinja_eval(c, s, n->a)) : input;
    jargs a = eval_args(c, s, n);
    c->line = n->line;
    return jinja_find_filter(n->name)(c, s, v, a.args, a.n, a.kwn, a.kwv, a.nkw);
}

jv jinja_eval(jctx *c, jscope *s, const jnode *n) {
    if (++c->depth > c->max_depth) jinja_error(c, MF_ERR_RANGE, "expression evaluation nested deeper than %d levels", c->max_depth);
    c->line = n->line;
    jv r;
    switch ((jnode_kind)n->kind) {
    case JN_CONST: r = n->val; break;
    case JN_NAME: r = jscope_get(s, n->name); break;
    case JN_GETATTR: r = jinja_getattr(c, jinja_eval(c, s, n->a), n->name, strlen(n->name)); break;
    case JN_GETITEM: {
        jv obj = jinja_eval(c, s, n->a);
        r = jinja_getitem(c, obj, jinja_eval(c, s, n->b));
        break;
    }
    case JN_SLICE: {
        jv obj = jinja_eval(c, s, n->a);
        jv a = n->b ? jinja_eval(c, s, n->b) : jv_none(), b = n->c ? jinja_eval(c, s, n->c) : jv_none();
        jv st = n->d ? jinja_eval(c, s, n->d) : jv_none();
        r = do_slice(c, obj, a, b, st);
        break;
    }
    case JN_CALL: {
        jv fn = jinja_eval(c, s, n->a);
        jargs a = eval_args(c, s, n);
        c->line = n->line;
        r = jinja_call_value(c, s, fn, a.args, a.n, a.kwn, a.kwv, a.nkw);
        break;
    }
    case JN_FILTER: r = eval_filter(c, s, n, jv_undef("input")); break;
    case JN_TEST: {
        jv v = jinja_eval(c, s, n->a);
        jargs a = eval_args(c, s, n);
        c->line = n->line;
        bool t = jinja_find_test(n->name)(c, v, a.args, a.n);
        r = jv_bool(n->op ? !t : t);
        break;
    }
    case JN_NEG: case JN_POS: {
        jv v = jinja_eval(c, s, n->a);
        if (v.type == JV_UNDEF) undefined_error(c, v);
        if (!is_num(v)) jinja_error(c, MF_ERR_FORMAT, "bad operand type for unary %c: '%s'", n->kind == JN_NEG ? '-' : '+', jv_type_name(v));
        if (v.type == JV_FLOAT) r = jv_float(n->kind == JN_NEG ? -v.f : v.f);
        else if (n->kind == JN_NEG && num_i(v) == INT64_MIN) jinja_error(c, MF_ERR_RANGE, "integer overflow in unary -");
        else r = jv_int(n->kind == JN_NEG ? -num_i(v) : num_i(v));
        break;
    }
    case JN_NOT: r = jv_bool(!jv_truthy(jinja_eval(c, s, n->a))); break;
    case JN_BINOP: {
        jv a = jinja_eval(c, s, n->a);
        jv b = jinja_eval(c, s, n->b);
        c->line = n->line;
        r = binop(c, (jop)n->op, a, b);
        break;
    }
    case JN_CONCAT: {
        jbuf b = jbuf_make(c);
        for (int i = 0; i < n->args.n; i++) jv_write_str(c, &b, jinja_eval(c, s, n->args.v[i]));
        r = jbuf_value(&b);
        break;
    }
    case JN_COMPARE: {
        jv left = jinja_eval(c, s, n->a);
        r = jv_bool(true);
        for (int i = 0; i < n->args.n; i++) {
            jv right = jinja_eval(c, s, n->args.v[i]);
            c->line = n->line;
            if (!compare(c, (jop)n->ops[i], left, right)) {
                r = jv_bool(false);
                break;
            }
            left = right;
        }
        break;
    }
    case JN_AND: r = jinja_eval(c, s, n->a); if (jv_truthy(r)) r = jinja_eval(c, s, n->b); break;
    case JN_OR: r = jinja_eval(c, s, n->a); if (!jv_truthy(r)) r = jinja_eval(c, s, n->b); break;
    case JN_COND:
        if (jv_truthy(jinja_eval(c, s, n->b))) r = jinja_eval(c, s, n->a);
        else r = n->c ? jinja_eval(c, s, n->c) : jv_undef("conditional expression");
        break;
    case JN_LIST: case JN_TUPLE:
        r = jv_list_new(c, (size_t)n->args.n);
        if (n->kind == JN_TUPLE) r.flags = JV_TUPLE;
        for (int i = 0; i < n->args.n; i++) jv_list_push(c, r, jinja_eval(c, s, n->args.v[i]));
        break;
    case JN_DICT:
        r = jv_dict_new(c, (size_t)n->args.n);
        for (int i = 0; i < n->args.n; i++) {
            jv k = jinja_eval(c, s, n->args.v[i]);
            if (k.type == JV_LIST && !(k.flags & JV_TUPLE)) jinja_error(c, MF_ERR_FORMAT, "unhashable type: 'list'");
            if (k.type == JV_DICT) jinja_error(c, MF_ERR_FORMAT, "unhashable type: 'dict'");
            jv_dict_set(c, r.d, k, jinja_eval(c, s, n->kw.v[i]));
        }
        break;
    default: jinja_error(c, MF_ERR_INTERNAL, "node kind %d is not an expression", n->kind);
    }
    c->depth--;
    return r;
}

/* ---- statements ---- */
static void assign(jctx *c, jscope *s, const jnode *target, jv v) {
    if (target->kind == JN_NAME) {
        jscope_set(c, s, target->name, v);
    } else if (target->kind == JN_NSREF) {
        jv ns = jscope_get(s, target->name);
        if (ns.type != JV_NS) jinja_error(c, MF_ERR_FORMAT, "cannot assign attribute '%s' on '%s', which is not a namespace", target->name2, target->name);
        jv_dict_set(c, ns.d, jv_cstr(target->name2), v);
    } else {
        jv items = v.type == JV_STR || v.type == JV_DICT ? jinja_iter_list(c, v) : v;
        if (items.type != JV_LIST) jinja_error(c, MF_ERR_FORMAT, "cannot unpack non-iterable %s object", jv_type_name(v));
        if ((int)items.l->n != target->args.n)
            jinja_error(c, MF_ERR_FORMAT, "cannot unpack %zu values into %d names", items.l->n, target->args.n);
        for (int i = 0; i < target->args.n; i++) assign(c, s, target->args.v[i], items.l->v[i]);
    }
}

static flow exec_for(jctx *c, jscope *s, const jnode *n) {
    jv seq = jinja_iter_list(c, jinja_eval(c, s, n->b));
    jlist *items = seq.l;
    if (n->c) { /* `for x in xs if cond`: filter first, so loop.length and loop.last see the survivors */
        jv kept = jv_list_new(c, items->n);
        jscope *fs = NULL;
        for (size_t i = 0; i < items->n; i++) {
            jinja_step(c);
            if (!fs) fs = scope_new(c, s);
            fs->vars.n = 0;
            assign(c, fs, n->d, items->v[i]);
            if (jv_truthy(jinja_eval(c, fs, n->c))) jv_list_push(c, kept, items->v[i]);
        }
        items = kept.l;
    }
    jloop *l = jarena_alloc(&c->arena, sizeof *l);
    l->items = items;
    l->depth = 1; /* deeper only for recursive loops, which minfer does not support */
    jv lv = {.type = JV_LOOP};
    lv.loop = l;
    jscope *is = NULL;
    /* Jinja runs the else block unless some iteration reached the end of the body: one that
     * ends in break or continue does not count */
    bool completed = false;
    for (size_t i = 0; i < items->n; i++) {
        jinja_step(c);
        /* a fresh scope per iteration; the previous one is reused unless a macro captured it */
        if (!is || is->captured) is = scope_new(c, s);
        else is->vars.n = 0;
        l->index0 = i;
        assign(c, is, n->d, items->v[i]);
        jscope_set(c, is, "loop", lv);
        flow f = exec_body(c, is, n->args);
        if (f == FLOW_BREAK) break;
        if (f == FLOW_NEXT) completed = true;
    }
    /* break/continue in the else block belong to the enclosing loop */
    if (!completed && n->kw.n) return exec_body(c, scope_new(c, s), n->kw);
    return FLOW_NEXT;
}

static flow exec_stmt(jctx *c, jscope *s, const jnode *n) {
    jinja_step(c);
    c->line = n->line;
    switch ((jnode_kind)n->kind) {
    case JN_TEXT: emit(c, n->val.s.p, n->val.s.n); return FLOW_NEXT;
    case JN_PRINT: emit_value(c, jinja_eval(c, s, n->a)); return FLOW_NEXT;
    case JN_IF:
        if (jv_truthy(jinja_eval(c, s, n->a))) return exec_body(c, s, n->args);
        return exec_body(c, s, n->kw);
    case JN_FOR: return exec_for(c, s, n);
    case JN_SET: assign(c, s, n->d, jinja_eval(c, s, n->a)); return FLOW_NEXT;
    case JN_SETBLOCK: { /* the body has a scope of its own, as filter and with blocks do */
        flow f;
        jv v = capture_flow(c, scope_new(c, s), n->args, &f);
        if (f != FLOW_NEXT) return f;
        if (n->a) v = eval_filter(c, s, n->a, v);
        assign(c, s, n->d, v);
        return FLOW_NEXT;
    }
    case JN_MACRO: case JN_CALLBLOCK: {
        jv m = {.type = JV_MACRO};
        m.m = jarena_alloc(&c->arena, sizeof *m.m);
        m.m->def = n;
        m.m->closure = s;
        s->captured = true;
        m.m->caller = jv_undef("caller");
        if (n->kind == JN_MACRO) {
            jscope_set(c, s, n->name, m);
            return FLOW_NEXT;
        }
        jv fn = jinja_eval(c, s, n->a->a);
        if (fn.type != JV_MACRO) jinja_error(c, MF_ERR_FORMAT, "{%% call %%} needs a macro, got '%s'", jv_type_name(fn));
        jargs a = eval_args(c, s, n->a);
        emit_value(c, call_macro(c, fn.m, a.args, a.n, a.kwn, a.kwv, a.nkw, m));
        return FLOW_NEXT;
    }
    case JN_FILTERBLOCK: {
        flow f;
        jv v = capture_flow(c, scope_new(c, s), n->args, &f);
        if (f != FLOW_NEXT) return f;
        emit_value(c, eval_filter(c, s, n->a, v));
        return FLOW_NEXT;
    }
    case JN_WITH: {
        jscope *ws = scope_new(c, s);
        for (int i = 0; i < n->kw.n; i++) jscope_set(c, ws, n->kw_names[i], jinja_eval(c, s, n->kw.v[i]));
        return exec_body(c, ws, n->args);
    }
    case JN_BREAK: return FLOW_BREAK;
    case JN_CONTINUE: return FLOW_CONTINUE;
    default: jinja_error(c, MF_ERR_INTERNAL, "node kind %d is not a statement", n->kind);
    }
}

static flow exec_body(jctx *c, jscope *s, jnodes body) {
    if (++c->depth > c->max_depth) jinja_error(c, MF_ERR_RANGE, "blocks nested deeper than %d levels", c->max_depth);
    for (int i = 0; i < body.n; i++) {
        flow f = exec_stmt(c, s, body.v[i]);
        if (f != FLOW_NEXT) {
            c->depth--;
            return f;
        }
    }
    c->depth--;
    return FLOW_NEXT;
}

void jinja_exec(jctx *c, jscope *root, jnodes body) {
    flow f = exec_body(c, root, body);
    if (f != FLOW_NEXT) jinja_error(c, MF_ERR_FORMAT, "'%s' outside of a for loop", f == FLOW_BREAK ? "break" : "continue");
}

jscope *jscope_new(jctx *c, jscope *parent) { return scope_new(c, parent); }
