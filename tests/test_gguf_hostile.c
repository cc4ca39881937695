/* test_gguf_hostile.c: the GGUF reader against hostile input. Handcrafted bad files, one per check,
 * each failing with its own message; every truncation of a small valid file; split-model mistakes
 * (files on disk); and 10,000 seeded random mutations of a real fixture's header, parsed from an
 * exactly-sized heap copy so the sanitizers see any read past the end. */
#include "gguf/gguf.h"
#include "core/core.h"
#include "test.h"

#include <stdint.h>
#include <unistd.h>

/* ---- a byte builder and a described GGUF file, serialized exactly as written ---- */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

typedef struct tkv {
    char key[1100];
    size_t key_len;
    uint32_t vtype;
    buf val; /* encoded value */
} tkv;

typedef struct tti {
    char name[300];
    size_t name_len;
    uint32_t n_dims;
    uint64_t ne[5];
    uint32_t type;
    uint64_t offset;
} tti;

typedef struct desc {
    char magic[4];
    uint32_t version;
    int n_kv, n_t;
    tkv kv[8];
    tti t[6];
    bool counts_override;
    uint64_t hdr_n_t, hdr_n_kv;
    uint32_t pad_align; /* padding written before the data section */
    size_t data_size;
} desc;

static tkv *add_kv(desc *d, const char *key, uint32_t vtype) {
    tkv *kv = &d->kv[d->n_kv++];
    memset(kv, 0, sizeof *kv);
    kv->key_len = strlen(key);
    memcpy(kv->key, key, kv->key_len);
    kv->vtype = vtype;
    return kv;
}

static void add_kv_u32(desc *d, const char *key, uint32_t v) { put_u32(&add_kv(d, key, MF_GGUF_UINT32)->val, v); }

static tti *add_t(desc *d, const char *name, uint32_t type, uint32_t n_dims, uint64_t ne0, uint64_t ne1, uint64_t off) {
    tti *t = &d->t[d->n_t++];
    memset(t, 0, sizeof *t);
    t->name_len = strlen(name);
    memcpy(t->name, name, t->name_len);
    t->type = type;
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->offset = off;
    return t;
}

/* The valid file every case starts from: 3 keys, an F32 [8, 2] tensor at 0 (64 bytes) and a Q8_0
 * [32] tensor at 64 (34 bytes), data section exactly 98 bytes (so any truncation cuts a tensor). */
static void default_desc(desc *d) {
    memset(d, 0, sizeof *d);
    memcpy(d->magic, "GGUF", 4);
    d->version = 3;
    put_str(&add_kv(d, "general.architecture", MF_GGUF_STRING)->val, "test");
    add_kv_u32(d, "general.alignment", 32);
    tkv *kv = add_kv(d, "tokenizer.ggml.tokens", MF_GGUF_ARRAY);
    put_u32(&kv->val, MF_GGUF_STRING);
    put_u64(&kv->val, 2);
    put_str(&kv->val, "a");
    put_str(&kv->val, "bc");
    add_t(d, "a", MF_TYPE_F32, 2, 8, 2, 0);
    add_t(d, "b", MF_TYPE_Q8_0, 1, 32, 1, 64);
    d->pad_align = 32;
    d->data_size = 98;
}

static void free_desc(desc *d) {
    for (size_t i = 0; i < MF_ARRAY_LEN(d->kv); i++) free(d->kv[i].val.p); /* cases may drop entries */
}

