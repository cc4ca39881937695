/* sched.h: from a built graph to an executable one. The scheduler assigns each node the first
 * backend (in priority order) that supports it, applies the enabled fusion passes, plans every
 * activation into one arena by liveness (a buffer is reused once its last consumer has run, in
 * exactly the execution order), and splits the node list into per-backend runs. The KV cache is
 * not part of the arena: it is persistent per context (kv.h). */
#ifndef MF_SCHED_H
#define MF_SCHED_H

#include "graph/graph.h"
#include "graph/kv.h"

typedef struct mf_backend mf_backend;
struct mf_backend {
    const char *name;
    /* Whether the backend can run node n of g (fused ops included). */
    bool (*supports)(const mf_backend *b, const mf_graph *g, const mf_node *n);
    /* Scratch bytes node n needs while running (shared by all nodes, sized as the maximum). */
    size_t (*work_size)(const mf_backend *b, const mf_graph *g, const mf_node *n, const mf_kv_cache *kv);
    /* Run node id; its sources are computed and bound. */
    mf_status (*compute)(mf_backend *b, mf_graph *g, int32_t id, mf_kv_cache *kv, void *work, size_t work_size);
    void (*free)(mf_backend *b);
    bool host_memory; /* node data lives in host memory: no copies needed between such backends */
    void *impl;
};

/* Fusion passes (bit flags). */
enum {
    MF_FUSE_SWIGLU = 1u << 0,         /* mul(silu(a), b) -> swiglu(a, b) */
    MF_FUSE_QKV_ROPE_STORE = 1u << 1, /* q/k/v bias + rope(q), rope(k) + kv_store -> one op */
    MF_FUSE_ALL = 0x3u,
};

/* A maximal run of consecutive nodes on one backend, and the nodes it reads that another backend
 * produced (to copy in before it runs). */
typedef struct mf_split {
    int32_t backend, first, last; /* nodes [first, last] */
    int32_t *copy_in;
    int32_t n_copy_in;
} mf_split;

typedef struct mf_plan {
    size_t arena_size;  /* bytes of the activation arena; node offsets index into it */
    size_t naive_size;  /* bytes if every node had its own buffer (for reports) */
    size_t work_size;   /* scratch bytes for the backends */
    mf_split *splits;
    int32_t n_splits;
} mf_plan;

#define MF_ARENA_ALIGN 64

/* Assign, fuse, plan. kv gives the cache geometry some backends size scratch from. */
mf_status mf_sched_plan(mf_graph *g, mf_backend *const *backends, int32_t n_backends, unsigned fuse_flags,
                        const mf_kv_cache *kv, mf_plan *plan);
void mf_plan_free(mf_plan *p); /* accepts NULL */
/* Point every node's data into arena (views into their source). */
void mf_sched_bind(mf_graph *g, void *arena);

/* Called after each executed node (tracing). */
typedef void (*mf_node_hook)(void *ud, const mf_graph *g, int32_t id);
/* Run all splits in order. Inputs must have been filled. */
mf_status mf_sched_run(mf_graph *g, const mf_plan *p, mf_backend *const *backends, mf_kv_cache *kv, void *work,
                       mf_node_hook hook, void *hook_ud);

/* Fusion passes, each usable alone (sched_fuse.c). Return the number of rewrites. */
int32_t mf_fuse_swiglu(mf_graph *g, mf_backend *const *backends);
int32_t mf_fuse_qkv_rope_store(mf_graph *g, mf_backend *const *backends);

#endif /* MF_SCHED_H */
