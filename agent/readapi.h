/*
 * readapi — the read API's answers about reports, and every request it
 * holds open: /v1/reports (newest first, or a cursor with ?after=SEQ),
 * /v1/reports/stream (NDJSON, for as long as the client reads),
 * /v1/containers/{id}/report[?wait=S] (the report, or the wait for it),
 * and the admin socket's waits POST /v1/drain[?wait=S] and POST
 * /v1/audit[?wait=S] (which asks the reaper for a containerd audit and
 * waits for its answer). Reports are read from the store; nothing here
 * writes to it.
 *
 * Waits, drains, audits and streams are held on the loop (timers and the
 * feed, never a blocking wait): at most 512 at once per listener, 16 of
 * them streams; beyond, 503 with Retry-After. A held request's client is
 * checked each second and its hold dropped when it has gone; a stream
 * gets its next chunk only once the last is out, and is cut when one is
 * not taken within the server's deadline.
 *
 * The router (status.c) decides who may ask what; each serve function
 * answers `req`, now or once its hold ends. The reaper, store and feed
 * are borrowed.
 */
#ifndef REAPD_READAPI_H
#define REAPD_READAPI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_gen.h>

struct evhttp_request;
struct feed;
struct httpd_conn;
struct loop;
struct reaper;
struct readapi;
struct store;

/* One per listener: its held requests and their bounds. NULL when out
 * of memory. */
struct readapi *readapi_new(struct loop *l, struct reaper *r);

/* After the listener's httpd_free, which drops every held request. */
void readapi_free(struct readapi *ra);

/* Reports come from `st` (NULL: the report routes answer 503). */
void readapi_set_store(struct readapi *ra, struct store *st);

/* Durable reports are heard of through `f` (NULL: no waits by
 * container, no streams). */
void readapi_set_feed(struct readapi *ra, struct feed *f);

/* GET /v1/reports[?limit=N][&after=SEQ][&container_id=ID][&state=S] */
void readapi_serve_reports(struct readapi *ra, struct evhttp_request *req);

/* GET /v1/containers/{id}/report[?wait=S]: `id` is a valid container id;
 * `c` may be NULL (then a wait is refused 503). */
void readapi_serve_container_report(struct readapi *ra, struct httpd_conn *c,
                                    struct evhttp_request *req,
                                    const char *id);

/* GET /v1/reports/stream[?after=SEQ] */
void readapi_serve_stream(struct readapi *ra, struct httpd_conn *c,
                          struct evhttp_request *req);

/* POST /v1/drain[?wait=S]: 200 once nothing is between an exit and its
 * report or waits for delivery, else 202 with the counts. */
void readapi_serve_drain(struct readapi *ra, struct httpd_conn *c,
                         struct evhttp_request *req);

/* POST /v1/audit[?wait=S]: asks the reaper for a containerd audit now
 * and answers with what it found (S defaults to 30). */
void readapi_serve_audit(struct readapi *ra, struct httpd_conn *c,
                         struct evhttp_request *req);

/* What a drain waits for. */
struct readapi_drain {
    uint64_t cleaning; /* between an exit and its report */
    uint64_t pending;  /* reports not yet delivered upstream */
};

/* false, with the store's error in `err`, when it could not be read. */
bool readapi_drain_counts(struct readapi *ra, struct readapi_drain *d,
                          char *err, size_t errlen);

/* The leaked containerd tasks `r` knows of, as a JSON array, as
 * /v1/leaks and an audit's answer list them. */
void readapi_gen_leaks(yajl_gen g, struct reaper *r);

struct readapi_stats {
    uint64_t held;     /* requests held now */
    uint64_t streams;  /* of them, report streams */
    uint64_t rejected; /* refused (503): the bound was reached */
    uint64_t cut;      /* streams cut: their client did not read */
};
void readapi_stats(const struct readapi *ra, struct readapi_stats *st);

#endif