static buf serialize(const desc *d) {
    buf b = {0};
    put(&b, d->magic, 4);
    put_u32(&b, d->version);
    put_u64(&b, d->counts_override ? d->hdr_n_t : (uint64_t)d->n_t);
    put_u64(&b, d->counts_override ? d->hdr_n_kv : (uint64_t)d->n_kv);
    for (int i = 0; i < d->n_kv; i++) {
        put_u64(&b, d->kv[i].key_len);
        put(&b, d->kv[i].key, d->kv[i].key_len);
        put_u32(&b, d->kv[i].vtype);
        put(&b, d->kv[i].val.p, d->kv[i].val.n);
    }
    for (int i = 0; i < d->n_t; i++) {
        put_u64(&b, d->t[i].name_len);
        put(&b, d->t[i].name, d->t[i].name_len);
        put_u32(&b, d->t[i].n_dims);
        for (uint32_t k = 0; k < d->t[i].n_dims && k < 5; k++) put_u64(&b, d->t[i].ne[k]);
        put_u32(&b, d->t[i].type);
        put_u64(&b, d->t[i].offset);
    }
    uint8_t zero = 0;
    while (d->pad_align && b.n % d->pad_align) put(&b, &zero, 1);
    for (size_t i = 0; i < d->data_size; i++) {
        uint8_t v = (uint8_t)(i * 7 + 1);
        put(&b, &v, 1);
    }
    return b;
}

/* Parse from an exactly-sized heap copy (so ASan sees overreads). */
static mf_status open_bytes(const uint8_t *p, size_t n, mf_gguf **g) {
    uint8_t *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, p, n);
    mf_status s = mf_gguf_open_memory(n ? copy : NULL, n, "bad.gguf", g);
    if (s == MF_OK) {
        /* Keep the copy alive with the handle: the tests free both together. */
        for (int64_t i = 0; i < mf_gguf_n_tensors(*g); i++) {
            const mf_gguf_tensor *t = mf_gguf_tensor_at(*g, i);
            CHECK((const uint8_t *)t->data >= copy && (const uint8_t *)t->data + t->nbytes <= copy + n);
        }
        mf_gguf_free(*g);
        *g = NULL;
    }
    free(copy);
    return s;
}

/* ---- handcrafted bad files ---- */

