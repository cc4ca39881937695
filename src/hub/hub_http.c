/* hub_http.c: HTTP for the hubs over libcurl: one place sets the options every request has
 * (redirects, protocols, timeouts, the token only for the Hugging Face host), parses the headers
 * the protocols read, fetches API answers into memory with retries, and turns a failed answer into
 * a message that says what to do. */
#include "hub/hub_internal.h"

#include <ctype.h>
#include <jansson.h>
#include <stdlib.h>
#include <time.h>

void hub_headers_reset(hub_headers *hd) {
    memset(hd, 0, sizeof *hd);
    hd->content_length = -1;
    hd->retry_after_s = -1;
    hd->linked_size = -1;
}

/* Copy a header value, trimmed, normalized for ETags (W/ prefix and quotes dropped). */
static void copy_value(char *dst, size_t size, const char *v, size_t n, bool etag) {
    while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
    while (n && (*v == ' ' || *v == '\t')) v++, n--;
    if (etag) {
        if (n >= 2 && v[0] == 'W' && v[1] == '/') v += 2, n -= 2;
        if (n >= 2 && v[0] == '"' && v[n - 1] == '"') v++, n -= 2;
    }
    if (n >= size) n = size - 1;
    memcpy(dst, v, n);
    dst[n] = 0;
}

static bool header_is(const char *line, size_t n, const char *name, const char **value, size_t *vlen) {
    const size_t k = strlen(name);
    if (n <= k || line[k] != ':' || strncasecmp(line, name, k) != 0) return false;
    *value = line + k + 1;
    *vlen = n - k - 1;
    return true;
}

/* The URL of a Link header's rel="next" entry (the tree API pages so; rel=next unquoted and
 * several rel values, as RFC 8288 allows, count too). */
static void parse_link_next(const char *v, size_t n, char *out, size_t size) {
    char tmp[2048];
    copy_value(tmp, sizeof tmp, v, n, false);
    for (char *p = tmp; (p = strchr(p, '<'));) {
        char *e = strchr(p, '>');
        if (!e) return;
        *e = 0;
        char *rest = e + 1, *next_entry = strchr(rest, '<');
        if (next_entry) *next_entry = 0; /* this entry's parameters only */
        for (char *r = rest; (r = strcasestr(r, "rel"));) {
            r += 3;
            while (*r == ' ') r++;
            if (*r != '=') continue;
            r++;
            while (*r == ' ' || *r == '"') r++;
            for (;;) { /* rel="a next b" */
                const size_t k = strcspn(r, " \";,");
                if (k == 4 && !strncasecmp(r, "next", 4)) {
                    snprintf(out, size, "%s", p + 1);
                    return;
                }
                if (r[k] != ' ') break;
                r += k + 1;
            }
        }
        if (!next_entry) return;
        *next_entry = '<';
        p = next_entry;
    }
}

