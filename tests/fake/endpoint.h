/*
 * endpoint — the harness of the status endpoint's tests (test_status,
 * test_httpd, test_readapi, test_admin, test_metrics): a real reaper on
 * the fake engine (testutil.h's tu_reapd) behind a status endpoint on
 * 127.0.0.1 or a unix socket, optionally with the admin socket, a store
 * and a feed beside it; requests through loop_http on the same
 * event_base, or raw ones through sockets for what libcurl would never
 * send. Every helper fails the running cmocka test when something it
 * needs goes wrong. Memory a function returns is the caller's.
 */
#ifndef ENDPOINT_H
#define ENDPOINT_H

#include <stddef.h>

#include "loop.h"
#include "testutil.h"

struct config;
struct feed;
struct json_node;
struct status;
struct store;

#define EP_TOKEN "s3cr3t-t0ken-value"
#define EP_AUTH  "Authorization: Bearer " EP_TOKEN

struct ep {
    struct tu_reapd reapd;
    char ssock[96]; /* the status endpoint's unix socket, if any */
    int port;
    struct status *s;
    struct config *cfg; /* ep_new's, with the token; NULL: none */
    char tokpath[160];  /* its token file, if any */
    const char *auth;   /* sent by ep_request(); NULL: nothing */
};

/* Everything but the status endpoint. */
struct ep *ep_base(void);

/* With the endpoint on 127.0.0.1:<a free port>, no config, no token:
 * the read API closed. */
struct ep *ep_plain(void);

/* A config whose status.token_file holds EP_TOKEN (a 0600 file), in
 * force on `s`; ep_request() sends the token from now on. */
void ep_token(struct ep *h, struct status *s);

/* ep_plain with the token: the read API open to ep_request(). */
struct ep *ep_new(void);

void ep_free(struct ep *h);

/* Whether the reaper tracks at least *(const size_t *)arg containers. */
int ep_tracked(struct ep *h, const void *arg);

/* A second config for the endpoint, from `extra` (JSON members); the
 * caller frees it. */
struct config *ep_config(struct ep *h, const char *extra);

/* A config with secrets (upstream URL and header) and a token in force
 * on h->s; its token file's path in `tokpath`. The caller frees it. */
struct config *ep_secret_config(struct ep *h, char *tokpath, size_t cap);

/* ---- one request through loop_http ----------------------------------- */

struct ep_resp {
    int done;
    enum loop_http_error error;
    long status;
    char *body;
    size_t len;
    char ctype[128];
    char allow[64];
    char www[64];
    char conn[32];
};

/* loop_http's callback filling a struct ep_resp (`arg`). */
void ep_on_done(const struct loop_http_resp *res, void *arg);

void ep_resp_clear(struct ep_resp *r);

/* `method` `path` on h's listener (its unix socket when h->ssock is
 * set), with `hdrs` (NULL: h->auth, if any) and `body`; waits for the
 * answer. */
void ep_request_full(struct ep *h, const char *method, const char *path,
                     const char *const *hdrs, size_t nhdrs, const char *body,
                     struct ep_resp *r);

void ep_request(struct ep *h, const char *method, const char *path,
                struct ep_resp *r);

/* GET `path` with the header `auth` (NULL: none). */
void ep_request_auth(struct ep *h, const char *path, const char *auth,
                     struct ep_resp *r);

/* The body as JSON; fails the test when it is not. */
struct json_node *ep_json_body(const struct ep_resp *r);

/* /livez answers {"live":true}. */
void ep_expect_live(struct ep *h);

/* `method` `path`'s status code. */
long ep_status_of(struct ep *h, const char *method, const char *path);

/* ---- raw connections ------------------------------------------------- */

/* HTTP/1.x status code of a raw answer, or -1. */
int ep_raw_status(const char *buf);

/* A raw TCP connection to the endpoint, non-blocking, not yet accepted
 * (the kernel completes the handshake from the backlog). */
int ep_raw_connect(struct ep *h);

/* A raw request on a new TCP connection, left open for the answer;
 * h->auth goes in after its request line. */
int ep_raw_send(struct ep *h, const char *req);

/* Collects what arrives on `fd` for `ms` after what `buf` holds already,
 * running the loop; returns the bytes; *closed when the server closed. */
size_t ep_raw_gather(struct ep *h, int fd, char *buf, size_t cap, int ms,
                     int *closed);

/* ---- /metrics --------------------------------------------------------- */

/* The value of a metric line "name value", or -1. */
long long ep_metric_value(const char *text, const char *name);

/* A sample's value by its exact "name{labels}" text, or -1. */
double ep_sample(const char *text, const char *series);

/* ---- the read API and the admin socket -------------------------------- */

/* The endpoint on TCP and the admin socket (in h->ssock's place: h->s
 * serves TCP, `admin` the socket), both on a store and a feed, and the
 * reaper started and ready. */
struct ep_api {
    struct ep *h;
    struct status *admin;
    char asock[96];
    struct store *st;
    struct feed *feed;
};

void ep_api_open(struct ep_api *a);
void ep_api_close(struct ep_api *a);

/* One request on the admin socket. */
void ep_admin_request(struct ep_api *a, const char *method, const char *path,
                      struct ep_resp *r);

/* As ep_status_of, on the admin socket. */
long ep_admin_status_of(struct ep_api *a, const char *method,
                        const char *path);

#endif