static void c_zero_magic(desc *d) { d->n_kv = d->n_t = 0, d->data_size = 0, d->version = 0xdead, memcpy(d->magic, "\0\0\0\0", 4); }
static void c_magic(desc *d) { memcpy(d->magic, "GGML", 4); }
static void c_version1(desc *d) { d->version = 1; }
static void c_version4(desc *d) { d->version = 4; }
static void c_big_endian(desc *d) { d->version = 0x03000000; }
static void c_absurd_counts(desc *d) { d->counts_override = true, d->hdr_n_t = 2, d->hdr_n_kv = 1ull << 40; }
static void c_empty_key(desc *d) { d->kv[0].key_len = 0; }
static void c_long_key(desc *d) { memset(d->kv[0].key, 'k', 1025), d->kv[0].key_len = 1025; }
static void c_nul_key(desc *d) { d->kv[0].key[3] = 0; }
static void c_bad_vtype(desc *d) { d->kv[0].vtype = 13; }
static void c_bad_elem_type(desc *d) { d->kv[2].val.p[0] = 42; }
static void c_string_past_end(desc *d) { uint64_t big = 1u << 20; memcpy(d->kv[0].val.p, &big, 8); }
static void c_array_too_long(desc *d) { uint64_t n = 1ull << 60; memcpy(d->kv[2].val.p + 4, &n, 8); }
static void c_nesting(desc *d) {
    tkv *kv = add_kv(d, "deep", MF_GGUF_ARRAY);
    for (int i = 0; i < 10; i++) put_u32(&kv->val, MF_GGUF_ARRAY), put_u64(&kv->val, 1);
    put_u32(&kv->val, MF_GGUF_UINT8), put_u64(&kv->val, 0);
}
static void c_bool_value(desc *d) { uint8_t v = 2; put(&add_kv(d, "flag", MF_GGUF_BOOL)->val, &v, 1); }
static void c_bool_array(desc *d) {
    tkv *kv = add_kv(d, "flags", MF_GGUF_ARRAY);
    uint8_t v[3] = {0, 1, 7};
    put_u32(&kv->val, MF_GGUF_BOOL), put_u64(&kv->val, 3), put(&kv->val, v, 3);
}
static void c_dup_key(desc *d) { add_kv_u32(d, "general.alignment", 32); }
static void c_align_type(desc *d) { d->kv[1].vtype = MF_GGUF_UINT64, put_u32(&d->kv[1].val, 0); }
static void c_align_value(desc *d) { uint32_t a = 48; memcpy(d->kv[1].val.p, &a, 4); }
static void c_empty_name(desc *d) { d->t[1].name_len = 0; }
static void c_long_name(desc *d) { memset(d->t[1].name, 'n', 257), d->t[1].name_len = 257; }
static void c_n_dims0(desc *d) { d->t[1].n_dims = 0; }
static void c_n_dims5(desc *d) { d->t[1].n_dims = 5, d->t[1].ne[2] = d->t[1].ne[3] = d->t[1].ne[4] = 1; }
static void c_dim_zero(desc *d) { d->t[0].ne[1] = 0; }
static void c_dim_negative(desc *d) { d->t[0].ne[1] = (uint64_t)-3; }
static void c_elem_overflow(desc *d) { d->t[0].ne[0] = 1ull << 40, d->t[0].ne[1] = 1ull << 40; }
static void c_bytes_overflow(desc *d) { d->t[0].type = MF_TYPE_F64, d->t[0].ne[0] = 1ull << 62, d->t[0].ne[1] = 1; }
static void c_unknown_type(desc *d) { d->t[1].type = 99; }
static void c_gap_type(desc *d) { d->t[1].type = 4; /* Q4_2, removed from GGML: no format */ }
static void c_row_block(desc *d) { d->t[1].ne[0] = 33; }
static void c_offset_align(desc *d) { d->t[1].offset = 66; }
static void c_outside(desc *d) { d->t[1].offset = 96; }
static void c_offset_huge(desc *d) { d->t[1].offset = UINT64_MAX - 31; }
static void c_overlap(desc *d) { d->t[1].offset = 32; }
static void c_dup_name(desc *d) { d->t[1].name[0] = 'a'; }
static void c_no_data(desc *d) { d->pad_align = 0, d->data_size = 0; }
static void c_trunc_info(desc *d) { d->counts_override = true, d->hdr_n_t = 3, d->hdr_n_kv = 3, d->data_size = 0, d->pad_align = 0; }
static void c_split_type(desc *d) { put_str(&add_kv(d, "split.count", MF_GGUF_STRING)->val, "3"); }
static void c_split_zero(desc *d) { add_kv_u32(d, "split.count", 0); }
static void c_split_no(desc *d) { add_kv_u32(d, "split.count", 2), add_kv_u32(d, "split.no", 2); }
static void c_split_tensors(desc *d) { add_kv_u32(d, "split.tensors.count", 5); }

typedef struct bad_case {
    const char *name;
    void (*make)(desc *);
    mf_status status;
    const char *expect; /* substring of the message */
} bad_case;

