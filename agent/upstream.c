/*
 * upstream — report delivery; see upstream.h and docs/delivery.md.
 *
 * One queue (struct cq) per container, found through a small hash table.
 * Only a queue's head is ever attempted, and a queue is in exactly one
 * place at a time: the ready FIFO (its head may start when a slot frees),
 * in flight (one request), or waiting (its retry timer). That is the whole
 * ordering guarantee, and it needs no bookkeeping beyond the queue itself.
 *
 * Requests start only from a deferred "pump" event, never from inside
 * upstream_submit or a callback: the caller never sees a callback nested
 * in its own call, and a burst of submits is started in one go.
 *
 * The token lives in the conf and the header line built from it, both
 * wiped when dropped (and in libcurl's copy while a request runs). Error texts
 * are built from libcurl's message or the response body, with the token cut
 * out of the latter (a misbehaving upstream may echo the request back).
 */
#include "upstream.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backoff.h"
#include "log.h"
#include "loop.h"

#define SNIPPET_MAX     1024 /* response bytes kept for an error text */
#define SHOW_MAX        160  /* of which an error text shows at most */
#define HEADER_VAL_MAX  4096
#define IN_FLIGHT_MAX   1024
#define HASH_MIN        64
#define TOKEN_FILE_MAX  (UPSTREAM_TOKEN_MAX + 2) /* and a CR LF */
#define RETRY_AFTER_MAX 1000000000ull /* seconds; more is "very long" */
#define REDACTED        "[redacted]"
#define STR_(x)         #x
#define STR(x)          STR_(x)

/* Options as validated and copied; immutable, swapped whole on update. */
struct conf {
    char *url;
    char url_log[256]; /* scheme://host/path: no userinfo, no query */
    long timeout_ms;
    char *token;  /* wiped on free */
    char **lines; /* header lines; the last slot is per attempt */
    size_t nlines;
    const char **hdrs; /* nlines + 1 pointers, for loop_http */
    char *ca_file, *client_cert, *client_key;
    unsigned max_in_flight;
    uint64_t base_ms, cap_ms, ra_max_ms;
};

/* One report, owned by its container's queue. */
struct item {
    struct item *next;
    char *report_id;
    char *cid;
    char *body;
    size_t len;
    unsigned attempts;
};

enum cq_state { CQ_READY, CQ_IN_FLIGHT, CQ_WAITING };

/* One container's reports, oldest first. */
struct cq {
    struct upstream *u;
    char *cid;
    uint32_t hash;
    struct cq *hnext; /* bucket chain */
    struct cq *rnext; /* ready FIFO */
    struct item *head, *tail;
    enum cq_state st;
    struct loop_http_call *call;
    struct event *timer; /* retry */
    /* The attempt in flight. */
    uint64_t t0_ns; /* its start, for the duration histogram */
    bool got_status;
    long status;
    char *snip; /* the start of the answer, while it runs */
    size_t snip_len;
    size_t resp_len;
};

struct upstream {
    struct loop *l;
    struct conf *conf;
    struct upstream_cbs cbs;
    void *arg;
    struct cq **buckets;
    size_t nbuckets, ncq;
    struct cq *ready, *ready_tail;
    struct event *pump;
    uint32_t rnd;
    size_t held, in_flight, waiting;
    uint64_t delivered, retries, dead;
    uint64_t by_code[UPSTREAM_CODE_MAX], no_answer;
    uint64_t lat_buckets[UPSTREAM_LAT_N + 1], lat_count;
    double lat_sum;
    bool failing; /* the last attempt failed (logged once per spell) */
    int depth;    /* inside a user callback */
    bool dying;   /* upstream_free ran inside a callback */
};

enum verdict { V_DELIVERED, V_RETRY, V_DEAD };

/* ---- options ---------------------------------------------------------- */

static void
wipe_free(char *s)
{
    if (s == NULL)
        return;
    explicit_bzero(s, strlen(s));
    free(s);
}

static void
conf_free(struct conf *c)
{
    size_t i;

    if (c == NULL)
        return;
    free(c->url);
    wipe_free(c->token);
    for (i = 0; i < c->nlines; i++)
        wipe_free(c->lines[i]); /* one is the Authorization line */
    free(c->lines);
    free(c->hdrs);
    free(c->ca_file);
    free(c->client_cert);
    free(c->client_key);
    free(c);
}

static bool
visible(const char *s, size_t max)
{
    size_t n = 0;

    if (s == NULL || *s == '\0')
        return false;
    for (; *s != '\0'; s++, n++)
        if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f ||
            n + 1 >= max)
            return false;
    return true;
}

