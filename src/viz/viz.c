/* viz.c: the viewer's server: listen, load the model, serve the embedded page, the graph exports and
 * their Graphviz layouts, and hand live runs to the run thread (viz_run.c); stop on SIGINT/SIGTERM. */
#include "viz_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef MINFER_VIZ_GVC
#include <graphviz/gvc.h>
#endif

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

void mf_viz_default_params(mf_viz_params *p) {
    memset(p, 0, sizeof *p);
    p->host = "127.0.0.1";
    p->port = 8081;
    p->n_ctx = 1024;
    p->max_tokens = 64;
    p->ctx = mf_context_default_params();
}

/* ---- graph exports ---- */

/* The export API writes a file: write it to a private temporary file and read it back. */
char *viz_export(viz *v, int32_t n_tokens, const char *format, size_t *len) {
    char path[] = "/tmp/minfer-viz-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        mf_set_error(MF_ERR_IO, "viz: cannot create a temporary file: %s", strerror(errno));
        return NULL;
    }
    close(fd);
    pthread_mutex_lock(&v->export_lock);
    mf_status st = mf_context_dump_graph(v->export_ctx, n_tokens, 1, format, path);
    pthread_mutex_unlock(&v->export_lock);
    char *text = NULL;
    FILE *f = st ? NULL : fopen(path, "rb");
    long n = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)n + 1)) && fread(text, 1, (size_t)n, f) == (size_t)n) {
        text[n] = 0;
        *len = (size_t)n;
    } else if (!st) {
        free(text);
        text = NULL;
        mf_set_error(MF_ERR_IO, "viz: cannot read the graph export back from '%s'", path);
    }
    if (f) fclose(f);
    unlink(path);
    return text;
}

static void h_graph(mf_http_request *r, void *user) {
    viz *v = user;
    int32_t n;
    viz_refusal why;
    if (!viz_parse_graph(mf_http_request_query(r, "stage"), mf_http_request_query(r, "n"), &n, &why)) {
        mf_http_respond_error(r, 400, why.param, NULL, "%s", why.msg);
        return;
    }
    size_t len;
    char *text = viz_export(v, n, "json", &len);
    if (!text) {
        mf_http_respond_error(r, 500, NULL, NULL, "graph export: %s", mf_last_error());
        return;
    }
    mf_http_respond(r, 200, "application/json", text, len);
    free(text);
}

/* dot's time grows fast with the graph: SmolLM2's 30 layers all open (520 nodes with the inputs'
 * edges into every layer) take minutes, a few open layers a fraction of a second. The page sends one
 * block (the nodes before the layers, a layer, those after) at a time, far below this; past it the page
 * lays the block out with dagre. A handler busy in dot also holds up the server's stop. */
#define LAYOUT_MAX_NODES 300

#ifdef MINFER_VIZ_GVC
/* Graphviz's messages go into the layout's error instead of stderr (under export_lock). */
static char gv_message[256];
static int gv_error(char *msg) {
    snprintf(gv_message, sizeof gv_message, "%s", msg);
    gv_message[strcspn(gv_message, "\r\n")] = 0;
    return 0;
}

/* Lay a DOT graph out with Graphviz's dot engine: each node's box (centre x, y, width, height in
 * points, y downwards) by its DOT name, and each edge's spline control points. NULL (with the error
 * set) for text Graphviz cannot read or a graph past LAYOUT_MAX_NODES. */