static const bad_case cases[] = {
    {"zero magic", c_zero_magic, MF_ERR_FORMAT, "not a GGUF file"},
    {"magic", c_magic, MF_ERR_FORMAT, "magic at byte 0 is 47 47 4d 4c"},
    {"version 1", c_version1, MF_ERR_UNSUPPORTED, "GGUF version 1 at byte 4"},
    {"version 4", c_version4, MF_ERR_UNSUPPORTED, "GGUF version 4 at byte 4"},
    {"big-endian", c_big_endian, MF_ERR_UNSUPPORTED, "big-endian GGUF file"},
    {"absurd counts", c_absurd_counts, MF_ERR_FORMAT, "claims 2 tensors and 1099511627776 metadata entries"},
    {"empty key", c_empty_key, MF_ERR_FORMAT, "metadata entry 0 (at byte 24): key at byte 24 is empty"},
    {"long key", c_long_key, MF_ERR_FORMAT, "key at byte 24 is 1025 bytes long (limit 1024)"},
    {"NUL in key", c_nul_key, MF_ERR_FORMAT, "key at byte 24 contains a NUL byte"},
    {"value type", c_bad_vtype, MF_ERR_FORMAT, "key 'general.architecture' (at byte 24): value type id 13 at byte 52"},
    {"array element type", c_bad_elem_type, MF_ERR_FORMAT, "'tokenizer.ggml.tokens' (at byte 101): array element type id 42 at byte 134"},
    {"string past end", c_string_past_end, MF_ERR_FORMAT, "'general.architecture' (at byte 24): string value needs 1048576 bytes at byte 64"},
    {"array too long", c_array_too_long, MF_ERR_FORMAT, "array of 1152921504606846976 string elements at byte 134 does not fit"},
    {"nesting", c_nesting, MF_ERR_FORMAT, "key 'deep'"},
    {"bool value", c_bool_value, MF_ERR_FORMAT, "key 'flag'"},
    {"bool array", c_bool_array, MF_ERR_FORMAT, "bool array element 2"},
    {"duplicate key", c_dup_key, MF_ERR_FORMAT, "repeats the key of the entry at byte 68"},
    {"alignment type", c_align_type, MF_ERR_FORMAT, "'general.alignment' (at byte 68) has type uint64, expected uint32"},
    {"alignment value", c_align_value, MF_ERR_FORMAT, "'general.alignment' (at byte 68) is 48; it must be a power of two"},
    {"empty tensor name", c_empty_name, MF_ERR_FORMAT, "tensor info 1 (at byte"},
    {"long tensor name", c_long_name, MF_ERR_FORMAT, "is 257 bytes long (limit 256)"},
    {"n_dims 0", c_n_dims0, MF_ERR_FORMAT, "tensor 'b' (info at byte 206): n_dims is 0, outside 1..4"},
    {"n_dims 5", c_n_dims5, MF_ERR_FORMAT, "n_dims is 5, outside 1..4"},
    {"zero dimension", c_dim_zero, MF_ERR_FORMAT, "tensor 'a' (info at byte 165): dimension ne[1] is 0"},
    {"negative dimension", c_dim_negative, MF_ERR_FORMAT, "dimension ne[1] is -3"},
    {"element overflow", c_elem_overflow, MF_ERR_FORMAT, "element count overflows 64 bits at dimension ne[1]"},
    {"byte overflow", c_bytes_overflow, MF_ERR_FORMAT, "byte size of 4611686018427387904 x 1 x 1 x 1 F64 values overflows"},
    {"unknown type", c_unknown_type, MF_ERR_FORMAT, "type id 99 at byte"},
    {"type without format", c_gap_type, MF_ERR_FORMAT, "type id 4 at byte"},
    {"row not whole blocks", c_row_block, MF_ERR_FORMAT, "row length ne[0] = 33 is not a multiple of Q8_0's block size 32"},
    {"offset alignment", c_offset_align, MF_ERR_FORMAT, "data offset 66 is not a multiple of the alignment 32"},
    {"outside data", c_outside, MF_ERR_FORMAT, "data at offset 96, 34 bytes, lies outside the data section (98 bytes"},
    {"offset overflow", c_offset_huge, MF_ERR_FORMAT, "data at offset 18446744073709551584, 34 bytes, lies outside"},
    {"overlap", c_overlap, MF_ERR_FORMAT, "tensor 'b' (info at byte 206): data at offset 32 overlaps tensor 'a'"},
    {"duplicate tensor", c_dup_name, MF_ERR_FORMAT, "tensor 'a' (info at byte 206) repeats the name of the tensor at byte 165"},
    {"no data section", c_no_data, MF_ERR_FORMAT, "the data section would start at byte 256"},
    {"truncated tensor info", c_trunc_info, MF_ERR_FORMAT, "tensor info 2 (at byte 239): tensor name needs 8 bytes"},
    {"split.count type", c_split_type, MF_ERR_FORMAT, "key 'split.count' (at byte 165) must be a non-negative integer, found string"},
    {"split.count zero", c_split_zero, MF_ERR_FORMAT, "split.count is 0, outside 1..9999"},
    {"split.no range", c_split_no, MF_ERR_FORMAT, "split.no is 2 but split.count is 2"},
    {"split.tensors.count", c_split_tensors, MF_ERR_FORMAT, "split.tensors.count is 5 but the 1 part(s) hold 2 tensors"},
};

