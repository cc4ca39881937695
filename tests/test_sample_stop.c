/* test_sample_stop.c: the stop-string matcher: stop strings split across tokens, prefixes that turn
 * out not to stop, UTF-8 characters split across tokens, the earliest of several matches, flush,
 * and a randomized check against a direct search over the whole text. */
#include "sample/rng.h"
#include "sample/stop.h"
#include "test.h"

#include <string.h>

/* Feed pieces in order; collect the output and return the matched index (-1 none). */
static int run(mf_stop *m, const char *const *pieces, size_t n, char *out, size_t cap, size_t *steps_out) {
    size_t len = 0;
    int hit = -1;
    for (size_t i = 0; i < n && hit < 0; i++) {
        const char *o;
        size_t ol;
        CHECK(mf_stop_feed(m, pieces[i], strlen(pieces[i]), &o, &ol, &hit) == MF_OK);
        if (steps_out) steps_out[i] = ol;
        if (len + ol < cap) memcpy(out + len, o, ol), len += ol;
    }
    if (hit < 0) {
        const char *o;
        size_t ol;
        CHECK(mf_stop_flush(m, &o, &ol) == MF_OK);
        if (len + ol < cap) memcpy(out + len, o, ol), len += ol;
    }
    out[len] = 0;
    return hit;
}

static void test_split(void) {
    const char *stops[] = {"</s>"};
    mf_stop *m;
    CHECK(mf_stop_create(stops, 1, &m) == MF_OK);
    char out[256];
    size_t steps[8];
    const char *p1[] = {"Hel", "lo<", "/", "s>tail"};
    CHECK(run(m, p1, 4, out, sizeof out, steps) == 0);
    CHECK(strcmp(out, "Hello") == 0);
    CHECK(steps[0] == 3 && steps[1] == 2 && steps[2] == 0 && steps[3] == 0); /* "<" and "/" held */
    /* After a match nothing more comes out. */
    const char *o;
    size_t ol;
    int hit;
    CHECK(mf_stop_feed(m, "more", 4, &o, &ol, &hit) == MF_OK && ol == 0 && hit == -1);

    mf_stop_reset(m);
    const char *p2[] = {"a<", "/x", "y"}; /* looked like a stop, was not */
    CHECK(run(m, p2, 3, out, sizeof out, steps) == -1);
    CHECK(strcmp(out, "a</xy") == 0);
    CHECK(steps[0] == 1 && steps[1] == 3);

    mf_stop_reset(m);
    const char *p3[] = {"ab<"}; /* generation ends on a held prefix: flush returns it */
    CHECK(run(m, p3, 1, out, sizeof out, NULL) == -1);
    CHECK(strcmp(out, "ab<") == 0);

    mf_stop_reset(m);
    const char *p4[] = {"x</s>"}; /* a whole stop string inside one piece */
    CHECK(run(m, p4, 1, out, sizeof out, NULL) == 0 && strcmp(out, "x") == 0);

    mf_stop_reset(m);
    const char *p5[] = {"<", "<", "<", "/s", ">"}; /* the held prefix restarts */
    CHECK(run(m, p5, 5, out, sizeof out, steps) == 0 && strcmp(out, "<<") == 0);
    mf_stop_free(m);
}

static void test_utf8(void) {
    mf_stop *m;
    CHECK(mf_stop_create(NULL, 0, &m) == MF_OK); /* no stop strings: only UTF-8 holding */
    char out[256];
    size_t steps[8];
    const char *p1[] = {"caf\xC3", "\xA9!", "\xE2\x82", "\xAC", "\xF0\x9F\x98", "\x80"};
    CHECK(run(m, p1, 6, out, sizeof out, steps) == -1);
    CHECK(strcmp(out, "caf\xC3\xA9!\xE2\x82\xAC\xF0\x9F\x98\x80") == 0);
    CHECK(steps[0] == 3 && steps[1] == 3 && steps[2] == 0 && steps[3] == 3 && steps[4] == 0 && steps[5] == 4);
    mf_stop_reset(m);
    const char *p2[] = {"\x80\x80x", "\xFF"}; /* each invalid byte becomes U+FFFD */
    CHECK(run(m, p2, 2, out, sizeof out, steps) == -1 && steps[0] == 7 && steps[1] == 3);
    CHECK(strcmp(out, "\xEF\xBF\xBD\xEF\xBF\xBDx\xEF\xBF\xBD") == 0);
    mf_stop_reset(m);
    const char *p6[] = {"ab\xF0\x9F"}; /* cut off inside a character: the flush shows U+FFFD */
    CHECK(run(m, p6, 1, out, sizeof out, steps) == -1 && steps[0] == 2 && strcmp(out, "ab\xEF\xBF\xBD") == 0);
    mf_stop_reset(m);
    const char *p7[] = {"\xE0\x80\xAF", "\xED\xA0\x80"}; /* overlong form and surrogate are invalid */
    CHECK(run(m, p7, 2, out, sizeof out, steps) == -1 && steps[0] == 9 && steps[1] == 9);
    mf_stop_free(m);

    /* A stop string with a multibyte character, split inside the character (the parenthesized pieces are
     * one literal split where a hex escape ends, not a missing comma). */
    const char *stops[] = {"\xE3\x80\x82" "END"}; /* "。END" */
    CHECK(mf_stop_create(stops, 1, &m) == MF_OK);
    const char *p3[] = {"ok\xE3", "\x80", ("\x82" "E"), "ND more"};
    CHECK(run(m, p3, 4, out, sizeof out, steps) == 0 && strcmp(out, "ok") == 0);
    mf_stop_reset(m);
    const char *p4[] = {"ok\xE3", "\x80", ("\x82" "E"), "X"};
    CHECK(run(m, p4, 4, out, sizeof out, steps) == -1 && strcmp(out, "ok\xE3\x80\x82" "EX") == 0);
    mf_stop_free(m);
}

