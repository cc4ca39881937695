/* test_hub.c: the pure parts of src/hub: references, repository ids and Ollama names (each bad
 * form refused), names from servers that would leave the cache folder, split parts, the
 * quantization in a file name, and which files of a listing a selector picks. The network side is
 * tested end to end against the mock servers (tests/py/test_hub*.py). */
#include "hub/hub_internal.h"
#include "test.h"

static void test_refs(void) {
    hub_ref r;
    CHECK(hub_ref_parse("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M", &r) == MF_OK && r.kind == HUB_REF_HF);
    CHECK(!strcmp(r.repo, "Qwen/Qwen2.5-0.5B-Instruct-GGUF") && !strcmp(r.sel, "Q4_K_M"));
    CHECK(hub_ref_parse("hf:org/repo", &r) == MF_OK && !r.sel[0]);
    CHECK(hub_ref_parse("hf:org/repo:sub/dir/x.gguf", &r) == MF_OK && !strcmp(r.sel, "sub/dir/x.gguf"));
    /* one bad form per check */
    const char *bad[] = {"hf:", "hf:repo", "hf:a/b/c", "hf:-a/b", "hf:a/b-", "hf:a/b..c", "hf:a--/b", "hf:a/b:",
                         "hf:a/b:../x.gguf", "hf:a/b:/etc/passwd", "hf:a/b:x/./y", "hf:a b/c", "ollama:", "ollama:a/b/c/d",
                         "ollama:../x", "ollama:x:", "ollama:x:a/b", "ollama:.x", "ollama:x y"};
    for (size_t i = 0; i < MF_ARRAY_LEN(bad); i++) CHECKF(hub_ref_parse(bad[i], &r) == MF_ERR_ARG, "%s", bad[i]);
    CHECK(hub_ref_parse("ollama:llama3.2", &r) == MF_OK && r.kind == HUB_REF_OLLAMA);
    CHECK(!strcmp(r.host, "registry.ollama.ai") && !strcmp(r.ns, "library") && !strcmp(r.model, "llama3.2") && !strcmp(r.tag, "latest"));
    CHECK(hub_ref_parse("ollama:qwen2.5:0.5b-instruct-q4_K_M", &r) == MF_OK && !strcmp(r.tag, "0.5b-instruct-q4_K_M"));
    CHECK(hub_ref_parse("ollama:me/mine:v1", &r) == MF_OK && !strcmp(r.ns, "me") && !strcmp(r.model, "mine"));
    CHECK(hub_ref_parse("ollama:hf.co/org/repo:Q8_0", &r) == MF_OK && !strcmp(r.host, "hf.co") && !strcmp(r.tag, "Q8_0"));
    CHECK(hub_ref_parse("models/x.gguf", &r) == MF_OK && r.kind == HUB_REF_PATH);
    /* revisions */
    CHECK(hub_ref_parse("hf:org/repo", &r) == MF_OK && !strcmp(r.rev, "main") && !r.rev_given);
    CHECK(hub_ref_parse("hf:org/repo@v1.0:Q4_K_M", &r) == MF_OK && !strcmp(r.repo, "org/repo") && !strcmp(r.rev, "v1.0") &&
          !strcmp(r.sel, "Q4_K_M") && r.rev_given);
    CHECK(hub_ref_parse("hf:org/repo@refs/pr/1", &r) == MF_OK && !strcmp(r.rev, "refs/pr/1") && !r.sel[0]);
    CHECK(hub_ref_parse("hf:org/repo:x@y.gguf", &r) == MF_OK && !strcmp(r.sel, "x@y.gguf") && !r.rev_given);
    const char *bad_rev[] = {"hf:org/repo@", "hf:org/repo@:Q4", "hf:org/repo@../x", "hf:org/repo@a b", "hf:org/repo@/x"};
    for (size_t i = 0; i < MF_ARRAY_LEN(bad_rev); i++) CHECKF(hub_ref_parse(bad_rev[i], &r) == MF_ERR_ARG, "%s", bad_rev[i]);
    /* repository ids as the Hub takes them */
    CHECK(hub_valid_repo_id("a-./b") == false && hub_valid_repo_id("a.-b/c_d") && hub_valid_repo_id("_x/y_") &&
          hub_valid_repo_id("Org.Name/Model_v1.5-GGUF") && !hub_valid_repo_id("a/b.git") && !hub_valid_repo_id("a/b--c"));
    /* Ollama names with a scheme and a host with a port */
    CHECK(hub_ref_parse("ollama:http://127.0.0.1:8080/mini", &r) == MF_OK && !strcmp(r.scheme, "http") &&
          !strcmp(r.host, "127.0.0.1:8080") && !strcmp(r.ns, "library") && !strcmp(r.model, "mini") && !strcmp(r.tag, "latest"));
    CHECK(hub_ref_parse("ollama:localhost:5000/me/mine:v2", &r) == MF_OK && !strcmp(r.scheme, "https") &&
          !strcmp(r.host, "localhost:5000") && !strcmp(r.ns, "me") && !strcmp(r.tag, "v2"));
    CHECK(hub_ref_parse("ollama:http://mini", &r) == MF_ERR_ARG);
}