static void test_bad_cases(void) {
    static char msgs[MF_ARRAY_LEN(cases)][1024];
    desc d;
    default_desc(&d);
    buf good = serialize(&d);
    mf_gguf *g = NULL;
    CHECKF(open_bytes(good.p, good.n, &g) == MF_OK, "default file: %s", mf_last_error());
    free_desc(&d);
    free(good.p);
    /* Also valid: version 2 (same layout), and a metadata-only file that ends before the padding. */
    default_desc(&d);
    d.version = 2;
    good = serialize(&d);
    CHECKF(open_bytes(good.p, good.n, &g) == MF_OK, "version 2: %s", mf_last_error());
    free_desc(&d);
    free(good.p);
    default_desc(&d);
    d.n_t = 0, d.pad_align = 0, d.data_size = 0;
    good = serialize(&d);
    CHECKF(good.n % 32 != 0 && open_bytes(good.p, good.n, &g) == MF_OK, "no tensors: %s", mf_last_error());
    free_desc(&d);
    free(good.p);
    for (size_t i = 0; i < MF_ARRAY_LEN(cases); i++) {
        default_desc(&d);
        cases[i].make(&d);
        buf b = serialize(&d);
        mf_status s = open_bytes(b.p, b.n, &g);
        const char *msg = mf_last_error();
        CHECKF(s == cases[i].status && strstr(msg, cases[i].expect) && strstr(msg, "bad.gguf"),
               "case '%s': status %s, message '%s', expected '%s'", cases[i].name, mf_status_str(s), msg, cases[i].expect);
        snprintf(msgs[i], sizeof msgs[i], "%s", msg);
        for (size_t j = 0; j < i; j++) CHECKF(strcmp(msgs[i], msgs[j]) != 0, "cases %zu and %zu give one message", i, j);
        free(b.p);
        free_desc(&d);
    }
    printf("%zu handcrafted bad files rejected\n", MF_ARRAY_LEN(cases));
}

/* Every prefix of the valid file is rejected (the data section ends with the last tensor). */
static void test_truncations(void) {
    desc d;
    default_desc(&d);
    buf b = serialize(&d);
    mf_gguf *g = NULL;
    int rejected = 0;
    for (size_t n = 0; n < b.n; n++) {
        mf_status s = open_bytes(b.p, n, &g);
        CHECKF(s == MF_ERR_FORMAT, "prefix of %zu / %zu bytes: status %s", n, b.n, mf_status_str(s));
        rejected += s == MF_ERR_FORMAT;
    }
    CHECK(open_bytes(b.p, b.n, &g) == MF_OK);
    printf("%d of %zu truncations rejected\n", rejected, b.n);
    free(b.p);
    free_desc(&d);
}

/* ---- split models on disk ---- */

static char tmpdir[256];

static void write_file(const char *name, const buf *b) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK(fwrite(b->p, 1, b->n, f) == b->n);
    fclose(f);
}

static void write_part(const char *name, uint32_t no, uint32_t count, const char *tensor, uint32_t tcount) {
    desc d;
    default_desc(&d);
    add_kv_u32(&d, "split.no", no);
    add_kv_u32(&d, "split.count", count);
    if (tcount) add_kv_u32(&d, "split.tensors.count", tcount);
    if (tensor) d.t[1].name[0] = tensor[0]; /* rename 'b' so names stay unique across parts */
    d.t[0].name[0] = tensor ? (char)(tensor[0] + 1) : 'a';
    buf b = serialize(&d);
    write_file(name, &b);
    free(b.p);
    free_desc(&d);
}

static mf_status open_tmp(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    mf_gguf *g = NULL;
    mf_status s = mf_gguf_open(path, &g);
    if (s == MF_OK) {
        CHECK(mf_gguf_n_parts(g) == 2 && mf_gguf_n_tensors(g) == 4);
        CHECK(mf_gguf_find_tensor(g, "c") && mf_gguf_find_tensor(g, "c")->part == 1);
    }
    mf_gguf_free(g);
    return s;
}