static void test_several(void) {
    const char *stops[] = {"bc", "abcd"};
    mf_stop *m;
    CHECK(mf_stop_create(stops, 2, &m) == MF_OK);
    char out[64];
    const char *p1[] = {"xa", "bcd"}; /* "bc" is complete before "abcd": it wins */
    CHECK(run(m, p1, 2, out, sizeof out, NULL) == 0 && strcmp(out, "xa") == 0);
    mf_stop_reset(m);
    const char *p2[] = {"xabcd"}; /* the same in one piece: the split does not matter */
    CHECK(run(m, p2, 1, out, sizeof out, NULL) == 0 && strcmp(out, "xa") == 0);
    mf_stop_free(m);
    const char *same[] = {"bc", "abc", "c"}; /* all end together: the earliest start */
    CHECK(mf_stop_create(same, 3, &m) == MF_OK);
    const char *p3[] = {"zabcd"};
    CHECK(run(m, p3, 1, out, sizeof out, NULL) == 1 && strcmp(out, "z") == 0);
    mf_stop_free(m);
    const char *empty[] = {"x", ""};
    CHECK(mf_stop_create(empty, 2, &m) == MF_ERR_ARG && m == NULL);
}

/* Random texts over a small alphabet, random splits: the output is the text up to the earliest
 * stop string (or all of it), and no intermediate output ever contains a stop string. */
static void test_random(void) {
    const char *stops[] = {"abab", "ba", "cca", "bbbbb"};
    size_t nst = 4;
    mf_rng r;
    mf_rng_seed(&r, 321);
    const char alpha[] = "abc";
    int fails = 0;
    for (int iter = 0; iter < 3000; iter++) {
        char text[64];
        size_t tl = 1 + mf_rng_next(&r) % 40;
        for (size_t i = 0; i < tl; i++) text[i] = alpha[mf_rng_next(&r) % 3];
        text[tl] = 0;
        size_t ns = 1 + mf_rng_next(&r) % nst;
        size_t best = tl;
        int want = -1;
        /* The first stop string to end, the earliest start among those ending together. */
        for (size_t end = 1; end <= tl && want < 0; end++)
            for (size_t i = 0; i < ns; i++) {
                size_t l = strlen(stops[i]);
                if (l <= end && end - l < best && !strncmp(text + end - l, stops[i], l)) best = end - l, want = (int)i;
            }
        mf_stop *m;
        CHECK(mf_stop_create(stops, ns, &m) == MF_OK);
        char out[64];
        size_t len = 0, at = 0;
        int hit = -1;
        while (at < tl && hit < 0) {
            size_t chunk = 1 + mf_rng_next(&r) % 5;
            if (chunk > tl - at) chunk = tl - at;
            const char *o;
            size_t ol;
            CHECK(mf_stop_feed(m, text + at, chunk, &o, &ol, &hit) == MF_OK);
            memcpy(out + len, o, ol), len += ol, at += chunk;
            out[len] = 0;
            for (size_t i = 0; i < ns; i++) fails += strstr(out, stops[i]) != NULL;
        }
        if (hit < 0) {
            const char *o;
            size_t ol;
            CHECK(mf_stop_flush(m, &o, &ol) == MF_OK);
            memcpy(out + len, o, ol), len += ol;
        }
        fails += hit != want || len != best || memcmp(out, text, len) != 0;
        mf_stop_free(m);
    }
    CHECKF(fails == 0, "%d random texts went wrong", fails);
}

static void test_misc(void) {
    CHECK(mf_stop_is_eog_text("<|im_end|>", 10));
    CHECK(mf_stop_is_eog_text("<|endoftext|>", 13));
    CHECK(!mf_stop_is_eog_text("<|im_start|>", 12));
    CHECK(!mf_stop_is_eog_text("<|im_end|", 9));
    CHECK(strcmp(mf_stop_reason_str(MF_STOP_STRING), "stop") == 0);
    CHECK(strcmp(mf_stop_reason_str(MF_STOP_LENGTH), "length") == 0);
    CHECK(strcmp(mf_stop_reason_str(MF_STOP_EOG), "eog") == 0);
    /* Large pieces grow the buffer. */
    const char *stops[] = {"END"};
    mf_stop *m;
    CHECK(mf_stop_create(stops, 1, &m) == MF_OK);
    static char big[10000];
    memset(big, 'q', sizeof big - 1);
    const char *o;
    size_t ol;
    int hit;
    CHECK(mf_stop_feed(m, big, sizeof big - 1, &o, &ol, &hit) == MF_OK && ol == sizeof big - 1 && hit == -1);
    CHECK(mf_stop_feed(m, "xxEN", 4, &o, &ol, &hit) == MF_OK && ol == 2 && hit == -1);
    CHECK(mf_stop_feed(m, "D", 1, &o, &ol, &hit) == MF_OK && ol == 0 && hit == 0);
    mf_stop_free(m);
    mf_stop_free(NULL);
}

int main(void) {
    test_split();
    test_utf8();
    test_several();
    test_random();
    test_misc();
    return test_summary("test_sample_stop");
}
