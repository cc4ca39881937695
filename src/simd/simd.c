/* simd.c: CPU feature detection, the MINFER_ISA override and kernel dispatch. Each level's table is
 * filled once (pthread_once) by the per-instruction-set files; where a level has no kernel for a
 * type, the reference twin from the type-traits table is used. */
#include "simd/simd_kernels.h"
#include "core/core.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

static mf_cpu_features features;
static mf_simd_table tables[MF_SIMD_LEVEL_COUNT];
static bool supported[MF_SIMD_LEVEL_COUNT];
static mf_simd_level active = MF_SIMD_SCALAR;
static bool avxvnni_on, avx512_narrow;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static const char *const level_names[MF_SIMD_LEVEL_COUNT] = {"scalar", "avx2", "avx512", "neon"};

#if defined(__x86_64__)
/* XCR0: which register states the OS saves on context switch (bits 1-2: xmm/ymm, 5-7: AVX-512). */
static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}
#endif

/* CPUID leaves 1 and 7 plus the OS-enabled register state: the same test on every compiler (the
 * __builtin_cpu_supports names vary between GCC and Clang versions). */
static void detect(void) {
#if defined(__x86_64__)
    unsigned a, b, c, d, b7 = 0, c7 = 0, a71 = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) c = 0;
    const bool osxsave = c & (1u << 27);
    const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
    const bool ymm = (c & (1u << 28)) && (xcr0 & 0x6) == 0x6, zmm = ymm && (xcr0 & 0xe0) == 0xe0;
    features.fma = ymm && (c & (1u << 12));
    features.f16c = ymm && (c & (1u << 29));
    unsigned x, y;
    if (__get_cpuid_count(7, 0, &a, &b7, &c7, &d) && a >= 1) __get_cpuid_count(7, 1, &a71, &x, &y, &d);
    features.avx2 = ymm && (b7 & (1u << 5));
    features.bmi2 = b7 & (1u << 8);
    features.avx512f = zmm && (b7 & (1u << 16));
    features.avx512dq = zmm && (b7 & (1u << 17));
    features.avx512bw = zmm && (b7 & (1u << 30));
    features.avx512vl = zmm && (b7 & (1u << 31));
    features.avx512vnni = zmm && (c7 & (1u << 11));
    features.avxvnni = ymm && (a71 & (1u << 4));
    features.avx512bf16 = zmm && (a71 & (1u << 5));
    /* The kernel files are compiled with exactly these extensions (see CMakeLists.txt), so the
     * compiler may use any of them anywhere in those files. */
    supported[MF_SIMD_AVX2] = features.avx2 && features.fma && features.f16c && features.bmi2;
    supported[MF_SIMD_AVX512] = supported[MF_SIMD_AVX2] && features.avx512f && features.avx512bw &&
                                features.avx512dq && features.avx512vl && features.avx512vnni;
#elif defined(__aarch64__) && defined(__linux__)
    /* the NEON file is built with +dotprod+fp16, so it needs both (asimddp, asimdhp) */
    const unsigned long hw = getauxval(AT_HWCAP);
    features.neon = true;
    features.dotprod = (hw & HWCAP_ASIMDDP) != 0;
    supported[MF_SIMD_NEON] = features.dotprod && (hw & HWCAP_ASIMDHP) && (hw & HWCAP_FPHP);
#endif
    supported[MF_SIMD_SCALAR] = true;
}

static void register_level(mf_simd_level level) {
    mf_simd_table *t = &tables[level];
#if defined(__x86_64__)
    /* AVX-512 CPUs run the AVX2 kernels too: that level starts from them and replaces those it has. */
    if (level == MF_SIMD_AVX2 || level == MF_SIMD_AVX512) {
        mf_simd_register_avx2(t);
        mf_simd_register_avx2_k(t);
        mf_simd_register_avx2_iq4(t);
        mf_simd_register_avx2_act(t);
        mf_simd_register_avx2_float(t);
    }
    if (level == MF_SIMD_AVX512) {
        mf_simd_register_avx512(t);
        mf_simd_register_avx512_k(t);
        mf_simd_register_avx512_float(t);
        mf_simd_register_avx512_act(t);
    }
#elif defined(__aarch64__)
    if (level == MF_SIMD_NEON) mf_simd_register_neon(t);
#else
    (void)t;
#endif
}