static void expect_split(const char *name, mf_status want, const char *msg) {
    mf_status s = open_tmp(name);
    CHECKF(s == want && (!msg || strstr(mf_last_error(), msg)), "%s: status %s, message '%s', expected '%s'", name,
           mf_status_str(s), mf_last_error(), msg ? msg : "");
}

static void test_split_files(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/minfer-gguf-test-XXXXXX");
    CHECK(mkdtemp(tmpdir) != NULL);
    /* valid: part 1 holds a, b; part 2 holds c (renamed from b), d */
    write_part("ok-00001-of-00002.gguf", 0, 2, NULL, 4);
    write_part("ok-00002-of-00002.gguf", 1, 2, "c", 0);
    expect_split("ok-00001-of-00002.gguf", MF_OK, NULL);
    expect_split("ok-00002-of-00002.gguf", MF_ERR_ARG, "is part 2 of a 2-part split model; open part 1");
    /* part 1 under a name without the -00001-of-00002 tail */
    write_part("renamed.gguf", 0, 2, NULL, 4);
    expect_split("renamed.gguf", MF_ERR_FORMAT, "does not end in '-00001-of-00002.gguf'");
    /* missing part 2 */
    write_part("lonely-00001-of-00002.gguf", 0, 2, NULL, 4);
    expect_split("lonely-00001-of-00002.gguf", MF_ERR_IO, "lonely-00002-of-00002.gguf");
    /* part 2 says split.no 0 */
    write_part("no-00001-of-00002.gguf", 0, 2, NULL, 4);
    write_part("no-00002-of-00002.gguf", 0, 2, "c", 0);
    expect_split("no-00001-of-00002.gguf", MF_ERR_FORMAT, "expected split.no = 1 for part 2 of 2, found 0");
    /* part 2 disagrees on split.count */
    write_part("cnt-00001-of-00002.gguf", 0, 2, NULL, 4);
    write_part("cnt-00002-of-00002.gguf", 1, 3, "c", 0);
    expect_split("cnt-00001-of-00002.gguf", MF_ERR_FORMAT, "split.count is 3 but part 1 says 2");
    /* a tensor name repeated across parts */
    write_part("dup-00001-of-00002.gguf", 0, 2, NULL, 4);
    write_part("dup-00002-of-00002.gguf", 1, 2, "b", 0);
    expect_split("dup-00001-of-00002.gguf", MF_ERR_FORMAT, "(info at byte 257) repeats the name of the tensor at byte 292 of");
    /* split.tensors.count disagrees with the parts */
    write_part("tc-00001-of-00002.gguf", 0, 2, NULL, 7);
    write_part("tc-00002-of-00002.gguf", 1, 2, "c", 0);
    expect_split("tc-00001-of-00002.gguf", MF_ERR_FORMAT, "split.tensors.count is 7 but the 2 part(s) hold 4 tensors");
    /* a broken part 2 reports its own path */
    write_part("bad-00001-of-00002.gguf", 0, 2, NULL, 4);
    buf junk = {0};
    put(&junk, "GGUF\3\0\0\0", 8);
    write_file("bad-00002-of-00002.gguf", &junk);
    free(junk.p);
    expect_split("bad-00001-of-00002.gguf", MF_ERR_FORMAT, "bad-00002-of-00002.gguf: header: tensor count needs 8 bytes");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    CHECK(system(cmd) == 0);
}

/* ---- seeded random mutations of a real header ---- */

