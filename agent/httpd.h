/*
 * httpd — a hardened HTTP server on libevent's evhttp, on the main loop,
 * for endpoints that face whatever can reach them. It owns the listener
 * (a TCP port or a unix socket), the connections and their limits, and
 * the helpers that answer; it knows no routes: every request that passes
 * its checks goes to the handler its owner registered (httpd_opts).
 *
 * Every request is bounded (header and body size) and must be complete
 * within a deadline (10 s) from the connection's start or from the end of
 * its previous answer; each answer must be taken within the same
 * deadline. No client can hold the server: at most max_connections (64
 * unless set) are served at once; a new one at that cap closes the
 * connection idle longest between requests, and only when none is idle
 * is it refused (its one request is answered 503 and the connection
 * closed), though the probe paths its owner names are answered on it all
 * the same; of refused connections still waiting for their request,
 * max(max_connections, 256) are kept. An accept() error (out of
 * descriptors) pauses accepting for 100 ms, doubling up to 1 s, instead
 * of spinning, and every log line a client can cause is rate-limited.
 *
 * A handler may hold its request open (httpd_hold: a wait, a stream): the
 * connection is then off the deadline until the hold ends, and when the
 * connection goes first (the client left, reapd stops) the holder's drop
 * callback is told, so that it forgets the request unanswered.
 */
#ifndef REAPD_HTTPD_H
#define REAPD_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_gen.h>

#include "log.h"

struct evbuffer;
struct evhttp_request;
struct evkeyvalq;
struct httpd;
struct httpd_conn;
struct loop;

/*
 * A request to answer: `c` is its connection (NULL for one the server
 * could not track, which cannot be held), `path` its path (never NULL).
 * Once an answer is sent nothing may touch `c`: on failure evhttp frees
 * the connection at once.
 */
typedef void httpd_request_cb(struct httpd_conn *c, struct evhttp_request *req,
                              const char *path, void *arg);

struct httpd_opts {
    const char *name; /* for log lines: "status endpoint" */
    /* A unix socket of mode 0600 from its first instant (the umask at
     * bind), its parent directory made if missing (one level, 0755). */
    bool private_socket;
    /* NULL-terminated: the paths answered on a refused connection too. */
    const char *const *probes;
    httpd_request_cb *on_request;
    void *arg;
};

/*
 * Listens on `listen`: "HOST:PORT" (numeric IPv4/IPv6 host), "unix:/path"
 * or "off" (then returns a server that serves nothing). A unix socket is
 * replaced only when it is a stale one: anything else at its path, or a
 * socket some other process still answers on, is left alone. `o` is
 * copied; its strings are borrowed. NULL (logged) when it cannot listen.
 */
struct httpd *httpd_new(struct loop *l, const char *listen,
                        const struct httpd_opts *o);

/* Closes every connection (telling the holders of held requests) and
 * the listener, and removes its unix socket. */
void httpd_free(struct httpd *h);

/* Connections beyond a smaller cap stay until they close; new ones are
 * judged by it. */
void httpd_set_max_connections(struct httpd *h, size_t n);

/* The request deadline, 10000 ms unless a test shortens it; applies to
 * connections from their next phase on. */
void httpd_set_deadline_ms(struct httpd *h, unsigned ms);

/* Connections open now, served or refused. */
size_t httpd_connections(struct httpd *h);

struct httpd_stats {
    size_t connections;       /* open now, served or refused */
    uint64_t rejected_busy;   /* requests refused 503 at the cap */
    uint64_t evicted_idle;    /* idle ones closed to make room */
    uint64_t evicted_waiting; /* refused ones closed: too many waited */
    uint64_t timed_out;       /* a request or answer past the deadline */
    uint64_t accept_errors;
};
void httpd_stats(const struct httpd *h, struct httpd_stats *st);

/* ---- answers --------------------------------------------------------- */

/*
 * Sends `buf` (may be NULL: no body; still the caller's) with its
 * Content-Length, whatever HTTP version the request named; an answer to
 * HEAD gets the headers only.
 */
void httpd_reply(struct evhttp_request *req, int code, const char *reason,
                 struct evbuffer *buf);

/* What `g` generated, as application/json, with a newline. */
void httpd_send_json(struct evhttp_request *req, int code, const char *reason,
                     yajl_gen g);

/* {"error": msg} as application/json. */
void httpd_send_error(struct evhttp_request *req, int code, const char *reason,
                      const char *msg);

/* ---- token authorization -------------------------------------------- */

/* Whether `req` carries "Authorization: Bearer <token>" (the scheme in
 * any case, RFC 9110 11.1). */
bool httpd_authorized(const char *token, struct evhttp_request *req);

/*
 * Whether `guess` is `token`. It takes as long for any wrong guess as
 * for the right one (a loop over the whole token, whatever the guess's
 * length and first wrong byte), so timing does not tell how much of a
 * guess was right.
 */
bool httpd_token_matches(const char *token, const char *guess);

/* ---- query strings --------------------------------------------------- */

/* A query parameter a route knows: an integer in [min, max], or a
 * string checked by the route. */
struct httpd_qparam {
    const char *key;
    bool is_int;
    long min, max;
    bool set;
    long ival;
    const char *sval; /* in the caller's evkeyvalq */
};

/*
 * Parses the request's query into `p` (n known keys, 1 to 4): each at
 * most once, integers in range. 0, or -1 with a message for a 400 in
 * `err`. `kv` is the caller's to clear (evhttp_clear_headers) whatever
 * the result.
 */
int httpd_parse_query(struct evhttp_request *req, struct evkeyvalq *kv,
                      struct httpd_qparam *p, size_t n, char *err,
                      size_t errlen);

/* ---- held requests --------------------------------------------------- */

/* The connection of a held request is going (the hold is over, `req`
 * unanswered): the holder forgets it; nothing of the server may be
 * called from here. */
typedef void httpd_drop_cb(void *arg);

/*
 * Holds `req` open on `c` (not NULL, nothing held yet): off the deadline
 * until httpd_hold_end(), or until the connection goes, when `drop` is
 * called with `arg`.
 */
void httpd_hold(struct httpd_conn *c, struct evhttp_request *req,
                httpd_drop_cb *drop, void *arg);

/* The hold ends and its request is answered now: it has the answer
 * deadline like any other. */
void httpd_hold_end(struct httpd_conn *c);

/* Whether the client of a held request closed its end (the socket is
 * asked, without taking anything a pipelined next request sent). */
bool httpd_conn_gone(const struct httpd_conn *c);

/* Closes the connection now; a hold on it is dropped (its callback). */
void httpd_conn_close(struct httpd_conn *c);

/* "address:port" of the client (`c` may be NULL), for log lines. */
const char *httpd_conn_peer(const struct httpd_conn *c, char *buf, size_t len);

/* The deadline of c's server, in ms. */
unsigned httpd_conn_deadline_ms(const struct httpd_conn *c);

/* ---- rate-limited logging ------------------------------------------- */

/*
 * One line per 10 s at most for one kind of event a client can cause;
 * the next line says how many were left out (the metrics count them
 * all). Zeroed before its first use.
 */
struct httpd_ratelog {
    bool logged;
    uint64_t last_ms;
    unsigned long long suppressed;
};

void httpd_ratelog(struct httpd_ratelog *r, enum log_level level,
                   const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