size_t hub_header_cb(char *buf, size_t size, size_t n, void *user) {
    hub_headers *hd = user;
    const size_t len = size * n;
    const char *v;
    size_t vl;
    if (len > 5 && !strncmp(buf, "HTTP/", 5)) { /* a new response in the chain: its own headers start */
        const char *sp = memchr(buf, ' ', len);
        hd->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        hd->n_responses++;
        hd->etag[0] = hd->content_range[0] = hd->accept_ranges[0] = hd->link_next[0] = hd->location[0] = hd->www_auth[0] = 0;
        hd->content_length = hd->retry_after_s = -1;
        return len;
    }
    if (header_is(buf, len, "ETag", &v, &vl)) copy_value(hd->etag, sizeof hd->etag, v, vl, true);
    else if (header_is(buf, len, "X-Linked-Etag", &v, &vl)) copy_value(hd->linked_etag, sizeof hd->linked_etag, v, vl, true);
    else if (header_is(buf, len, "X-Repo-Commit", &v, &vl)) copy_value(hd->repo_commit, sizeof hd->repo_commit, v, vl, false);
    else if (header_is(buf, len, "X-Error-Code", &v, &vl)) copy_value(hd->error_code, sizeof hd->error_code, v, vl, false);
    else if (header_is(buf, len, "X-Error-Message", &v, &vl)) copy_value(hd->error_message, sizeof hd->error_message, v, vl, false);
    else if (header_is(buf, len, "Content-Range", &v, &vl)) copy_value(hd->content_range, sizeof hd->content_range, v, vl, false);
    else if (header_is(buf, len, "Accept-Ranges", &v, &vl)) copy_value(hd->accept_ranges, sizeof hd->accept_ranges, v, vl, false);
    else if (header_is(buf, len, "Link", &v, &vl)) parse_link_next(v, vl, hd->link_next, sizeof hd->link_next);
    else if (header_is(buf, len, "Location", &v, &vl)) copy_value(hd->location, sizeof hd->location, v, vl, false);
    else if (header_is(buf, len, "WWW-Authenticate", &v, &vl)) copy_value(hd->www_auth, sizeof hd->www_auth, v, vl, false);
    else if (header_is(buf, len, "Content-Length", &v, &vl) || header_is(buf, len, "Retry-After", &v, &vl) ||
             header_is(buf, len, "X-Linked-Size", &v, &vl)) {
        char num[32];
        copy_value(num, sizeof num, v, vl, false);
        char *end;
        const long long x = strtoll(num, &end, 10);
        if (end != num && !*end && x >= 0) {
            const char c = (char)tolower((unsigned char)buf[0]);
            if (c == 'c') hd->content_length = x;
            else if (c == 'x') hd->linked_size = x;
            else hd->retry_after_s = x;
        }
    }
    return len;
}

bool hub_same_host(const char *url, const char *base) {
    CURLU *a = curl_url(), *b = curl_url();
    bool same = false;
    char *ha = NULL, *hb = NULL, *sa = NULL, *sb = NULL, *pa = NULL, *pb = NULL;
    if (a && b && !curl_url_set(a, CURLUPART_URL, url, 0) && !curl_url_set(b, CURLUPART_URL, base, 0) &&
        !curl_url_get(a, CURLUPART_HOST, &ha, 0) && !curl_url_get(b, CURLUPART_HOST, &hb, 0) &&
        !curl_url_get(a, CURLUPART_SCHEME, &sa, 0) && !curl_url_get(b, CURLUPART_SCHEME, &sb, 0) &&
        !curl_url_get(a, CURLUPART_PORT, &pa, CURLU_DEFAULT_PORT) && !curl_url_get(b, CURLUPART_PORT, &pb, CURLU_DEFAULT_PORT))
        same = !strcasecmp(ha, hb) && !strcasecmp(sa, sb) && !strcmp(pa, pb);
    curl_free(ha), curl_free(hb), curl_free(sa), curl_free(sb), curl_free(pa), curl_free(pb);
    curl_url_cleanup(a);
    curl_url_cleanup(b);
    return same;
}