static void test_paths(void) {
    CHECK(hub_safe_relpath("a.gguf") && hub_safe_relpath("Q4_K_M/a-00001-of-00002.gguf"));
    const char *bad[] = {"", "/a", "../a", "a/../b", "a/..", "./a", "a//b", "a/", "a\\b", "a\nb", ".."};
    for (size_t i = 0; i < MF_ARRAY_LEN(bad); i++) CHECKF(!hub_safe_relpath(bad[i]), "'%s'", bad[i]);
    CHECK(hub_is_hex("0123456789abcdefABCDEF0123456789abcdef01", 40) && !hub_is_hex("0123", 40) && !hub_is_hex("g", 1));
}

static void test_names(void) {
    uint32_t p, n;
    size_t base;
    CHECK(hub_split_part("m-Q8_0-00002-of-00003.gguf", &p, &n, &base) && p == 2 && n == 3 && base == 6);
    CHECK(!hub_split_part("m-Q8_0.gguf", &p, &n, &base) && p == 1 && n == 1 && base == 6);
    CHECK(!hub_split_part("m-00004-of-00003.gguf", &p, &n, NULL) && !hub_split_part("m-00000-of-00003.gguf", &p, &n, NULL));
    char q[32];
    hub_quant_of_name("Qwen2.5-0.5B-Instruct-Q4_K_M.gguf", q, sizeof q);
    CHECK(!strcmp(q, "Q4_K_M"));
    hub_quant_of_name("llama-2-7b.q4_k_s-00001-of-00002.gguf", q, sizeof q);
    CHECK(!strcmp(q, "Q4_K_S"));
    hub_quant_of_name("mini-qwen2.F16.gguf", q, sizeof q);
    CHECK(!strcmp(q, "F16"));
    hub_quant_of_name("model.gguf", q, sizeof q);
    CHECK(!q[0]);
    /* names as repositories write them: separators, case, folders, split parts, suffixes after the quantization */
    static const char *const named[][2] = {
        {"Llama-3.2-1B-Instruct-Q4_K_M.gguf", "Q4_K_M"}, {"qwen2.5-0.5b-instruct-q4_k_m.gguf", "Q4_K_M"},
        {"Meta-Llama-3.1-8B-Instruct.Q4_K_M.gguf", "Q4_K_M"}, {"model_Q4_K_M.gguf", "Q4_K_M"},
        {"Q4_K_M/Model-Q4_K_M-00001-of-00002.gguf", "Q4_K_M"}, {"DeepSeek-R1-UD-IQ1_S-00001-of-00003.gguf", "IQ1_S"},
        {"gemma-2-2b-it-IQ4_XS.gguf", "IQ4_XS"}, {"phi-2.Q5_K_S.gguf", "Q5_K_S"}, {"model-bf16.gguf", "BF16"},
        {"model-Q4_K_M-imat.gguf", "Q4_K_M"}, {"Qwen3-8B-UD-Q4_K_XL.gguf", "Q4_K_XL"}, {"m-Q4_0_4_4.gguf", "Q4_0_4_4"},
        {"mistral-7b-instruct-v0.2.Q8_0.gguf", "Q8_0"}, {"gpt-oss-20b-mxfp4.gguf", "MXFP4"}, {"BF16/x-00002-of-00002.gguf", "BF16"},
        {"noquantQ4_K_M.gguf", ""},
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(named); i++) {
        hub_quant_of_name(named[i][0], q, sizeof q);
        CHECKF(!strcmp(q, named[i][1]), "%s: '%s', not '%s'", named[i][0], q, named[i][1]);
    }
    CHECK(hub_valid_repo_id("a/b") && hub_valid_repo_id("bartowski/Llama-3.2-1B-Instruct-GGUF") && !hub_valid_repo_id("a/b/c"));
}

