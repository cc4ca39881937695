/* minfer/gguf.h: reading GGUF files: metadata (every key and value, arrays included) and tensors
 * (name, type, shape, data), for model files, split models and vocabulary-only files alike. Part of
 * the public API (include minfer.h).
 *
 * mf_gguf_open maps the file read-only and validates every count, offset and size against the file
 * before any use: a hostile file yields MF_ERR_FORMAT (or MF_ERR_UNSUPPORTED) with a message naming
 * the key or tensor and the byte offset, never a crash. Opening part 1 of a split model
 * (name-00001-of-0000N.gguf) maps every part; the result looks like the unsplit file: metadata from
 * part 1, tensors from all parts. A mf_gguf is read-only after open and may be shared by threads. */
#ifndef MINFER_GGUF_H
#define MINFER_GGUF_H

#include "minfer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MF_GGUF_MAX_DIMS 4

typedef enum mf_gguf_vtype {
    MF_GGUF_UINT8 = 0,
    MF_GGUF_INT8 = 1,
    MF_GGUF_UINT16 = 2,
    MF_GGUF_INT16 = 3,
    MF_GGUF_UINT32 = 4,
    MF_GGUF_INT32 = 5,
    MF_GGUF_FLOAT32 = 6,
    MF_GGUF_BOOL = 7,
    MF_GGUF_STRING = 8,
    MF_GGUF_ARRAY = 9,
    MF_GGUF_UINT64 = 10,
    MF_GGUF_INT64 = 11,
    MF_GGUF_FLOAT64 = 12,
    MF_GGUF_VTYPE_COUNT
} mf_gguf_vtype;

/* A string inside the mapping: not NUL-terminated. */
typedef struct mf_str {
    const char *ptr;
    uint64_t len;
} mf_str;

typedef struct mf_gguf_value mf_gguf_value;
struct mf_gguf_value {
    mf_gguf_vtype type;
    union {
        uint64_t u64;  /* UINT8..UINT64 (zero-extended) */
        int64_t i64;   /* INT8..INT64 (sign-extended) */
        double f64;    /* FLOAT32, FLOAT64 */
        bool b;        /* BOOL */
        mf_str str;    /* STRING */
        struct {
            mf_gguf_vtype type;        /* element type */
            uint64_t n;                /* element count */
            const void *data;          /* numeric/bool elements: packed little-endian, in the mapping,
                                          possibly unaligned: read them with mf_gguf_arr_get_* */
            const mf_str *strs;        /* STRING elements: n entries */
            const mf_gguf_value *items;/* ARRAY elements (nested arrays): n entries of type ARRAY */
        } arr;
    };
};

typedef struct mf_gguf_kv {
    const char *key; /* NUL-terminated */
    mf_gguf_value value;
    uint64_t file_offset; /* where the key/value pair starts in its file */
} mf_gguf_kv;

typedef struct mf_gguf_tensor {
    const char *name;  /* NUL-terminated */
    uint32_t n_dims;
    int64_t ne[MF_GGUF_MAX_DIMS]; /* ne[0] is the row length (fastest varying); unused dims are 1 */
    mf_type type;
    uint64_t offset;   /* from the start of its part's data section */
    uint64_t nbytes;
    uint32_t part;     /* index of the split part holding the data (0 for single files) */
    const void *data;  /* points into the read-only mapping */
    uint64_t info_offset; /* where the tensor's info record starts in its part's file */
} mf_gguf_tensor;

typedef struct mf_gguf mf_gguf;

mf_status mf_gguf_open(const char *path, mf_gguf **out);
/* MF_GGUF_OPEN_READ: read every part into anonymous memory (2 MiB pages where the kernel allows)
 * instead of mapping the files. */
#define MF_GGUF_OPEN_READ 1u
mf_status mf_gguf_open_ex(const char *path, unsigned flags, mf_gguf **out);
/* Parse a GGUF image already in memory (size bytes at data, which must outlive the handle and stay
 * unchanged); name labels error messages. Other split parts are not opened. */
