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

int main(void) {
    test_refs();
    test_paths();
    test_names();
    test_select();
    printf("test_hub: %d checks, %d failed\n", test_checks, test_failures);
    return test_failures ? 1 : 0;
}