static json_t *layout_dot(viz *v, const char *dot) {
    pthread_mutex_lock(&v->export_lock); /* a GVC context is not thread-safe */
    gv_message[0] = 0;
    Agraph_t *g = agmemread(dot);
    json_t *out = NULL;
    if (!g) mf_set_error(MF_ERR_FORMAT, "layout: graphviz cannot read the DOT text: %s", gv_message);
    else if (agnnodes(g) > LAYOUT_MAX_NODES)
        mf_set_error(MF_ERR_RANGE, "layout: %d nodes, at most %d (collapse layers)", agnnodes(g), LAYOUT_MAX_NODES);
    else if (gvLayout(v->gvc, g, "dot") != 0) mf_set_error(MF_ERR_INTERNAL, "layout: graphviz's dot failed");
    else {
        const boxf bb = GD_bb(g);
        const double h = bb.UR.y;
        json_t *nodes = json_object(), *edges = json_array();
        for (Agnode_t *n = agfstnode(g); n; n = agnxtnode(g, n)) {
            json_object_set_new(nodes, agnameof(n), json_pack("[f,f,f,f]", ND_coord(n).x, h - ND_coord(n).y,
                                                              ND_width(n) * 72.0, ND_height(n) * 72.0));
            for (Agedge_t *e = agfstout(g, n); e; e = agnxtout(g, e)) {
                json_t *pts = json_array();
                const splines *sp = ED_spl(e);
                if (sp && sp->size > 0)
                    for (int i = 0; i < (int)sp->list[0].size; i++) {
                        json_array_append_new(pts, json_real(sp->list[0].list[i].x));
                        json_array_append_new(pts, json_real(h - sp->list[0].list[i].y));
                    }
                json_array_append_new(edges, json_pack("[s,s,o]", agnameof(agtail(e)), agnameof(aghead(e)), pts));
            }
        }
        out = json_pack("{s:f,s:f,s:o,s:o,s:s}", "width", bb.UR.x, "height", h, "nodes", nodes, "edges", edges,
                        "engine", "graphviz dot");
        gvFreeLayout(v->gvc, g);
    }
    if (g) agclose(g);
    pthread_mutex_unlock(&v->export_lock);
    return out;
}
#endif

/* POST /api/layout, body: a DOT graph (the page's view of the export, layers collapsed or open). */
static void h_layout(mf_http_request *r, void *user) {
    viz *v = user;
    size_t len;
    const char *dot = mf_http_request_body(r, &len);
    viz_refusal why;
    if (!viz_check_layout_body(dot, len, &why)) {
        mf_http_respond_error(r, 400, why.param, NULL, "%s", why.msg);
        return;
    }
#ifdef MINFER_VIZ_GVC
    json_t *lay = layout_dot(v, dot);
    if (!lay) {
        mf_http_respond_error(r, 400, NULL, NULL, "%s", mf_last_error());
        return;
    }
    mf_http_respond_json(r, 200, lay);
    json_decref(lay);
#else
    (void)v;
    mf_http_respond_error(r, 501, NULL, NULL, "this build has no Graphviz (libgvc): the page lays the graph out itself");
#endif
}

static void h_info(mf_http_request *r, void *user) {
    viz *v = user;
    json_t *o = json_pack("{s:s,s:f,s:f,s:i,s:i,s:i,s:i,s:s,s:i,s:b}", "model", v->model_name, "mem_bw_gbs",
                          v->p.mem_bw_gbs, "peak_gmacs", v->p.peak_gmacs, "n_layer",
                          (int)mf_model_n_layer(v->model), "n_vocab", (int)mf_model_n_vocab(v->model), "n_ctx",
                          (int)v->p.n_ctx, "max_tokens", (int)v->p.max_tokens, "isa",
                          mf_isa_name(mf_context_isa(v->export_ctx)), "n_threads",
                          (int)mf_context_n_threads(v->live_ctx), "layout",
#ifdef MINFER_VIZ_GVC
                          1
#else
                          0
#endif
    );
    mf_http_respond_json(r, 200, o);
    json_decref(o);
}

static void h_asset(mf_http_request *r, void *user) {
    (void)user;
    const char *path = mf_http_request_path(r);
    if (!strcmp(path, "/")) path = "/index.html";
    size_t len;
    const char *type;
    const void *data = mf_viz_asset(path, &len, &type);
    if (!data) {
        mf_http_respond_error(r, 404, NULL, NULL, "no page asset '%s'", path);
        return;
    }
    mf_http_respond(r, 200, type, data, len);
}