static void test_select(void) {
    hub_file f[] = {
        {.path = "README.md"},
        {.path = "m-Q4_K_M.gguf"},
        {.path = "m-Q4_K.gguf"},
        {.path = "m-Q8_0-00002-of-00002.gguf"},
        {.path = "m-Q8_0-00001-of-00002.gguf"},
        {.path = "mmproj-m-f16.gguf"},
        {.path = "sub/m.F16.gguf"},
    };
    const size_t nf = MF_ARRAY_LEN(f);
    for (size_t i = 0; i < nf; i++) hub_split_part(f[i].path, &f[i].part, &f[i].n_parts, NULL);
    size_t *idx, n;
    CHECK(hub_select(f, nf, "q4_k_m", "hf:o/r", &idx, &n) == MF_OK && n == 1 && idx[0] == 1);
    free(idx);
    CHECK(hub_select(f, nf, "Q4_K", "hf:o/r", &idx, &n) == MF_OK && n == 1 && idx[0] == 2);
    free(idx);
    CHECK(hub_select(f, nf, "Q8_0", "hf:o/r", &idx, &n) == MF_OK && n == 2 && idx[0] == 4 && idx[1] == 3);
    free(idx);
    CHECK(hub_select(f, nf, "m-Q8_0-00002-of-00002.gguf", "hf:o/r", &idx, &n) == MF_OK && n == 2 && idx[0] == 4);
    free(idx);
    CHECK(hub_select(f, nf, "sub/m.F16.gguf", "hf:o/r", &idx, &n) == MF_OK && n == 1 && idx[0] == 6);
    free(idx);
    CHECK(hub_select(f, nf, "f16", "hf:o/r", &idx, &n) == MF_OK && n == 1 && idx[0] == 6); /* not the mmproj */
    free(idx);
    CHECK(hub_select(f, nf, "Q2_K", "hf:o/r", &idx, &n) == MF_ERR_NOT_FOUND && strstr(mf_last_error(), "hf:o/r:Q4_K_M"));
    CHECK(hub_select(f, nf, "", "hf:o/r", &idx, &n) == MF_ERR_NOT_FOUND && strstr(mf_last_error(), "4 GGUF models"));
    CHECK(hub_select(f, 3, "", "hf:o/r", &idx, &n) == MF_ERR_NOT_FOUND); /* two models */
    CHECK(hub_select(f, 2, "", "hf:o/r", &idx, &n) == MF_OK && n == 1 && idx[0] == 1);
    free(idx);
    CHECK(hub_select(f, 4, "Q8_0", "hf:o/r", &idx, &n) == MF_ERR_NOT_FOUND && strstr(mf_last_error(), "part 1 of 2"));
}

