/*
 * loop — the one event loop: a libevent event_base and the libcurl multi
 * handle it drives.
 *
 * This is the only module that touches curl_multi_* or raw sockets. All
 * HTTP in reapd (the Docker socket, containerd over HTTP/2, upstream) is a
 * loop_http() call: it never blocks, and its callbacks run on the loop.
 * The wiring follows the pattern of curl's multi-event.c / hiperfifo.c:
 * libcurl tells us which sockets to watch and when its timer is due;
 * finished transfers are removed only while draining curl_multi_info_read,
 * never from inside a libcurl callback.
 */
#ifndef REAPD_LOOP_H
#define REAPD_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct loop;
struct loop_http_call;

/* NULL on failure (logged). */
struct loop *loop_new(void);
/* Cancels every call still in flight (no callbacks), then frees. */
void loop_free(struct loop *l);
struct event_base *loop_base(struct loop *l);

/* Monotonic milliseconds and nanoseconds (CLOCK_MONOTONIC). */
uint64_t loop_now_ms(void);
uint64_t loop_now_ns(void);

/* Whether the loop is in another turn than `*last` says (then *last
 * becomes this one): libevent's cached time of the turn tells turns
 * apart. Outside the loop each call is a turn of its own. */
struct timeval;
bool loop_new_turn(struct loop *l, struct timeval *last);

/* (Re)arms the timer `ev` to fire `ms` milliseconds from now: every wait
 * in reapd is given in milliseconds, as Redis's ae does. */
struct event;
void loop_timer_ms(struct event *ev, uint64_t ms);

enum loop_http_error {
    HTTPC_OK = 0,        /* a response arrived (any status) */
    HTTPC_ERR_CONNECT,   /* could not connect (engine down, no socket) */
    HTTPC_ERR_TIMEOUT,   /* the per-request timeout passed */
    HTTPC_ERR_TOO_LARGE, /* body larger than max_body */
    HTTPC_ERR_ABORTED,   /* a data callback asked to stop */
    HTTPC_ERR_OTHER,     /* anything else libcurl reports */
};

struct loop_http_req {
    const char *method; /* "GET" (default), "POST", "DELETE" */
    /* Over a unix socket, give each socket its own host name in the URL
     * ("http://docker/...", "http://containerd/..."): libcurl 7.88 may
     * otherwise hand a request for one socket a connection made to
     * another socket under the same name. */
    const char *url;
    const char *unix_socket; /* NULL: TCP */
    const char *body;        /* copied; may be NULL */
    size_t body_len;
    const char *const *headers; /* "Name: value" lines, copied */
    size_t nheaders;
    long timeout_ms;         /* whole transfer; 0 = none (streams) */
    long connect_timeout_ms; /* 0 = libcurl default */
    size_t max_body;         /* buffered responses (0: 4 MiB) */
    int http2_prior_knowledge;
    /* A long-lived stream (an events subscription): started at once,
     * never counted against loop_set_max_calls(). */
    int stream;
    /* With on_data: once the data callbacks of a loop turn have taken
     * about 2 ms, the rest waits for the next turn (the transfer is
     * paused, nothing is lost), so a huge answer or a burst of events
     * never holds the loop. HTTP/1 only (ignored with prior knowledge:
     * libcurl 7.88's pausing of an HTTP/2 stream is not relied on). */
    int yield;
    /* TLS for https upstreams; NULL = system defaults. */
    const char *ca_file;
    const char *client_cert;
    const char *client_key;
};

struct loop_http_resp {
    enum loop_http_error error;
    const char *errmsg; /* libcurl's words when error != HTTPC_OK */
    long status;        /* HTTP status, 0 if none */
    const char *body;   /* buffered body (NUL-terminated); NULL when
                           streaming through on_data */
    size_t body_len;
    /* Header and trailer lines as received, "name: value\0..." */
    const char *const *header_lines;
    size_t nheader_lines;
};

/* Status line and headers are in: `status` is known. */
typedef void (*loop_http_headers_cb)(long status, void *arg);
/* Streaming body data; return 0 to go on, -1 to abort the transfer. */
typedef int (*loop_http_data_cb)(const char *buf, size_t len, void *arg);
/* The call is over. `res` and everything in it is valid only during the
 * callback; the call is freed right after, so drop your handle here. */
typedef void (*loop_http_done_cb)(const struct loop_http_resp *res, void *arg);

/*
 * Starts a request. `on_headers` and `on_data` may be NULL; without
 * on_data the body is buffered (bounded by max_body) and handed to
 * on_done. Returns a handle valid until on_done runs or loop_http_cancel
 * is called, or NULL when the request could not be started (then no
 * callback runs). Never blocks.
 */
struct loop_http_call *loop_http(struct loop *l,
                                 const struct loop_http_req *req,
                                 loop_http_headers_cb on_headers,
                                 loop_http_data_cb on_data,
                                 loop_http_done_cb on_done, void *arg);

/* Stops a call: none of its callbacks runs after this returns. Safe from
 * any callback, including the call's own on_headers/on_data. */
void loop_http_cancel(struct loop_http_call *c);

/* Value of header `name` (case-insensitive) in a response, or NULL. */
const char *loop_http_header(const struct loop_http_resp *res,
                             const char *name);

/* Calls in flight, started or waiting (for metrics and tests). */
size_t loop_http_active(const struct loop *l);
/* Calls waiting for room under the cap. */
size_t loop_http_waiting(const struct loop *l);

/* How many times a socket of libcurl's was added to or removed from the
 * loop's poll set (an epoll_ctl each). A connection libcurl keeps stays
 * in it between calls (so a call on it adds none), until libcurl closes
 * it or, while idle, the server writes to or closes it. */
uint64_t loop_socket_changes(const struct loop *l);
/* libcurl handles made so far: a finished call's handle is reset and
 * kept for the next (a few at most; not a stream's). */
uint64_t loop_easy_made(const struct loop *l);

/*
 * At most `n` calls that are not streams are handed to libcurl at once
 * (default LOOP_MAX_CALLS); the rest wait, first come first served, and
 * their timeout starts when they are handed over. A burst of thousands of
 * exits so costs the engine and libcurl a bounded number of connections,
 * and each call a constant amount of work. 0 = no cap.
 */
#define LOOP_MAX_CALLS 128
void loop_set_max_calls(struct loop *l, size_t n);

#endif
