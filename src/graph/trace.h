/* trace.h: per-node statistics of real forward passes (MINFER_TRACE=FILE): for every executed node
 * min, max, mean, RMS, NaN and Inf counts over the rows of real tokens (padding rows of a bucketed
 * graph are left out), and the top-5 logits of the last output row. Node ids are those of the
 * graph exports (graph.h), so a trace lines up with --dump-graph-json. */
#ifndef MF_TRACE_H
#define MF_TRACE_H

#include "graph/graph.h"

typedef struct mf_trace mf_trace;

/* Statistics of a node's output over the rows of real tokens; min/max/mean/rms over the finite
 * values (NaN when there are none). Shared with the context's per-node callback. */
typedef struct mf_node_stats {
    int64_t count, nan, inf;
    double min, max, mean, rms;
} mf_node_stats;
/* The first n_real of n_graph_tokens token rows are real; n's data must be set. */
void mf_node_stats_compute(const mf_node *n, int32_t n_real, int32_t n_graph_tokens, mf_node_stats *s);

/* dump_dir (may be NULL): also write each traced node's real-token values there as raw f32. */
mf_status mf_trace_create(const char *path, const char *dump_dir, mf_trace **out);
/* Write the JSON file and free; returns the write status. Accepts NULL (MF_OK). */
mf_status mf_trace_finish(mf_trace *t);
/* Start a run of graph g in which the first n_real of g's n_graph_tokens token rows are real. */
void mf_trace_begin(mf_trace *t, const mf_graph *g, const char *kind, int32_t n_real, int32_t n_graph_tokens);
/* The scheduler hook (ud = the trace): record node id's statistics. */
void mf_trace_node(void *ud, const mf_graph *g, int32_t id);
/* Finish the run: top-5 of the given logits row. */
void mf_trace_end(mf_trace *t, const float *logits, int32_t n_vocab);

#endif /* MF_TRACE_H */