static void init(void) {
    detect();
    for (int l = 1; l < MF_SIMD_LEVEL_COUNT; l++) {
        if (!supported[l]) continue;
        register_level((mf_simd_level)l);
        /* a level's tile function must be built on its own dot (the reference tiles are not) */
        for (int t = 0; t < MF_TYPE_COUNT; t++) MF_ASSERT(!tables[l].vec_dot[t] || tables[l].gemm[t]);
    }
    for (int l = MF_SIMD_LEVEL_COUNT - 1; l >= 0; l--) {
        if (supported[l]) {
            active = (mf_simd_level)l;
            break;
        }
    }
    const char *e = getenv("MINFER_AVXVNNI");
    avxvnni_on = supported[MF_SIMD_AVX2] && features.avxvnni && !(e && !strcmp(e, "0"));
#if defined(__x86_64__)
    /* AMD family 19h (Zen 4) runs each 512-bit operation as two 256-bit halves */
    unsigned a, b, c, d;
    char vendor[13] = {0};
    if (supported[MF_SIMD_AVX512] && __get_cpuid(0, &a, &b, &c, &d)) {
        memcpy(vendor, &b, 4), memcpy(vendor + 4, &d, 4), memcpy(vendor + 8, &c, 4);
        if (!strcmp(vendor, "AuthenticAMD") && __get_cpuid(1, &a, &b, &c, &d)) {
            const unsigned family = ((a >> 8) & 0xF) + (((a >> 8) & 0xF) == 0xF ? (a >> 20) & 0xFF : 0);
            avx512_narrow = family == 0x19;
        }
    }
    e = getenv("MINFER_AVX512_FLOAT");
    if (e && !strcmp(e, "avx512")) avx512_narrow = false;
    if (e && !strcmp(e, "avx2") && supported[MF_SIMD_AVX512]) avx512_narrow = true;
#endif
}

static void ensure_init(void) { pthread_once(&init_once, init); }


const mf_cpu_features *mf_simd_cpu_features(void) {
    ensure_init();
    return &features;
}

const char *mf_simd_level_name(mf_simd_level level) {
    return (unsigned)level < MF_SIMD_LEVEL_COUNT ? level_names[level] : "unknown";
}

bool mf_simd_level_supported(mf_simd_level level) {
    ensure_init();
    return (unsigned)level < MF_SIMD_LEVEL_COUNT && supported[level];
}

mf_simd_level mf_simd_best_level(void) {
    ensure_init();
    return active;
}

bool mf_simd_avxvnni(void) {
    ensure_init();
    return avxvnni_on;
}

bool mf_simd_avx512_narrow(void) {
    ensure_init();
    return avx512_narrow;
}

/* ---- the public view (minfer.h): mf_isa is mf_simd_level + 1, 0 being AUTO ---- */

_Static_assert(MF_ISA_SCALAR == MF_SIMD_SCALAR + 1 && MF_ISA_AVX2 == MF_SIMD_AVX2 + 1 &&
                   MF_ISA_AVX512 == MF_SIMD_AVX512 + 1 && MF_ISA_NEON == MF_SIMD_NEON + 1,
               "mf_isa follows mf_simd_level");

const char *mf_isa_name(mf_isa isa) {
    return isa == MF_ISA_AUTO ? "auto" : (unsigned)isa < MF_ISA_COUNT ? level_names[isa - 1] : "unknown";
}

mf_status mf_isa_from_name(const char *name, mf_isa *out) {
    for (int i = 0; name && i < MF_ISA_COUNT; i++)
        if (!strcasecmp(name, mf_isa_name((mf_isa)i))) return *out = (mf_isa)i, MF_OK;
    return mf_fail(MF_ERR_ARG, "instruction set '%s': use auto, scalar, avx2, avx512 or neon", name ? name : "(null)");
}

bool mf_isa_supported(mf_isa isa) {
    return isa == MF_ISA_AUTO || ((unsigned)isa < MF_ISA_COUNT && mf_simd_level_supported((mf_simd_level)(isa - 1)));
}

mf_isa mf_isa_resolve(mf_isa isa) {
    ensure_init();
    if (isa != MF_ISA_AUTO && mf_isa_supported(isa)) return isa;
    for (int l = MF_SIMD_LEVEL_COUNT - 1; l >= 0; l--)
        if (supported[l]) return (mf_isa)(l + 1);
    return MF_ISA_SCALAR;
}

const char *mf_isa_kernels_name(mf_isa isa) {
    switch (mf_isa_resolve(isa)) {
    case MF_ISA_AVX512: return "avx512-vnni";
    case MF_ISA_AVX2: return avxvnni_on ? "avx2-vnni" : "avx2";
    case MF_ISA_NEON: return "neon-dotprod";
    default: return "scalar";
    }
}

static char cpu_name[128];
static pthread_once_t cpu_name_once = PTHREAD_ONCE_INIT;

static void read_cpu_name(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        /* x86: "model name : ..."; arm64 kernels may give "Hardware" or nothing */
        if (strncmp(line, "model name", 10) && strncmp(line, "Hardware", 8)) continue;
        const char *v = strchr(line, ':');
        if (!v) continue;
        for (v++; *v == ' ' || *v == '\t'; v++) {}
        snprintf(cpu_name, sizeof cpu_name, "%s", v);
        cpu_name[strcspn(cpu_name, "\n")] = 0;
        break;
    }
    if (f) fclose(f);