CURL *hub_curl_new(mf_hub *h, hub_site site, const char *url, char *errbuf, hub_headers *hd, struct curl_slist **list,
                   const char *accept) {
    CURL *e = curl_easy_init();
    if (!e) return NULL;
    errbuf[0] = 0;
    hub_headers_reset(hd);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    /* never from https down to http (the digest would still catch altered bytes, but not a spy) */
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, strncmp(url, "https:", 6) ? "http,https" : "https");
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L); /* nothing for 30 s: a stalled connection */
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, 30L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "minfer/" MINFER_VERSION);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, hub_header_cb);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, hd);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    *list = curl_slist_append(NULL, "Accept-Encoding: identity"); /* sizes and ranges of the bytes themselves */
    if (accept) {
        char a[256];
        snprintf(a, sizeof a, "Accept: %s", accept);
        *list = curl_slist_append(*list, a);
    }
    /* The token goes to the Hugging Face endpoint only. As a Bearer auth of libcurl's own it is not
     * sent on after a redirect to another host, port or scheme (CURLOPT_UNRESTRICTED_AUTH unset). */
    if (site == HUB_SITE_HF && h->hf_token && hub_same_host(url, h->hf_endpoint)) {
        curl_easy_setopt(e, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
        curl_easy_setopt(e, CURLOPT_XOAUTH2_BEARER, h->hf_token);
    }
    /* A registry's token likewise goes to the host that asked for it only. */
    if (site == HUB_SITE_OLLAMA && h->ollama_token && hub_same_host(url, h->ollama_token_url)) {
        curl_easy_setopt(e, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
        curl_easy_setopt(e, CURLOPT_XOAUTH2_BEARER, h->ollama_token);
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, *list);
    return e;
}

/* One parameter of a challenge (Bearer realm="...",service="...",scope="..."), unquoted. */
static bool challenge_param(const char *c, const char *name, char *out, size_t size) {
    const size_t k = strlen(name);
    for (const char *p = c; (p = strcasestr(p, name));) {
        const bool start = p == c || p[-1] == ' ' || p[-1] == ',';
        p += k;
        if (!start || *p != '=') continue;
        p++;
        const bool quoted = *p == '"';
        if (quoted) p++;
        const size_t n = quoted ? strcspn(p, "\"") : strcspn(p, ", ");
        if (n >= size) return false;
        memcpy(out, p, n);
        out[n] = 0;
        return true;
    }
    return false;
}

/* A registry's 401 with a Bearer challenge: the anonymous token its realm hands out (the Docker
 * registry token flow; Ollama's signed login is not done). */
static mf_status ollama_token(mf_hub *h, const hub_request *rq, const hub_headers *hd) {
    char realm[512], service[256] = "", scope[256] = "";
    if (strncasecmp(hd->www_auth, "Bearer ", 7) || !challenge_param(hd->www_auth + 7, "realm", realm, sizeof realm) ||
        (strncmp(realm, "https://", 8) && strncmp(realm, "http://", 7)))
        return MF_ERR_NOT_FOUND;
    challenge_param(hd->www_auth + 7, "service", service, sizeof service);
    challenge_param(hd->www_auth + 7, "scope", scope, sizeof scope);
    char *es = hub_url_escape(service, false), *ec = hub_url_escape(scope, false);
    char *url = es && ec ? hub_fmt("%s%sservice=%s&scope=%s", realm, strchr(realm, '?') ? "&" : "?", es, ec) : NULL;
    free(es), free(ec);
    if (!url) return MF_ERR_NOMEM;
    const hub_request trq = {.site = HUB_SITE_OLLAMA, .url = url, .accept = "application/json", .what = rq->what,
                             .token_request = true};
    hub_headers thd;
    char *body = NULL;
    size_t len;
    mf_status s = hub_fetch(h, &trq, 1 << 16, &body, &len, &thd);
    free(url);
    if (s != MF_OK) return s;
    json_t *j = json_loadb(body, len, 0, NULL);
    free(body);
    const char *tok = json_string_value(json_object_get(j, "token"));
    if (!tok) tok = json_string_value(json_object_get(j, "access_token"));
    if (!tok || !*tok || strcspn(tok, " \t\r\n") != strlen(tok)) {
        json_decref(j);
        return mf_fail(MF_ERR_FORMAT, "%s: the registry's token service %s answered no token", rq->what, realm);
    }
    free(h->ollama_token);
    free(h->ollama_token_url);
    h->ollama_token = mf_strdup(tok);
    h->ollama_token_url = mf_strdup(rq->url);
    json_decref(j);
    return h->ollama_token && h->ollama_token_url ? MF_OK : MF_ERR_NOMEM;
}

bool hub_retryable(long status) { return status == 408 || status == 429 || status >= 500; }

void hub_backoff(mf_hub *h, int attempt, int64_t retry_after_s) {
    double s = h->retry_delay_s;
    for (int i = 1; i < attempt && s < 60; i++) s *= 2;
    if (retry_after_s >= 0) s = (double)retry_after_s;
    if (s > 60) s = 60;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

typedef struct membuf {
    char *data;
    size_t len, max;
    bool over;
} membuf;

static size_t mem_write(char *p, size_t size, size_t n, void *user) {
    membuf *b = user;
    const size_t k = size * n;
    if (b->len + k > b->max) {
        b->over = true;
        return 0;
    }
    char *d = realloc(b->data, b->len + k + 1);
    if (!d) return 0;
    memcpy(d + b->len, p, k);
    b->data = d;
    b->len += k;
    d[b->len] = 0;
    return k;
}

#define HUB_TRIES 4

mf_status hub_fetch(mf_hub *h, const hub_request *rq, size_t max, char **body, size_t *len, hub_headers *hd) {
    if (body) *body = NULL;
    if (len) *len = 0;
    bool tried_token = false;
    for (int attempt = 1;; attempt++) {
        char errbuf[CURL_ERROR_SIZE];
        struct curl_slist *list = NULL;
        membuf b = {.max = max};
        CURL *e = hub_curl_new(h, rq->site, rq->url, errbuf, hd, &list, rq->accept);
        if (!e) return mf_fail(MF_ERR_NOMEM, "cannot start an HTTP request");
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, mem_write);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
        if (rq->head) curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
        if (rq->no_redirects) curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
        const CURLcode rc = curl_easy_perform(e);
        long status = 0;
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
        hd->status = status;
        curl_easy_cleanup(e);
        curl_slist_free_all(list);
        if (rc == CURLE_OK && status >= 200 && (status < 300 || (rq->no_redirects && status < 400 && hd->location[0]))) {
            if (body) *body = b.data ? b.data : mf_strdup("");
            else free(b.data);
            if (len) *len = b.len;
            return body && !*body ? MF_ERR_NOMEM : MF_OK;
        }
        free(b.data);
        if (b.over) return mf_fail(MF_ERR_FORMAT, "%s: the answer of %s is larger than %zu bytes: refused", rq->what, rq->url, max);
        if (rc == CURLE_TOO_MANY_REDIRECTS)
            return mf_fail(MF_ERR_IO, "%s: %s redirects in a loop (more than 10 redirects): the server or a proxy is misconfigured",
                           rq->what, rq->url);
        const bool transport = rc != CURLE_OK && rc != CURLE_HTTP_RETURNED_ERROR;
        if (!transport && status == 401 && rq->site == HUB_SITE_OLLAMA && hd->www_auth[0] && !tried_token && !rq->token_request) {
            tried_token = true;
            const hub_headers keep = *hd;
            mf_status ts = ollama_token(h, rq, &keep);
            *hd = keep;
            if (ts == MF_OK) {
                attempt--; /* the same try, now with the token */
                continue;
            }
            if (ts != MF_ERR_NOT_FOUND) return ts;
        }
        if ((transport || hub_retryable(status)) && attempt < HUB_TRIES) {
            hub_note(h, "%s: %s (try %d of %d); trying again", rq->what,
                     transport ? (errbuf[0] ? errbuf : curl_easy_strerror(rc)) : "the server is busy", attempt, HUB_TRIES);
            hub_backoff(h, attempt, hd->retry_after_s);
            continue;
        }
        if (transport)
            return mf_fail(MF_ERR_IO, "%s: cannot reach %s: %s (check the network, or set %s)", rq->what, rq->url,
                           errbuf[0] ? errbuf : curl_easy_strerror(rc),
                           rq->site == HUB_SITE_HF ? "HF_HUB_OFFLINE=1 to use only the cache" : "MINFER_OLLAMA_REGISTRY");
        return hub_http_error(h, rq->site, rq->what, hd, attempt);
    }
}

mf_status hub_http_error(mf_hub *h, hub_site site, const char *what, const hub_headers *hd, int tries) {
    const long st = hd->status;
    char said[300] = "";
    if (hd->error_message[0]) snprintf(said, sizeof said, " (\"%s\")", hd->error_message);
    const bool hf = site == HUB_SITE_HF;
    if (st == 401 && hf && !strcmp(hd->error_code, "RepoNotFound")) /* the Hub's answer to an anonymous ask */
        return mf_fail(MF_ERR_NOT_FOUND, "%s: 401 Unauthorized%s: no such repository, or a private one (check the name; set "
                       "HF_TOKEN for a private one)", what, said);
    if (st == 401)
        return mf_fail(MF_ERR_IO, "%s: 401 Unauthorized%s: %s", what, said,
                       !hf ? "this registry wants a login (more than an anonymous token), which minfer does not do; `ollama pull` it, then use it in place"
                       : h->hf_token ? "the token (HF_TOKEN or the token file) was refused; make a new one at huggingface.co/settings/tokens"
                                     : "the repository is private or gated: set HF_TOKEN to a token that may read it");
    if (st == 403)
        return mf_fail(MF_ERR_IO, "%s: 403 Forbidden%s: %s", what, said,
                       hf && !strcmp(hd->error_code, "GatedRepo")
                           ? "a gated repository: accept its conditions on its page, then set HF_TOKEN to a token of that account"
                           : "access refused; check that your token may read it");
    if (st == 404) {
        const char *why = !hf ? "no such model or tag in this registry; check the name and tag"
                          : !strcmp(hd->error_code, "EntryNotFound") ? "no such file in the repository"
                          : !strcmp(hd->error_code, "RevisionNotFound") ? "no such revision"
                          : h->hf_token ? "no such repository (check the name)"
                                        : "no such repository, or a private one (check the name; set HF_TOKEN for a private one)";
        return mf_fail(MF_ERR_NOT_FOUND, "%s: 404 Not Found%s: %s", what, said, why);
    }
    if (st == 429)
        return mf_fail(MF_ERR_IO, "%s: 429 Too Many Requests%s after %d tries: rate-limited; wait a few minutes%s", what, said,
                       tries, hf && !h->hf_token ? " (logged-in users, HF_TOKEN, get higher limits)" : "");
    if (st >= 500)
        return mf_fail(MF_ERR_IO, "%s: the server answered %ld%s after %d tries: a problem on its side; try again later", what, st,
                       said, tries);
    return mf_fail(MF_ERR_IO, "%s: unexpected HTTP status %ld%s", what, st, said);
}

char *hub_url_escape(const char *s, bool keep_slash) {
    static const char hex[] = "0123456789ABCDEF";
    const size_t n = strlen(s);
    char *o = mf_malloc(3 * n + 1), *p = o;
    if (!o) return NULL;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
            *p++ = (char)c;
        } else {
            *p++ = '%';
            *p++ = hex[c >> 4];
            *p++ = hex[c & 15];
        }
    }
    *p = 0;
    return o;
}

char *hub_url_join(const char *base, const char *ref) {
    CURLU *u = curl_url();
    char *out = NULL, *res = NULL;
    if (u && !curl_url_set(u, CURLUPART_URL, base, 0) && !curl_url_set(u, CURLUPART_URL, ref, 0) &&
        !curl_url_get(u, CURLUPART_URL, &out, 0))
        res = mf_strdup(out);
    curl_free(out);
    curl_url_cleanup(u);
    return res;
}

bool hub_route_missing(const hub_headers *hd) {
    const long st = hd->status;
    if (st != 400 && st != 404 && st != 405 && st != 501) return false;
    return strcmp(hd->error_code, "RepoNotFound") && strcmp(hd->error_code, "RevisionNotFound") &&
           strcmp(hd->error_code, "GatedRepo") && strcmp(hd->error_code, "DisabledRepo");
}
