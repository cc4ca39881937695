/* cli_hub.c: model references for every command (cli_model: a path, a cached name, hf:..., ollama:...,
 * downloaded first when needed), and how a download shows on stderr: on a terminal one bar per file
 * (bytes, percent, speed, ETA), redrawn in place; otherwise one line per file when it is done. */
#include "cli.h"

#include <unistd.h>

#define MAX_LINES 8 /* files shown at once; a pull of more shows the last ones */

typedef struct file_line {
    char name[96];
    uint64_t done, total, fetched;
    double seconds;
    int state; /* 0 waiting, 1 downloading, 2 done */
    bool cached;
} file_line;

typedef struct cli_progress {
    bool tty, quiet;
    int drawn;     /* lines of bars on the screen below the cursor's line */
    int n_files;
    file_line f[64];
} cli_progress;

static cli_progress progress_state;

/* "3.6 MB", "23 B", "1.20 GB" */
static const char *bytes_str(double n, char *buf, size_t size) {
    if (n < 1e3) snprintf(buf, size, "%.0f B", n);
    else if (n < 1e6) snprintf(buf, size, "%.1f kB", n / 1e3);
    else if (n < 1e9) snprintf(buf, size, "%.1f MB", n / 1e6);
    else snprintf(buf, size, "%.2f GB", n / 1e9);
    return buf;
}

static void bar_line(const file_line *l, char *out, size_t size) {
    char done[32], total[32];
    const double frac = l->total ? (double)l->done / (double)l->total : 1.0;
    const double speed = l->seconds > 0 ? (double)l->fetched / l->seconds : 0;
    char bar[26];
    const int fill = (int)(frac * 24 + 0.5);
    for (int i = 0; i < 24; i++) bar[i] = i < fill ? '#' : '.';
    bar[24] = 0;
    bytes_str((double)l->done, done, sizeof done);
    bytes_str((double)l->total, total, sizeof total);
    char tail[64] = "", sp[32];
    if (l->state == 2) snprintf(tail, sizeof tail, "%s", l->cached ? "cached" : "done");
    else if (l->state == 1 && speed > 0) {
        const double eta = (double)(l->total - l->done) / speed;
        snprintf(tail, sizeof tail, "%9s/s  ETA %d:%02d", bytes_str(speed, sp, sizeof sp), (int)eta / 60, (int)eta % 60);
    }
    const size_t nl = strlen(l->name); /* a long name keeps its end, where split parts differ */
    char name[40];
    snprintf(name, sizeof name, nl > 36 ? "...%s" : "%s", nl > 36 ? l->name + nl - 33 : l->name);
    snprintf(out, size, "  %-36s [%s] %3d%% %9s / %-9s %s", name, bar, (int)(frac * 100), done, total, tail);
}

static void redraw(cli_progress *p) {
    if (p->drawn) fprintf(stderr, "\033[%dA", p->drawn);
    const int first = p->n_files > MAX_LINES ? p->n_files - MAX_LINES : 0;
    int last_active = 0;
    for (int i = 0; i < p->n_files; i++)
        if (p->f[i].state) last_active = i;
    const int from = p->n_files > MAX_LINES ? CLI_MAX(0, CLI_MIN(first, last_active - MAX_LINES / 2)) : 0;
    p->drawn = 0;
    for (int i = from; i < p->n_files && p->drawn < MAX_LINES; i++, p->drawn++) {
        char line[256];
        bar_line(&p->f[i], line, sizeof line);
        fprintf(stderr, "\r\033[K%s\n", line);
    }
    fflush(stderr);
}

static int on_progress(const mf_hub_progress *e, void *user) {
    cli_progress *p = user;
    if (e->event == MF_HUB_NOTE) {
        if (p->quiet) return 0;
        if (p->tty && p->drawn) {
            fprintf(stderr, "\033[%dA\033[J", p->drawn); /* the note goes above the bars */
            p->drawn = 0;
        }
        fprintf(stderr, "minfer: %s\n", e->message);
        if (p->tty && p->n_files) redraw(p);
        return 0;
    }
    if (e->file < 0 || e->file >= (int)CLI_ARRAY_LEN(p->f)) return 0;
    if (e->n_files > p->n_files) p->n_files = CLI_MIN(e->n_files, (int)CLI_ARRAY_LEN(p->f));
    file_line *l = &p->f[e->file];
    snprintf(l->name, sizeof l->name, "%s", e->file_name ? e->file_name : "");
    l->done = e->done;
    l->total = e->total;
    if (e->event == MF_HUB_FILE_BYTES) {
        l->state = 1;
        l->fetched = e->fetched;
        l->seconds = e->seconds;
    } else {
        l->state = 2;
        l->cached = e->cached;
    }
    if (p->quiet) return 0;
    if (p->tty) {
        redraw(p);
    } else if (e->event == MF_HUB_FILE_DONE) {
        char sz[32], sp[32];
        bytes_str((double)l->total, sz, sizeof sz);
        if (l->cached) fprintf(stderr, "minfer: %s (%s): in the cache\n", l->name, sz);
        else fprintf(stderr, "minfer: %s: %s in %.1f s (%s/s)\n", l->name, sz, l->seconds,
                     bytes_str(l->seconds > 0 ? (double)l->fetched / l->seconds : 0.0, sp, sizeof sp));
    }
    return 0;
}

mf_hub *cli_hub_open(int connections, bool quiet) {
    mf_hub_params hp = mf_hub_default_params();
    mf_hub_params_from_env(&hp);
    if (connections > 0) hp.connections = connections;
    const char *retry = getenv("MINFER_HUB_RETRY_S"); /* the first pause before a retry (tests shorten it) */
    if (retry && *retry) hp.retry_delay_s = atof(retry);
    memset(&progress_state, 0, sizeof progress_state);
    progress_state.tty = isatty(STDERR_FILENO);
    progress_state.quiet = quiet;
    hp.progress = on_progress;
    hp.progress_user = &progress_state;
    mf_hub *h = NULL;
    mf_status s = mf_hub_open(&hp, &h);
    if (s != MF_OK) {
        cli_error_status(s, "models");
        return NULL;
    }
    return h;
}

/* The paths cli_model returned, freed at exit (commands keep them for their whole run). */
static char *resolved[16];
static int n_resolved;
static void free_resolved(void) {
    for (int i = 0; i < n_resolved; i++) free(resolved[i]);
    n_resolved = 0;
}

const char *cli_model(const char *ref) {
    if (!ref) return NULL;
    mf_hub *h = cli_hub_open(0, false);
    if (!h) return NULL;
    char *path = NULL;
    mf_status s = mf_hub_resolve(h, ref, 0, &path);
    mf_hub_free(h);
    if (s != MF_OK) { /* the hub's messages name the reference already */
        cli_error("%s", mf_last_error()[0] ? mf_last_error() : mf_status_str(s));
        return NULL;
    }
    if (n_resolved == (int)CLI_ARRAY_LEN(resolved)) return path; /* past the table: kept until exit */
    if (n_resolved == 0) atexit(free_resolved);
    resolved[n_resolved++] = path;
    return path;
}