#if defined(__x86_64__)
    /* the brand string where /proc/cpuinfo gives none; then the family and model, which tell apart
     * CPUs that a virtual machine names alike ("AMD EPYC" was a Zen 3 and a Zen 4 here) */
    unsigned r[12], a, b, c, d;
    if (!cpu_name[0] && __get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x80000004) {
        for (unsigned i = 0; i < 3; i++) __get_cpuid(0x80000002 + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
        char brand[49] = {0};
        memcpy(brand, r, 48);
        const char *v = brand;
        while (*v == ' ') v++;
        snprintf(cpu_name, sizeof cpu_name, "%s", v);
    }
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        const unsigned base = (a >> 8) & 0xF, family = base + (base == 0xF ? (a >> 20) & 0xFF : 0);
        const unsigned model = ((a >> 4) & 0xF) | (base == 0x6 || base == 0xF ? ((a >> 16) & 0xF) << 4 : 0);
        const size_t n = strlen(cpu_name);
        snprintf(cpu_name + n, sizeof cpu_name - n, "%s(family %u, model %u)", n ? " " : "", family, model);
    }
#endif
}

const char *mf_cpu_name(void) {
    pthread_once(&cpu_name_once, read_cpu_name);
    return cpu_name;
}


/* The level's own kernel for weight type t, if it exists and expects the activation format the
 * traits table names for t. */
static mf_vec_dot_fn own_vec_dot(mf_simd_level level, mf_type t) {
    if ((unsigned)t >= MF_TYPE_COUNT) return NULL;
    const mf_simd_table *tab = &tables[level];
    if (!tab->vec_dot[t] || tab->vec_dot_act[t] != mf_type_get_traits(t)->vec_dot_type) return NULL;
    return tab->vec_dot[t];
}

bool mf_simd_has_vec_dot(mf_simd_level level, mf_type t) {
    return mf_simd_level_supported(level) && own_vec_dot(level, t) != NULL;
}

mf_vec_dot_fn mf_simd_vec_dot_at(mf_simd_level level, mf_type t) {
    if (!mf_simd_level_supported(level)) return NULL;
    mf_vec_dot_fn f = own_vec_dot(level, t);
    return f ? f : mf_type_get_traits(t)->vec_dot;
}

mf_quantize_fn mf_simd_quantize_row_at(mf_simd_level level, mf_type act_type) {
    if (!mf_simd_level_supported(level)) return NULL;
    if ((unsigned)act_type < MF_TYPE_COUNT && tables[level].quantize[act_type]) return tables[level].quantize[act_type];
    return mf_type_get_traits(act_type)->quantize;
}

/* Reference tile functions: the traits' dot once per (row, column) pair, so each result is that
 * dot's bit for bit. */
#define MF_SIMD_REF_TYPES(X) X(F32) X(F16) X(BF16) X(Q4_0) X(Q4_1) X(Q5_0) X(Q5_1) X(Q8_0) \
    X(Q2_K) X(Q3_K) X(Q4_K) X(Q5_K) X(Q6_K) X(IQ4_NL) X(IQ4_XS)
#define REF_GEMM(T)                                                                                  \
    static float ref_dot_##T(int64_t n, const void *w, const void *a) {                              \
        return mf_type_get_traits(MF_TYPE_##T)->vec_dot(n, w, a);                                    \
    }                                                                                                \
    MF_SIMD_GEMM_FROM_DOT(ref_gemm_##T, ref_dot_##T)
MF_SIMD_REF_TYPES(REF_GEMM)

static mf_gemm_fn ref_gemm(mf_type t) {
    if (!mf_type_get_traits(t)->vec_dot) return NULL;
    switch (t) {
#define REF_CASE(T) case MF_TYPE_##T: return ref_gemm_##T;
    MF_SIMD_REF_TYPES(REF_CASE)
#undef REF_CASE
    default: return NULL;
    }
}

mf_gemm_fn mf_simd_gemm_at(mf_simd_level level, mf_type t) {
    if (!mf_simd_level_supported(level)) return NULL;
    if (own_vec_dot(level, t) && tables[level].gemm[t]) return tables[level].gemm[t];
    return ref_gemm(t);
}

mf_gemm_fn mf_simd_gemm_avx2_wide(mf_type t) {
#if defined(__x86_64__)
    if (mf_simd_level_supported(MF_SIMD_AVX512)) return mf_x86_gemm_float_wide(t);
#endif
    (void)t;
    return NULL;
}

mf_vec_dot_fn mf_simd_vec_dot(mf_type t) { return mf_simd_vec_dot_at(mf_simd_best_level(), t); }

mf_quantize_fn mf_simd_quantize_row(mf_type act_type) {
    return mf_simd_quantize_row_at(mf_simd_best_level(), act_type);
}

mf_gemm_fn mf_simd_gemm(mf_type t) { return mf_simd_gemm_at(mf_simd_best_level(), t); }