static void test_server_answers(void) {
    /* the tree API: one check per refusal */
    const char *bad_trees[] = {
        "{}",
        "[{\"type\":\"file\",\"path\":\"../x.gguf\",\"oid\":\"0000000000000000000000000000000000000000\",\"size\":1}]",
        "[{\"type\":\"file\",\"path\":\"/x.gguf\",\"oid\":\"0000000000000000000000000000000000000000\",\"size\":1}]",
        "[{\"type\":\"file\",\"oid\":\"0000000000000000000000000000000000000000\",\"size\":1}]",
        "[{\"type\":\"file\",\"path\":\"x.gguf\",\"oid\":\"00\",\"size\":1}]",
        "[{\"type\":\"file\",\"path\":\"x.gguf\",\"oid\":\"0000000000000000000000000000000000000000\",\"size\":-1}]",
        "[{\"type\":\"file\",\"path\":\"x.gguf\",\"lfs\":{\"oid\":\"0000000000000000000000000000000000000000\",\"size\":1}}]",
        "[1",
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(bad_trees); i++) {
        hub_file *f = NULL;
        size_t n = 0, cap = 0;
        CHECKF(hub_hf_parse_tree(bad_trees[i], strlen(bad_trees[i]), "t", &f, &n, &cap) == MF_ERR_FORMAT, "%s", bad_trees[i]);
        hub_files_free(f, n);
    }
    const char *good = "[{\"type\":\"directory\",\"path\":\"d\"},{\"type\":\"file\",\"path\":\"d/m-Q4_0.gguf\",\"oid\":\"0000000000000000000000000000000000000000\",\"size\":7,"
                       "\"lfs\":{\"oid\":\"ABCDEF0000000000000000000000000000000000000000000000000000000000\",\"size\":9}}]";
    hub_file *f = NULL;
    size_t n = 0, cap = 0;
    CHECK(hub_hf_parse_tree(good, strlen(good), "t", &f, &n, &cap) == MF_OK && n == 2 && f[0].dir && !f[1].dir && f[1].known &&
          f[1].size == 9 && !strncmp(f[1].oid, "abcdef", 6));
    hub_files_free(f, n);
    /* a file without digest or size is kept, unknown (a HEAD of it tells them) */
    const char *bare = "[{\"type\":\"file\",\"path\":\"m.gguf\"},{\"type\":\"file\",\"path\":\"x.gguf\",\"size\":3}]";
    f = NULL, n = 0, cap = 0;
    CHECK(hub_hf_parse_tree(bare, strlen(bare), "t", &f, &n, &cap) == MF_OK && n == 2 && !f[0].known && !f[0].oid && !f[1].known);
    hub_files_free(f, n);

    /* headers as servers write them: any case, W/ and quotes, Link rel=next unquoted or relative */
    const char *lines[] = {"HTTP/1.1 302 Found\r\n", "x-linked-etag: W/\"ABC\"\r\n", "x-linked-size:  42\r\n",
                           "location: /cdn/x?sig=1\r\n", "HTTP/1.1 200 OK\r\n", "etag: \"e1\"\r\n",
                           "LINK: <https://h/p?c=1>; rel=\"prev\", </api/t?cursor=2>; rel=next\r\n"};
    hub_headers hd;
    hub_headers_reset(&hd);
    for (size_t i = 0; i < MF_ARRAY_LEN(lines); i++) {
        char buf[200];
        snprintf(buf, sizeof buf, "%s", lines[i]);
        hub_header_cb(buf, 1, strlen(buf), &hd);
        if (i == 3) CHECK(!strcmp(hd.location, "/cdn/x?sig=1") && hd.status == 302);
    }
    CHECK(hd.status == 200 && hd.n_responses == 2 && !strcmp(hd.linked_etag, "ABC") && hd.linked_size == 42 &&
          !strcmp(hd.etag, "e1") && !hd.location[0]);
    CHECKF(!strcmp(hd.link_next, "/api/t?cursor=2"), "%s", hd.link_next);
    char *j = hub_url_join("http://127.0.0.1:5/api/models/a/b/tree/main?recursive=true", hd.link_next);
    CHECKF(j && !strcmp(j, "http://127.0.0.1:5/api/t?cursor=2"), "%s", j ? j : "(null)");
    free(j);

    /* Ollama manifests */
    const char *d = "sha256:0123456789012345678901234567890123456789012345678901234567890123";
    char good_m[600], bad_m[4][600];
    snprintf(good_m, sizeof good_m, "{\"schemaVersion\":2,\"config\":{\"digest\":\"%s\",\"size\":2},\"layers\":[{\"mediaType\":"
             "\"application/vnd.ollama.image.model\",\"digest\":\"%s\",\"size\":5}]}", d, d);
    snprintf(bad_m[0], 600, "{\"schemaVersion\":1,\"config\":{\"digest\":\"%s\",\"size\":2},\"layers\":[]}", d);
    snprintf(bad_m[1], 600, "{\"schemaVersion\":2,\"config\":{\"digest\":\"%s\",\"size\":2},\"layers\":[]}", d); /* no model */
    snprintf(bad_m[2], 600, "{\"schemaVersion\":2,\"config\":{\"digest\":\"sha256:../../x\",\"size\":2},\"layers\":[]}");
    snprintf(bad_m[3], 600, "{\"schemaVersion\":2,\"config\":{\"digest\":\"%s\",\"size\":\"2\"},\"layers\":[]}", d);
    hub_layer ls[HUB_MAX_LAYERS];
    int nl, model;
    CHECK(hub_ollama_parse_manifest(good_m, strlen(good_m), "m", ls, &nl, &model) == MF_OK && nl == 2 && model == 1 && ls[1].size == 5);
    for (int i = 0; i < 4; i++) CHECKF(hub_ollama_parse_manifest(bad_m[i], strlen(bad_m[i]), "m", ls, &nl, &model) == MF_ERR_FORMAT, "%d", i);

    /* Content-Range */
    uint64_t a, b, t;
    CHECK(hub_parse_content_range("bytes 5-9/10", &a, &b, &t) && a == 5 && b == 9 && t == 10);
    CHECK(hub_parse_content_range("Bytes 0-0/1", &a, &b, &t) && a == 0 && b == 0 && t == 1);
    const char *bad_cr[] = {"bytes 5-10/10", "bytes 9-5/10", "bytes -1-5/10", "bytes 0-5/*", "bytes 0-5/10 ", "items 0-5/10",
                            "bytes +0-5/10", "bytes 0--5/10", ""};
    for (size_t i = 0; i < MF_ARRAY_LEN(bad_cr); i++) CHECKF(!hub_parse_content_range(bad_cr[i], &a, &b, &t), "'%s'", bad_cr[i]);

    /* the state file of a partial download */
    const char *dg = "0123456789012345678901234567890123456789012345678901234567890123";
    static uint64_t done[4096];
    uint64_t chunk;
    uint32_t nc;
    char st[400];
    snprintf(st, sizeof st, "minfer-partial 1\nsize 10\ndigest %s\nchunk 4\ndone 4 1 0\n", dg);
    CHECK(hub_parse_state(st, strlen(st), 10, dg, &chunk, done, &nc) && chunk == 4 && nc == 3 && done[0] == 4 && done[1] == 1);
    const char *bad_st[] = {"size 11", "chunk 0", "chunk 11", "done 5 0 0", "done 4 1", "done 4 1 0 0", "done 4 1 3",
                            "done 4 -1 0", "digest ff"};
    for (size_t i = 0; i < MF_ARRAY_LEN(bad_st); i++) {
        char size_l[16] = "size 10", digest_l[80], chunk_l[16] = "chunk 4", done_l[32] = "done 4 1 0";
        snprintf(digest_l, sizeof digest_l, "digest %s", dg);
        char *which = !strncmp(bad_st[i], "size", 4) ? size_l : !strncmp(bad_st[i], "chunk", 5) ? chunk_l
                      : !strncmp(bad_st[i], "done", 4) ? done_l : digest_l;
        snprintf(which, 16, "%s", bad_st[i]);
        snprintf(st, sizeof st, "minfer-partial 1\n%s\n%s\n%s\n%s\n", size_l, digest_l, chunk_l, done_l);
        CHECKF(!hub_parse_state(st, strlen(st), 10, dg, &chunk, done, &nc), "%s", bad_st[i]);
    }
}

int main(void) {
    test_refs();
    test_paths();
    test_names();
    test_select();
    test_server_answers();
    printf("test_hub: %d checks, %d failed\n", test_checks, test_failures);
    return test_failures ? 1 : 0;
}
