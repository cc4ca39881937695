/* jinja_tests.c: Jinja's built-in tests (`x is defined`, `n is divisibleby 3`, ...) with the
 * answers jinja2 gives for Python values: bools are numbers but not integers, Undefined is a
 * sequence and callable, lower/upper look at str(value). */
#include "chat/jinja.h"

#include <math.h>


static bool is_num(jv v) { return v.type == JV_BOOL || v.type == JV_INT || v.type == JV_FLOAT; }
static double num_f(jv v) { return v.type == JV_FLOAT ? v.f : v.type == JV_INT ? (double)v.i : (double)v.b; }

#define TARGS jctx *c, jv v, jv *args, int nargs
#define TUNUSED (void)c, (void)args, (void)nargs
static jv targ(jctx *c, jv *args, int nargs, const char *test) {
    if (nargs < 1) jinja_error(c, MF_ERR_FORMAT, "test '%s' needs an argument", test);
    return args[0];
}
static bool t_defined(TARGS) { TUNUSED; return v.type != JV_UNDEF; }
static bool t_undefined(TARGS) { TUNUSED; return v.type == JV_UNDEF; }
static bool t_none(TARGS) { TUNUSED; return v.type == JV_NONE; }
static bool t_string(TARGS) { TUNUSED; return v.type == JV_STR; }
static bool t_mapping(TARGS) { TUNUSED; return v.type == JV_DICT; }
static bool t_iterable(TARGS) { TUNUSED; return v.type == JV_STR || v.type == JV_LIST || v.type == JV_DICT || v.type == JV_UNDEF; }
static bool t_sequence(TARGS) { /* Undefined has __len__ and __getitem__, so it passes */
    TUNUSED;
    return v.type == JV_STR || (v.type == JV_LIST && !(v.flags & JV_GEN)) || v.type == JV_DICT || v.type == JV_UNDEF;
}
static bool t_number(TARGS) { TUNUSED; return is_num(v); }
static bool t_integer(TARGS) { TUNUSED; return v.type == JV_INT; }
static bool t_float(TARGS) { TUNUSED; return v.type == JV_FLOAT; }
static bool t_boolean(TARGS) { TUNUSED; return v.type == JV_BOOL; }
static bool t_true(TARGS) { TUNUSED; return v.type == JV_BOOL && v.b; }
static bool t_false(TARGS) { TUNUSED; return v.type == JV_BOOL && !v.b; }
static bool t_callable(TARGS) { TUNUSED; return v.type == JV_MACRO || v.type == JV_FUNC || v.type == JV_METHOD || v.type == JV_UNDEF; }
static bool t_eq(TARGS) { return jv_equal(v, targ(c, args, nargs, "eq")); }
static bool t_ne(TARGS) { return !jv_equal(v, targ(c, args, nargs, "ne")); }
static bool t_lt(TARGS) { return jv_compare(c, v, targ(c, args, nargs, "lt")) < 0; }
static bool t_le(TARGS) { return jv_compare(c, v, targ(c, args, nargs, "le")) <= 0; }
static bool t_gt(TARGS) { return jv_compare(c, v, targ(c, args, nargs, "gt")) > 0; }
static bool t_ge(TARGS) { return jv_compare(c, v, targ(c, args, nargs, "ge")) >= 0; }
static bool t_sameas(TARGS) {
    jv o = targ(c, args, nargs, "sameas");
    if (v.type != o.type) return false;
    if (v.type == JV_NONE || v.type == JV_UNDEF) return true;
    if (v.type == JV_BOOL) return v.b == o.b;
    return jv_equal(v, o) && (v.type == JV_INT || (v.type == JV_LIST ? v.l == o.l : v.type == JV_DICT ? v.d == o.d : v.s.p == o.s.p));
}
static bool t_in(TARGS) {
    jv o = targ(c, args, nargs, "in");
    if (o.type == JV_STR && v.type == JV_STR) return v.s.n == 0 || memmem(o.s.p, o.s.n, v.s.p, v.s.n);
    if (o.type == JV_LIST) {
        for (size_t i = 0; i < o.l->n; i++)
            if (jv_equal(o.l->v[i], v)) return true;
        return false;
    }
    if (o.type == JV_DICT) return jv_dict_get(o.d, v) != NULL;
    jinja_error(c, MF_ERR_FORMAT, "test 'in': '%s' is not a container", jv_type_name(o));
}
static bool t_divisibleby(TARGS) {
    jv d = targ(c, args, nargs, "divisibleby");
    if (v.type == JV_INT && d.type == JV_INT) return d.i != 0 && (d.i == -1 || v.i % d.i == 0);
    if (!is_num(v) || !is_num(d) || num_f(d) == 0) jinja_error(c, MF_ERR_FORMAT, "divisibleby: needs nonzero numbers");
    return fmod(num_f(v), num_f(d)) == 0;
}
/* odd/even: value % 2 == 1 / == 0 with Python's modulo, so 2.5 is neither */
static double py_mod2(jctx *c, jv v, const char *test) {
    if (!is_num(v)) jinja_error(c, MF_ERR_FORMAT, "test '%s' needs a number, got '%s'", test, jv_type_name(v));
    if (v.type != JV_FLOAT) return (double)((v.type == JV_INT ? v.i : v.b) & 1);
    double m = fmod(v.f, 2.0);
    return m < 0 ? m + 2.0 : m;
}
static bool t_odd(TARGS) { TUNUSED; return py_mod2(c, v, "odd") == 1.0; }
static bool t_even(TARGS) { TUNUSED; return py_mod2(c, v, "even") == 0.0; }
/* lower/upper: str(value).islower() / .isupper(): some cased letter, none of the other case */
static bool t_lower(TARGS) {
    TUNUSED;
    jv s = jv_to_str(c, v), l = jinja_str_lower(c, s), u = jinja_str_upper(c, s);
    return jv_equal(l, s) && !jv_equal(u, s);
}
static bool t_upper(TARGS) {
    TUNUSED;
    jv s = jv_to_str(c, v), l = jinja_str_lower(c, s), u = jinja_str_upper(c, s);
    return jv_equal(u, s) && !jv_equal(l, s);
}
static bool t_escaped(TARGS) { TUNUSED; (void)v; return false; }
static bool t_filter(TARGS) {
    TUNUSED;
    return v.type == JV_STR && jinja_find_filter(jarena_strndup(&c->arena, v.s.p, v.s.n)) != NULL;
}
static bool t_test(TARGS) {
    TUNUSED;
    return v.type == JV_STR && jinja_find_test(jarena_strndup(&c->arena, v.s.p, v.s.n)) != NULL;
}

typedef struct { const char *name; jtest_fn fn; } test_ent;
static const test_ent tests[] = {
    {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none}, {"string", t_string},
    {"mapping", t_mapping}, {"iterable", t_iterable}, {"sequence", t_sequence}, {"number", t_number},
    {"integer", t_integer}, {"float", t_float}, {"boolean", t_boolean}, {"true", t_true}, {"false", t_false},
    {"callable", t_callable}, {"eq", t_eq}, {"equalto", t_eq}, {"ne", t_ne}, {"lt", t_lt}, {"lessthan", t_lt},
    {"le", t_le}, {"gt", t_gt}, {"greaterthan", t_gt}, {"ge", t_ge}, {"sameas", t_sameas}, {"in", t_in},
    {"divisibleby", t_divisibleby}, {"odd", t_odd}, {"even", t_even}, {"lower", t_lower}, {"upper", t_upper},
    {"escaped", t_escaped}, {"filter", t_filter}, {"test", t_test},
};

jtest_fn jinja_find_test(const char *name) {
    for (size_t i = 0; i < MF_ARRAY_LEN(tests); i++)
        if (!strcmp(tests[i].name, name)) return tests[i].fn;
    return NULL;
}
