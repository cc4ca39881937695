/* viz.h: `minfer viz`: serves the graph viewer (HTML/JS/CSS embedded in the binary at build time,
 * nothing fetched at run time) and live runs of one model over server-sent events. A client of the
 * public API (minfer.h: graph export, per-node callback) and of src/http.
 *
 * Routes: GET /, /app.js, /style.css, ... (the page); GET /api/info (model, layers, limits);
 * GET /api/graph?stage=prefill|decode&n=N (the graph export, docs/graph-json.md);
 * POST /api/layout with a DOT body (node boxes and edge splines from Graphviz's dot layout, in points;
 * the page sends its own view of the graph, repeated layers collapsed);
 * GET /api/run?prompt=TEXT&n=N (an SSE stream: start, graph, pass, node..., pass_end, token, ..., done;
 * docs/viz.md lists the events). One run at a time: a second one gets 429 while the first streams. */
#ifndef MF_VIZ_H
#define MF_VIZ_H

#include "minfer.h"

#include <stdint.h>

typedef struct mf_viz_params {
    const char *model;         /* GGUF path */
    const char *host;          /* default "127.0.0.1" */
    uint16_t port;             /* default 8081; 0: any free port */
    int32_t n_ctx;             /* KV cells of the live run's context; default 1024 */
    int32_t max_tokens;        /* most tokens a run may ask to generate; default 64 */
    mf_context_params ctx;     /* isa, threads, order: from the environment as for other commands */
    /* The machine's limits the page measures each node against (GB/s of memory reads, int8 GMAC/s
     * peak; `minfer bench`'s probes); 0: unknown, the page uses the best node of the pass instead. */
    double mem_bw_gbs, peak_gmacs;
    void (*on_ready)(const char *url, void *user); /* called once listening with the model loaded */
    void *user;
} mf_viz_params;

void mf_viz_default_params(mf_viz_params *p);

/* Run until SIGINT or SIGTERM (handlers installed here). Errors: those of loading the model, of
 * binding the address (MF_ERR_IO), MF_ERR_ARG for bad parameters. */
mf_status mf_viz_run(const mf_viz_params *p);

/* One embedded asset by its path ("/app.js"): its bytes and content type; NULL if none. */
const void *mf_viz_asset(const char *path, size_t *len, const char **content_type);

#endif /* MF_VIZ_H */