static mf_status load(viz *v) {
    mf_status st = mf_model_load(v->p.model, &v->model);
    if (st) return st;
    if (!(v->tok = mf_model_tokenizer(v->model))) return MF_ERR_FORMAT;
    mf_context_params cp = v->p.ctx;
    cp.n_ctx = v->p.n_ctx;
    mf_context_params ep = cp;
    ep.n_threads = 1;
    ep.trace_path = ep.trace_dump_dir = NULL; /* it runs no pass; MINFER_TRACE is the live run's */
    if ((st = mf_context_create(v->model, &ep, &v->export_ctx))) return st;
    cp.node_callback = viz_on_node;
    cp.node_callback_user = v;
    if ((st = mf_context_create(v->model, &cp, &v->live_ctx))) return st;
    return viz_run_start(v);
}

mf_status mf_viz_run(const mf_viz_params *params) {
    viz v;
    memset(&v, 0, sizeof v);
    v.p = *params;
    if (!v.p.model || !*v.p.model) return mf_set_error(MF_ERR_ARG, "viz: no model given");
    if (v.p.n_ctx < 16 || v.p.n_ctx > (1 << 20))
        return mf_set_error(MF_ERR_ARG, "viz: --ctx-size %d: must be in [16, %d]", v.p.n_ctx, 1 << 20);
    if (v.p.max_tokens < 1 || v.p.max_tokens > 4096)
        return mf_set_error(MF_ERR_ARG, "viz: --max-tokens %d: must be in [1, 4096]", v.p.max_tokens);
    const char *base = strrchr(v.p.model, '/');
    snprintf(v.model_name, sizeof v.model_name, "%s", base ? base + 1 : v.p.model);
    pthread_mutex_init(&v.export_lock, NULL);
    pthread_mutex_init(&v.lock, NULL);
    pthread_cond_init(&v.wake, NULL);
#ifdef MINFER_VIZ_GVC
    agseterrf(gv_error);
    v.gvc = gvContext();
#endif
    mf_http_params hp = mf_http_default_params();
    hp.host = v.p.host;
    hp.port = v.p.port;
    hp.stream_max_bytes = 64u << 20; /* a run of a large graph streams megabytes of node events */
    hp.max_body_bytes = 2u << 20;    /* a layout request: the DOT text of a few thousand nodes */
    mf_status st = mf_http_server_create(&hp, &v.http);
    if (st) goto done;
    mf_http_route(v.http, MF_HTTP_GET, "/api/info", h_info, &v);
    mf_http_route(v.http, MF_HTTP_GET, "/api/graph", h_graph, &v);
    mf_http_route(v.http, MF_HTTP_POST, "/api/layout", h_layout, &v);
    mf_http_route(v.http, MF_HTTP_GET, "/api/run", viz_h_run, &v);
    mf_http_route(v.http, MF_HTTP_GET, "/", h_asset, &v);
    mf_http_route_prefix(v.http, MF_HTTP_GET, "/", h_asset, &v);
    if ((st = load(&v))) goto done;
    if ((st = mf_http_server_start(v.http))) goto done;
    stop_requested = 0;
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    signal(SIGPIPE, SIG_IGN);
    char url[300];
    const bool v6 = strchr(v.p.host, ':') != NULL;
    snprintf(url, sizeof url, "http://%s%s%s:%u", v6 ? "[" : "", v.p.host, v6 ? "]" : "",
             (unsigned)mf_http_server_port(v.http));
    if (v.p.on_ready) v.p.on_ready(url, v.p.user);
    while (!stop_requested) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
done:;
    char err[1024];
    snprintf(err, sizeof err, "%s", st ? mf_last_error() : "");
    viz_run_stop(&v); /* the running run ends at its next node; then no engine work is left */
    if (v.http) mf_http_server_stop(v.http, 1.0);
    mf_http_server_free(v.http);
    mf_context_free(v.live_ctx);
    mf_context_free(v.export_ctx);
    mf_model_free(v.model);
#ifdef MINFER_VIZ_GVC
    if (v.gvc) gvFreeContext(v.gvc);
#endif
    pthread_cond_destroy(&v.wake);
    pthread_mutex_destroy(&v.lock);
    pthread_mutex_destroy(&v.export_lock);
    return st ? mf_set_error(st, "%s", err) : MF_OK;
}