static uint64_t rng_state;
static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void test_mutations(void) {
    const char *path = fixture("models/mini-qwen3.Q4_0.gguf");
    FILE *f = fopen(path, "rb");
    CHECKF(f != NULL, "%s", path);
    if (!f) return;
    fseek(f, 0, SEEK_END);
    size_t size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *img = malloc(size);
    CHECK(fread(img, 1, size, f) == size);
    fclose(f);

    /* Structural offsets to aim at: every key, every tensor info, the data section start. */
    mf_gguf *g = NULL;
    CHECK(mf_gguf_open_memory(img, size, "mutant.gguf", &g) == MF_OK);
    if (!g) return;
    uint64_t targets[512];
    int nt = 0;
    targets[nt++] = 0;
    for (int64_t i = 0; i < mf_gguf_n_kv(g) && nt < 256; i++) targets[nt++] = mf_gguf_kv_at(g, i)->file_offset;
    for (int64_t i = 0; i < mf_gguf_n_tensors(g) && nt < 512; i++) targets[nt++] = mf_gguf_tensor_at(g, i)->info_offset;
    const mf_gguf_tensor *t0 = mf_gguf_tensor_at(g, 0);
    size_t header = (size_t)((const uint8_t *)t0->data - img); /* data section start (first tensor is at 0) */
    mf_gguf_free(g);

    static const uint64_t interesting[] = {0, 1, 2, 3, 4, 5, 8, 12, 13, 31, 32, 33, 255, 256, 4096, 0x7fffffff,
                                           0xffffffff, 0x100000000ull, 0x7fffffffffffffffull, 0xffffffffffffffffull};
    rng_state = 12345;
    int n_iter = 10000, ok = 0, rejected = 0;
    for (int it = 0; it < n_iter; it++) {
        size_t pos[8];
        uint8_t orig[8][8];
        int nm = 1 + (int)(rnd() % 4);
        for (int m = 0; m < nm; m++) {
            size_t p = rnd() % 2 ? (size_t)(targets[rnd() % (uint64_t)nt] + rnd() % 48) : (size_t)(rnd() % header);
            if (p + 8 > header) p = header - 8;
            pos[m] = p;
            memcpy(orig[m], img + p, 8);
            switch (rnd() % 4) {
            case 0: img[p] ^= (uint8_t)(1u << (rnd() % 8)); break;
            case 1: img[p] = (uint8_t)rnd(); break;
            case 2: { uint64_t v = interesting[rnd() % MF_ARRAY_LEN(interesting)]; memcpy(img + p, &v, 8); break; }
            default: { uint32_t v = (uint32_t)interesting[rnd() % MF_ARRAY_LEN(interesting)]; memcpy(img + p, &v, 4); break; }
            }
        }
        /* Sometimes also cut the file inside the header. */
        size_t n = rnd() % 8 == 0 ? (size_t)(rnd() % header) : size;
        uint8_t *copy = img; /* img is an exactly-sized allocation; cut files get their own */
        if (n < size) {
            copy = malloc(n ? n : 1);
            memcpy(copy, img, n);
        }
        mf_status s = mf_gguf_open_memory(copy, n, "mutant.gguf", &g);
        if (s == MF_OK) {
            ok++;
            for (int64_t i = 0; i < mf_gguf_n_tensors(g); i++) {
                const mf_gguf_tensor *t = mf_gguf_tensor_at(g, i);
                CHECK((const uint8_t *)t->data >= copy && (const uint8_t *)t->data + t->nbytes <= copy + n);
            }
            mf_gguf_free(g);
        } else {
            rejected++;
            CHECKF(s == MF_ERR_FORMAT || s == MF_ERR_UNSUPPORTED || s == MF_ERR_NOMEM, "status %s: %s",
                   mf_status_str(s), mf_last_error());
            CHECK(strstr(mf_last_error(), "mutant.gguf") != NULL);
        }
        if (copy != img) free(copy);
        for (int m = nm - 1; m >= 0; m--) memcpy(img + pos[m], orig[m], 8);
    }
    printf("%d mutations: %d still valid, %d rejected\n", n_iter, ok, rejected);
    CHECK(rejected > n_iter / 4);
    free(img);
}

int main(void) {
    test_bad_cases();
    test_truncations();
    test_split_files();
    test_mutations();
    return test_summary("test_gguf_hostile");
}