static bool
upstream_is_tchar(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9') || strchr("!#$%&'*+-.^_`|~", ch);
}

/* The URL without userinfo and query, which may hold secrets. */
static void
url_for_log(const char *url, char *out, size_t len)
{
    const char *auth = strstr(url, "://"), *end, *at, *p;

    auth = auth != NULL ? auth + 3 : url;
    end = auth + strcspn(auth, "/?#");
    at = NULL;
    for (p = auth; p < end; p++)
        if (*p == '@')
            at = p;
    snprintf(out, len, "%.*s%.*s", (int)(auth - url), url,
             (int)strcspn(at != NULL ? at + 1 : auth, "?#"),
             at != NULL ? at + 1 : auth);
}

static int
upstream_check_url(const char *url, char *err, size_t errlen)
{
    size_t skip;

    if (url == NULL) {
        snprintf(err, errlen, "upstream: no url");
        return -1;
    }
    if (strncasecmp(url, "http://", 7) == 0)
        skip = 7;
    else if (strncasecmp(url, "https://", 8) == 0)
        skip = 8;
    else {
        snprintf(err, errlen, "upstream.url: not http:// or https://");
        return -1;
    }
    if (!visible(url, 4096) || url[skip] == '\0' || url[skip] == '/') {
        snprintf(err, errlen,
                 "upstream.url: no host, or a space or a "
                 "control character");
        return -1;
    }
    return 0;
}

static int
check_headers(const struct upstream_opts *o, char *err, size_t errlen)
{
    static const char *const ours[] = {"Content-Type", "Content-Length",
                                       "Transfer-Encoding", "Idempotency-Key",
                                       "Expect"};
    size_t i, j;

    if (o->nheaders > UPSTREAM_HEADER_MAX) {
        snprintf(err, errlen, "upstream.headers: more than %d",
                 UPSTREAM_HEADER_MAX);
        return -1;
    }
    for (i = 0; i < o->nheaders; i++) {
        const char *n = o->headers[i].name, *v = o->headers[i].value;
        bool ok = n != NULL && *n != '\0' && strlen(n) < 128;

        for (j = 0; ok && n[j] != '\0'; j++)
            ok = upstream_is_tchar(n[j]);
        if (!ok) {
            snprintf(err, errlen, "upstream.headers: a name is not valid");
            return -1;
        }
        for (j = 0; j < sizeof(ours) / sizeof(ours[0]); j++) {
            if (strcasecmp(n, ours[j]) == 0) {
                snprintf(err, errlen,
                         "upstream.headers: \"%s\" is set by reapd itself", n);
                return -1;
            }
        }
        if (o->token != NULL && strcasecmp(n, "Authorization") == 0) {
            snprintf(err, errlen,
                     "upstream.headers: \"Authorization\" "
                     "and a token are both set");
            return -1;
        }
        /* The value is never quoted: it may be a key of its own. */
        if (v == NULL || strpbrk(v, "\r\n") != NULL ||
            strlen(v) > HEADER_VAL_MAX) {
            snprintf(err, errlen,
                     "upstream.headers.%s: CR, LF or more than %d bytes", n,
                     HEADER_VAL_MAX);
            return -1;
        }
    }
    return 0;
}

static int
check_tls(const struct upstream_opts *o, char *err, size_t errlen)
{
    const char *files[] = {o->ca_file, o->client_cert, o->client_key};
    const char *names[] = {"ca_file", "client_cert", "client_key"};
    size_t i;

    for (i = 0; i < 3; i++) {
        if (files[i] == NULL)
            continue;
        if (strncasecmp(o->url, "https://", 8) != 0) {
            snprintf(err, errlen, "upstream.tls.%s: only for https:// urls",
                     names[i]);
            return -1;
        }
        if (access(files[i], R_OK) != 0) {
            snprintf(err, errlen, "upstream.tls.%s: %s: %s", names[i],
                     files[i], strerror(errno));
            return -1;
        }
    }
    if (o->client_key != NULL && o->client_cert == NULL) {
        snprintf(err, errlen, "upstream.tls.client_key: needs client_cert");
        return -1;
    }
    return 0;
}

static char *
header_line(const char *name, const char *value)
{
    size_t n = strlen(name) + strlen(value) + 3;
    char *s = malloc(n);

    if (s != NULL)
        snprintf(s, n, "%s: %s", name, value);
    return s;
}

static char *
dup_or_null(const char *s, bool *oom)
{
    char *d;

    if (s == NULL)
        return NULL;
    d = strdup(s);
    if (d == NULL)
        *oom = true;
    return d;
}

/* The header lines every attempt sends; the Authorization line is the
 * only other copy of the token. 0, or -1 on no memory. */
static int
conf_lines(struct conf *c, const struct upstream_opts *o)
{
    size_t i, len, n = 1 + o->nheaders + (o->token != NULL ? 1 : 0);

    /* One more pointer for the per-attempt Idempotency-Key. */
    c->lines = calloc(n, sizeof(*c->lines));
    c->hdrs = calloc(n + 1, sizeof(*c->hdrs));
    if (c->lines == NULL || c->hdrs == NULL)
        return -1;
    c->lines[c->nlines++] = header_line("Content-Type", "application/json");
    for (i = 0; i < o->nheaders; i++)
        c->lines[c->nlines++] =
            header_line(o->headers[i].name, o->headers[i].value);
    if (o->token != NULL) {
        len = strlen(o->token) + sizeof("Authorization: Bearer ");
        c->lines[c->nlines] = malloc(len);
        if (c->lines[c->nlines] != NULL)
            snprintf(c->lines[c->nlines], len, "Authorization: Bearer %s",
                     o->token);
        c->nlines++;
    }
    for (i = 0; i < c->nlines; i++) {
        if (c->lines[i] == NULL)
            return -1;
        c->hdrs[i] = c->lines[i];
    }
    return 0;
}

static struct conf *
conf_new(const struct upstream_opts *o, char *err, size_t errlen)
{
    struct conf *c = NULL, *result = NULL;
    bool oom = false;

    if (upstream_check_url(o->url, err, errlen) != 0 ||
        check_headers(o, err, errlen) != 0 || check_tls(o, err, errlen) != 0)
        goto out;
    if (o->token != NULL && !visible(o->token, UPSTREAM_TOKEN_MAX + 1)) {
        snprintf(err, errlen,
                 "upstream: the token is empty, too long, or "
                 "holds a space or control character");
        goto out;
    }
    if (o->timeout_ms <= 0) {
        snprintf(err, errlen, "upstream.timeout_ms: must be > 0");
        goto out;
    }
    if (o->max_in_flight > IN_FLIGHT_MAX) {
        snprintf(err, errlen, "upstream.max_in_flight: 1 .. %d",
                 IN_FLIGHT_MAX);
        goto out;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        snprintf(err, errlen, "upstream: out of memory");
        goto out;
    }
    c->timeout_ms = o->timeout_ms;
    c->max_in_flight =
        o->max_in_flight ? o->max_in_flight : UPSTREAM_DEFAULT_IN_FLIGHT;
    c->base_ms =
        o->retry_base_ms ? o->retry_base_ms : UPSTREAM_DEFAULT_BASE_MS;
    c->cap_ms = o->retry_max_ms ? o->retry_max_ms : UPSTREAM_DEFAULT_CAP_MS;
    c->ra_max_ms = o->retry_after_max_ms ? o->retry_after_max_ms
                                         : UPSTREAM_DEFAULT_RETRY_AFTER_MS;
    if (c->cap_ms < c->base_ms) {
        snprintf(err, errlen, "upstream.retry_max_ms: below retry_base_ms");
        goto out;
    }
    url_for_log(o->url, c->url_log, sizeof(c->url_log));
    c->url = dup_or_null(o->url, &oom);
    c->token = dup_or_null(o->token, &oom);
    c->ca_file = dup_or_null(o->ca_file, &oom);
    c->client_cert = dup_or_null(o->client_cert, &oom);
    c->client_key = dup_or_null(o->client_key, &oom);
    if (oom || conf_lines(c, o) != 0) {
        snprintf(err, errlen, "upstream: out of memory");
        goto out;
    }
    result = c;
    c = NULL;
out:
    conf_free(c);
    return result;
}

/* ---- queues ----------------------------------------------------------- */

static uint32_t
hash_str(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */

    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    return h;
}

static struct cq *
cq_find(struct upstream *u, const char *cid, uint32_t h)
{
    struct cq *q;

    for (q = u->buckets[h & (u->nbuckets - 1)]; q != NULL; q = q->hnext)
        if (q->hash == h && strcmp(q->cid, cid) == 0)
            return q;
    return NULL;
}

/* Doubles the table when it gets crowded; on no memory, chains grow. */
static void
hash_grow(struct upstream *u)
{
    size_t i, n = u->nbuckets * 2;
    struct cq **nb, *q, *next;

    if (u->ncq <= u->nbuckets)
        return;
    nb = calloc(n, sizeof(*nb));
    if (nb == NULL)
        return;
    for (i = 0; i < u->nbuckets; i++) {
        for (q = u->buckets[i]; q != NULL; q = next) {
            next = q->hnext;
            q->hnext = nb[q->hash & (n - 1)];
            nb[q->hash & (n - 1)] = q;
        }
    }
    free(u->buckets);
    u->buckets = nb;
    u->nbuckets = n;
}

static void
item_free(struct item *it)
{
    if (it == NULL)
        return;
    free(it->report_id);
    free(it->cid);
    free(it->body);
    free(it);
}

static void on_retry_timer(evutil_socket_t fd, short what, void *arg);

static struct cq *
cq_new(struct upstream *u, const char *cid, uint32_t h)
{
    struct cq *q = calloc(1, sizeof(*q));

    if (q == NULL)
        return NULL;
    q->u = u;
    q->hash = h;
    q->cid = strdup(cid);
    /* Made now, so that scheduling a retry can never fail. */
    q->timer = evtimer_new(loop_base(u->l), on_retry_timer, q);
    if (q->cid == NULL || q->timer == NULL) {
        if (q->timer != NULL)
            event_free(q->timer);
        free(q->cid);
        free(q);
        return NULL;
    }
    q->hnext = u->buckets[h & (u->nbuckets - 1)];
    u->buckets[h & (u->nbuckets - 1)] = q;
    u->ncq++;
    hash_grow(u);
    return q;
}

/* Frees a queue and everything in it; it must be out of the ready FIFO
 * (or the FIFO is being dropped whole). */
static void
cq_free(struct cq *q)
{
    struct item *it, *next;

    if (q->call != NULL)
        loop_http_cancel(q->call);
    event_free(q->timer);
    free(q->snip);
    for (it = q->head; it != NULL; it = next) {
        next = it->next;
        item_free(it);
    }
    free(q->cid);
    free(q);
}

static void
cq_remove(struct cq *q)
{
    struct upstream *u = q->u;
    struct cq **pp = &u->buckets[q->hash & (u->nbuckets - 1)];

    while (*pp != q)
        pp = &(*pp)->hnext;
    *pp = q->hnext;
    u->ncq--;
    cq_free(q);
}

static void
schedule_pump(struct upstream *u)
{
    if (!u->dying)
        event_active(u->pump, EV_TIMEOUT, 0);
}

static void
ready_push(struct cq *q)
{
    struct upstream *u = q->u;

    q->st = CQ_READY;
    q->rnext = NULL;
    if (u->ready_tail != NULL)
        u->ready_tail->rnext = q;
    else
        u->ready = q;
    u->ready_tail = q;
    schedule_pump(u);
}

static struct cq *
ready_pop(struct upstream *u)
{
    struct cq *q = u->ready;

    u->ready = q->rnext;
    if (u->ready == NULL)
        u->ready_tail = NULL;
    q->rnext = NULL;
    return q;
}

/* ---- outcomes --------------------------------------------------------- */

static void destroy(struct upstream *u);

/* Runs a user callback. False when the module is gone (or going) after
 * it: the caller must then return without touching `u`. */
static bool
notify(struct upstream *u, upstream_cb fn, const struct upstream_outcome *o)
{
    if (fn == NULL)
        return true;
    u->depth++;
    fn(o, u->arg);
    u->depth--;
    if (!u->dying)
        return true;
    if (u->depth == 0)
        destroy(u);
    return false;
}

static enum verdict
classify(long status)
{
    if (status >= 200 && status <= 299)
        return V_DELIVERED;
    if (status == 408 || status == 429)
        return V_RETRY;
    if (status >= 400 && status <= 499)
        return V_DEAD;
    /* 5xx, and what the contract does not name (3xx: we do not follow
     * redirects): retried, so a misconfiguration loses nothing. */
    return V_RETRY;
}

/* Retry-After in its seconds form; the HTTP-date form is ignored. */
static bool
retry_after_ms(const char *v, uint64_t *ms)
{
    uint64_t s = 0;

    if (v == NULL)
        return false;
    v += strspn(v, " \t");
    if (*v < '0' || *v > '9')
        return false;
    for (; *v >= '0' && *v <= '9'; v++)
        if (s < RETRY_AFTER_MAX)
            s = s * 10 + (uint64_t)(*v - '0');
    v += strspn(v, " \t");
    if (*v != '\0')
        return false;
    *ms = (s < RETRY_AFTER_MAX ? s : RETRY_AFTER_MAX) * 1000u;
    return true;
}

/*
 * Shows `s` (bounded) as printable ASCII with every occurrence of the
 * token replaced, and cut where the rest of it is the start of the token
 * (4 bytes or more): the body went on past what was kept.
 */
static void
scrub(const char *s, size_t len, const char *token, char *out, size_t outlen)
{
    size_t i = 0, n = 0, tl = token != NULL ? strlen(token) : 0;
    unsigned char ch;

    while (i < len && n + 1 < outlen) {
        if (tl > 0 && len - i >= tl && memcmp(s + i, token, tl) == 0) {
            size_t r = sizeof(REDACTED) - 1;

            if (n + r + 1 > outlen)
                break;
            memcpy(out + n, REDACTED, r);
            n += r;
            i += tl;
            continue;
        }
        if (tl > 0 && len - i < tl && len - i >= 4 &&
            memcmp(s + i, token, len - i) == 0)
            break;
        /* Errors end up in logs and JSON: plain printable ASCII only. */
        ch = (unsigned char)s[i++];
        if (ch == '\n' || ch == '\r' || ch == '\t')
            ch = ' ';
        else if (ch < 0x20 || ch >= 0x7f)
            ch = '?';
        out[n++] = (char)ch;
    }
    out[n] = '\0';
}

static void
attempt_error(const struct cq *q, const struct loop_http_resp *res, char *buf,
              size_t len)
{
    const char *what = "transfer";
    char shown[SHOW_MAX + 1];

    if (q->got_status) {
        scrub(q->snip, q->snip_len, q->u->conf->token, shown, sizeof(shown));
        snprintf(buf, len, "HTTP %ld%s%s", q->status, shown[0] ? ": " : "",
                 shown);
        return;
    }
    if (res == NULL) {
        snprintf(buf, len, "could not start the request");
        return;
    }
    if (res->error == HTTPC_ERR_CONNECT)
        what = "connect";
    else if (res->error == HTTPC_ERR_TIMEOUT)
        what = "timeout";
    scrub(res->errmsg != NULL ? res->errmsg : "failed",
          res->errmsg != NULL ? strlen(res->errmsg) : 6, NULL, shown,
          sizeof(shown));
    snprintf(buf, len, "%s: %s", what, shown);
}

/* The head failed and is retried: wait, then back into the FIFO. The
 * queue must be out of the FIFO and not in flight. */
static bool
retry_later(struct cq *q, const char *retry_after, const char *err)
{
    struct upstream *u = q->u;
    struct item *it = q->head;
    struct upstream_outcome o;
    uint64_t d, ra;

    d = backoff_delay_ms(it->attempts, u->conf->base_ms, u->conf->cap_ms,
                         backoff_rand(&u->rnd));
    if ((q->status == 429 || q->status == 503) &&
        retry_after_ms(retry_after, &ra)) {
        if (ra > u->conf->ra_max_ms)
            ra = u->conf->ra_max_ms;
        if (ra > d)
            d = ra;
    }
    q->st = CQ_WAITING;
    u->waiting++;
    u->retries++;
    /* libevent counts from the time it cached when this loop turn began,
     * which may be long past: a floor (Retry-After) holds from now. */
    event_base_update_cache_time(loop_base(u->l));
    loop_timer_ms(q->timer, d);
    if (!u->failing)
        log_warn(it->cid, "upstream: delivery to %s failing: %s",
                 u->conf->url_log, err);
    else
        log_debug(it->cid, "upstream: report %s attempt %u: %s", it->report_id,
                  it->attempts, err);
    log_debug(it->cid, "upstream: report %s: next attempt in %llu ms",
              it->report_id, (unsigned long long)d);
    u->failing = true;
    memset(&o, 0, sizeof(o));
    o.report_id = it->report_id;
    o.container_id = it->cid;
    o.attempts = it->attempts;
    o.status = q->got_status ? q->status : 0;
    o.error = err;
    o.url = u->conf->url_log;
    o.delay_ms = d;
    o.next_ms = loop_now_ms() + d;
    return notify(u, u->cbs.retry, &o);
}

static void
on_retry_timer(evutil_socket_t fd, short what, void *arg)
{
    struct cq *q = arg;

    (void)fd;
    (void)what;
    q->u->waiting--;
    ready_push(q);
}

static void
on_headers(long status, void *arg)
{
    struct cq *q = arg;

    q->got_status = true;
    q->status = status;
}

/* Keeps the start of the body for an error text; a longer one is cut off
 * (the status has decided already). */
static int
on_data(const char *buf, size_t len, void *arg)
{
    struct cq *q = arg;
    size_t room = SNIPPET_MAX - q->snip_len;

    if (q->snip == NULL)
        q->snip = malloc(SNIPPET_MAX); /* none: a plainer error text */
    if (q->snip != NULL) {
        memcpy(q->snip + q->snip_len, buf, len < room ? len : room);
        q->snip_len += len < room ? len : room;
    }
    q->resp_len += len;
    return q->resp_len > UPSTREAM_RESP_MAX ? -1 : 0;
}

static const double lat_bounds[UPSTREAM_LAT_N] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
};

const double *
upstream_latency_bounds(void)
{
    return lat_bounds;
}

/* One attempt ended: by its answer's status, and by how long it took. */
static void
count_attempt(struct upstream *u, const struct cq *q)
{
    double s = (double)(loop_now_ns() - q->t0_ns) / 1e9;
    size_t i;

    if (q->got_status && q->status >= 100 && q->status < UPSTREAM_CODE_MAX)
        u->by_code[q->status]++;
    else
        u->no_answer++;
    for (i = 0; i < UPSTREAM_LAT_N && s > lat_bounds[i]; i++)
        ;
    u->lat_buckets[i]++;
    u->lat_count++;
    u->lat_sum += s;
}

static void
on_done(const struct loop_http_resp *res, void *arg)
{
    struct cq *q = arg;
    struct upstream *u = q->u;
    struct item *it = q->head;
    struct upstream_outcome o;
    char err[UPSTREAM_ERR_MAX] = "";
    enum verdict v;
    long status;

    q->call = NULL;
    u->in_flight--;
    schedule_pump(u); /* a slot is free */
    count_attempt(u, q);
    /* Once a status line came, it decides, even if the body broke off:
     * the upstream has made up its mind. */
    v = q->got_status ? classify(q->status) : V_RETRY;
    if (v != V_DELIVERED)
        attempt_error(q, res, err, sizeof(err));
    free(q->snip);
    q->snip = NULL;
    q->snip_len = 0;
    if (v == V_RETRY) {
        retry_later(q, loop_http_header(res, "Retry-After"), err);
        return;
    }
    q->head = it->next;
    if (q->head == NULL)
        q->tail = NULL;
    it->next = NULL;
    u->held--;
    status = q->status;
    if (q->head != NULL)
        ready_push(q); /* the next report of this container */
    else
        cq_remove(q); /* `q` is gone */
    if (v == V_DELIVERED) {
        u->delivered++;
        if (u->failing)
            log_info(it->cid, "upstream: delivering to %s again",
                     u->conf->url_log);
        u->failing = false;
        log_debug(it->cid,
                  "upstream: report %s delivered (HTTP %ld, "
                  "attempt %u)",
                  it->report_id, status, it->attempts);
    } else {
        u->dead++;
        log_error(it->cid, "upstream: report %s is a dead letter: %s",
                  it->report_id, err);
    }
    memset(&o, 0, sizeof(o));
    o.report_id = it->report_id;
    o.container_id = it->cid;
    o.attempts = it->attempts;
    o.status = status;
    o.error = err;
    o.url = u->conf->url_log;
    notify(u, v == V_DELIVERED ? u->cbs.delivered : u->cbs.dead, &o);
    item_free(it);
}

/* Starts the head of `q`. False when a callback freed the module. */
static bool
start(struct cq *q)
{
    struct upstream *u = q->u;
    struct conf *c = u->conf;
    struct item *it = q->head;
    struct loop_http_req hr;
    char idem[UPSTREAM_ID_MAX + 32];

    snprintf(idem, sizeof(idem), "Idempotency-Key: %s", it->report_id);
    c->hdrs[c->nlines] = idem; /* loop_http copies it */
    memset(&hr, 0, sizeof(hr));
    hr.method = "POST";
    hr.url = c->url;
    hr.body = it->body;
    hr.body_len = it->len;
    hr.headers = c->hdrs;
    hr.nheaders = c->nlines + 1;
    hr.timeout_ms = c->timeout_ms;
    hr.max_body = UPSTREAM_RESP_MAX;
    hr.ca_file = c->ca_file;
    hr.client_cert = c->client_cert;
    hr.client_key = c->client_key;
    q->got_status = false;
    q->status = 0;
    q->snip_len = 0;
    q->resp_len = 0;
    q->t0_ns = loop_now_ns();
    it->attempts++;
    q->call = loop_http(u->l, &hr, on_headers, on_data, on_done, q);
    c->hdrs[c->nlines] = NULL;
    if (q->call == NULL)
        return retry_later(q, NULL, "could not start the request");
    q->st = CQ_IN_FLIGHT;
    u->in_flight++;
    return true;
}

static void
upstream_on_pump(evutil_socket_t fd, short what, void *arg)
{
    struct upstream *u = arg;

    (void)fd;
    (void)what;
    while (u->ready != NULL && u->in_flight < u->conf->max_in_flight)
        if (!start(ready_pop(u)))
            return;
}

/* ---- the API ---------------------------------------------------------- */

/* What the options are, minus anything secret. */
static void
log_conf(const struct conf *c, const char *verb)
{
    log_info(NULL, "upstream: %s to %s (timeout %ld ms, %u in flight%s)", verb,
             c->url_log, c->timeout_ms, c->max_in_flight,
             c->token != NULL ? ", bearer token" : "");
    if (c->token != NULL && strncasecmp(c->url, "http://", 7) == 0)
        log_warn(NULL, "upstream: the bearer token goes over plain http");
}

int
upstream_new(struct loop *l, const struct upstream_opts *o,
             const struct upstream_cbs *cbs, void *arg, struct upstream **out,
             char *err, size_t errlen)
{
    struct upstream *u = calloc(1, sizeof(*u));
    int result = -1;

    *out = NULL;
    if (u == NULL) {
        snprintf(err, errlen, "upstream: out of memory");
        goto out;
    }
    u->l = l;
    u->cbs = *cbs;
    u->arg = arg;
    u->rnd = (uint32_t)loop_now_ms() ^ ((uint32_t)getpid() << 16) ^ 1u;
    if (u->rnd == 0)
        u->rnd = 1;
    u->conf = conf_new(o, err, errlen);
    if (u->conf == NULL)
        goto out;
    u->nbuckets = HASH_MIN;
    u->buckets = calloc(u->nbuckets, sizeof(*u->buckets));
    u->pump = event_new(loop_base(l), -1, 0, upstream_on_pump, u);
    if (u->buckets == NULL || u->pump == NULL) {
        snprintf(err, errlen, "upstream: out of memory");
        goto out;
    }
    log_conf(u->conf, "delivering");
    *out = u;
    u = NULL;
    result = 0;
out:
    if (u != NULL)
        destroy(u);
    return result;
}

int
upstream_update(struct upstream *u, const struct upstream_opts *o, char *err,
                size_t errlen)
{
    struct conf *c = conf_new(o, err, errlen);

    if (c == NULL)
        return -1;
    conf_free(u->conf);
    u->conf = c;
    log_conf(c, "now delivering");
    schedule_pump(u); /* there may be more slots */
    return 0;
}

static void
destroy(struct upstream *u)
{
    size_t i;
    struct cq *q, *next;

    for (i = 0; u->buckets != NULL && i < u->nbuckets; i++) {
        for (q = u->buckets[i]; q != NULL; q = next) {
            next = q->hnext;
            cq_free(q);
        }
    }
    free(u->buckets);
    if (u->pump != NULL)
        event_free(u->pump);
    conf_free(u->conf);
    free(u);
}

void
upstream_free(struct upstream *u)
{
    if (u == NULL)
        return;
    /* Inside a callback, notify() frees it once the callback returns,
     * so the outcome being looked at stays valid until then; nothing
     * else can run meanwhile. */
    if (u->depth > 0)
        u->dying = true;
    else
        destroy(u);
}

int
upstream_submit(struct upstream *u, const char *report_id,
                const char *container_id, const char *body, size_t len)
{
    struct item *it;
    struct cq *q;
    uint32_t h;

    if (!visible(report_id, UPSTREAM_ID_MAX) ||
        !visible(container_id, UPSTREAM_ID_MAX) || (body == NULL && len > 0))
        return -EINVAL;
    if (len > UPSTREAM_BODY_MAX)
        return -EMSGSIZE;
    if (u->dying)
        return -EINVAL;
    h = hash_str(container_id);
    q = cq_find(u, container_id, h);
    for (it = q != NULL ? q->head : NULL; it != NULL; it = it->next)
        if (strcmp(it->report_id, report_id) == 0)
            return -EEXIST;
    it = calloc(1, sizeof(*it));
    if (it == NULL)
        return -ENOMEM;
    it->report_id = strdup(report_id);
    it->cid = strdup(container_id);
    it->body = malloc(len ? len : 1);
    it->len = len;
    if (it->report_id == NULL || it->cid == NULL || it->body == NULL) {
        item_free(it);
        return -ENOMEM;
    }
    if (len > 0)
        memcpy(it->body, body, len);
    if (q == NULL) {
        q = cq_new(u, container_id, h);
        if (q == NULL) {
            item_free(it);
            return -ENOMEM;
        }
        q->head = q->tail = it;
        ready_push(q);
    } else {
        /* Behind the head, whatever it is doing now. */
        q->tail->next = it;
        q->tail = it;
    }
    u->held++;
    return 0;
}

void
upstream_stats(const struct upstream *u, struct upstream_stats *st)
{
    memset(st, 0, sizeof(*st));
    st->held = u->held;
    st->in_flight = u->in_flight;
    st->waiting = u->waiting;
    st->containers = u->ncq;
    st->delivered = u->delivered;
    st->retries = u->retries;
    st->dead = u->dead;
    memcpy(st->by_code, u->by_code, sizeof(st->by_code));
    st->no_answer = u->no_answer;
    memcpy(st->lat_buckets, u->lat_buckets, sizeof(st->lat_buckets));
    st->lat_count = u->lat_count;
    st->lat_sum = u->lat_sum;
}

/* ---- the token file --------------------------------------------------- */

/* RFC 6750's b64token, without its trailing "=" padding. */
static bool
b64token_char(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' ||
           ch == '~' || ch == '+' || ch == '/';
}

/*
 * What is wrong with `len` bytes read from a token file, or NULL when they
 * are one token and at most one newline (cut off in *len). The answer
 * names a rule, never the bytes: the file may hold a secret after all.
 * Every byte counts; a NUL in particular is not an end.
 */
static const char *
token_problem(const char *buf, size_t *len)
{
    size_t n = *len, i;
    bool pad = false;

    if (memchr(buf, '\0', n) != NULL)
        return "holds a NUL byte";
    if (n > 0 && buf[n - 1] == '\n')
        n -= n > 1 && buf[n - 2] == '\r' ? 2 : 1;
    if (n == 0)
        return "empty";
    if (n > UPSTREAM_TOKEN_MAX)
        return "more than " STR(UPSTREAM_TOKEN_MAX) " characters";
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)buf[i];

        if (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n')
            return "holds whitespace (only one trailing newline may "
                   "follow the token)";
        if (ch < 0x20 || ch == 0x7f)
            return "holds a control character";
        if (ch == '=' && i > 0)
            pad = true;
        else if (pad || !b64token_char(ch))
            return "not a bearer token (RFC 6750: letters, digits and "
                   "-._~+/, then = padding only)";
    }
    *len = n;
    return NULL;
}

/*
 * What makes the file behind `sb` no secret, or NULL: anyone but its
 * owner may read or write it (mode 0066: execute bits grant neither),
 * or its owner is neither us nor root (and could hand it out).
 */
static const char *
private_problem(const struct stat *sb)
{
    if ((sb->st_mode & (S_IRGRP | S_IWGRP | S_IROTH | S_IWOTH)) != 0)
        return "group or others may read or write it (chmod 600)";
    if (sb->st_uid != geteuid() && sb->st_uid != 0)
        return "owned by another user (chown it to reapd's user or root)";
    return NULL;
}

static int
read_token(const char *path, bool private, char **token, char *err,
           size_t errlen)
{
    char buf[TOKEN_FILE_MAX + 1];
    const char *why;
    size_t len = 0;
    struct stat sb;
    ssize_t n;
    int fd, result = -1;

    *token = NULL;
    /* O_NONBLOCK: a FIFO must not hang us before fstat says what it is. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        goto out;
    }
    /* Judged on what was opened, so a file swapped in after the check
     * is not the one read. */
    if (private && (why = private_problem(&sb)) != NULL) {
        snprintf(err, errlen, "%s: %s", path, why);
        goto out;
    }
    /* One byte more than a token file can hold tells it is too long. */
    while (len < sizeof(buf)) {
        n = read(fd, buf + len, sizeof(buf) - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (len == sizeof(buf))
        why = "more than " STR(UPSTREAM_TOKEN_MAX) " characters";
    else
        why = token_problem(buf, &len);
    if (why != NULL) {
        snprintf(err, errlen, "%s: %s", path, why);
        goto out;
    }
    *token = strndup(buf, len);
    if (*token == NULL) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto out;
    }
    result = 0;
out:
    explicit_bzero(buf, sizeof(buf));
    close(fd);
    return result;
}

int
upstream_read_token(const char *path, char **token, char *err, size_t errlen)
{
    return read_token(path, false, token, err, errlen);
}

int
upstream_read_private_token(const char *path, char **token, char *err,
                            size_t errlen)
{
    return read_token(path, true, token, err, errlen);
}

void
upstream_token_free(char *token)
{
    wipe_free(token);
}