mf_status mf_gguf_open_memory(const void *data, size_t size, const char *name, mf_gguf **out);
void mf_gguf_free(mf_gguf *g);
/* The metadata of a loaded model's file (valid while the model lives). */
const mf_gguf *mf_model_gguf(const mf_model *m);

uint32_t mf_gguf_version(const mf_gguf *g);
uint32_t mf_gguf_alignment(const mf_gguf *g);
uint32_t mf_gguf_n_parts(const mf_gguf *g);
const char *mf_gguf_part_path(const mf_gguf *g, uint32_t part); /* NULL past the last part */
uint64_t mf_gguf_file_size(const mf_gguf *g); /* all parts together */

int64_t mf_gguf_n_kv(const mf_gguf *g);
const mf_gguf_kv *mf_gguf_kv_at(const mf_gguf *g, int64_t i); /* NULL out of range */
const mf_gguf_kv *mf_gguf_find_kv(const mf_gguf *g, const char *key); /* NULL if absent */
const char *mf_gguf_vtype_name(mf_gguf_vtype t); /* "uint32", "string", ... */
/* Element i of a numeric array (any integer or bool element type / FLOAT32 or FLOAT64), read safely
 * from its possibly unaligned place. false if arr is not such an array or i >= its length. */
bool mf_gguf_arr_get_i64(const mf_gguf_value *arr, uint64_t i, int64_t *out);
bool mf_gguf_arr_get_f64(const mf_gguf_value *arr, uint64_t i, double *out);
/* Same type and contents (strings and arrays compared element by element, floats bit by bit). */
bool mf_gguf_value_equal(const mf_gguf_value *a, const mf_gguf_value *b);

/* Typed accessors. get_*: absent key -> MF_ERR_NOT_FOUND, other type -> MF_ERR_TYPE, both with a
 * message naming the key, the expected and the actual type. find_*: absent key -> *out = def and
 * MF_OK; present with another type -> MF_ERR_TYPE. Integer getters accept any integer value type
 * whose value fits the requested type; float getters accept FLOAT32 and FLOAT64. */
mf_status mf_gguf_get_u32(const mf_gguf *g, const char *key, uint32_t *out);
mf_status mf_gguf_get_u64(const mf_gguf *g, const char *key, uint64_t *out);
mf_status mf_gguf_get_i64(const mf_gguf *g, const char *key, int64_t *out);
mf_status mf_gguf_get_f32(const mf_gguf *g, const char *key, float *out);
mf_status mf_gguf_get_bool(const mf_gguf *g, const char *key, bool *out);
mf_status mf_gguf_get_str(const mf_gguf *g, const char *key, mf_str *out);
/* An array whose elements have type elem (MF_GGUF_VTYPE_COUNT: any element type). */
mf_status mf_gguf_get_arr(const mf_gguf *g, const char *key, mf_gguf_vtype elem, const mf_gguf_value **out);
mf_status mf_gguf_find_u32(const mf_gguf *g, const char *key, uint32_t *out, uint32_t def);
mf_status mf_gguf_find_f32(const mf_gguf *g, const char *key, float *out, float def);
mf_status mf_gguf_find_bool(const mf_gguf *g, const char *key, bool *out, bool def);
/* String as a new NUL-terminated copy (caller frees); NULL and MF_OK in *out when absent. */
mf_status mf_gguf_find_str_dup(const mf_gguf *g, const char *key, char **out);

int64_t mf_gguf_n_tensors(const mf_gguf *g);
const mf_gguf_tensor *mf_gguf_tensor_at(const mf_gguf *g, int64_t i); /* NULL out of range */
const mf_gguf_tensor *mf_gguf_find_tensor(const mf_gguf *g, const char *name); /* NULL if absent */
/* Rows [row0, row0 + n_rows) of a tensor (rows of ne[0] values, all higher dimensions flattened)
 * dequantized to float32 into out[n_rows * ne[0]]. MF_ERR_UNSUPPORTED for a type minfer cannot
 * read (mf_type_readable), MF_ERR_RANGE for rows past the end. */
mf_status mf_gguf_tensor_to_f32(const mf_gguf_tensor *t, int64_t row0, int64_t n_rows, float *out);

#ifdef __cplusplus
}
#endif
#endif /* MINFER_GGUF_H */
