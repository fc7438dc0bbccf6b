/*
 * status — the read-only HTTP status endpoint, served by libevent's evhttp
 * on the main loop: /livez, /readyz, /metrics, /v1/containers[/{id}],
 * /v1/reports (a cursor with ?after=SEQ), /v1/reports/stream (NDJSON),
 * /v1/containers/{id}/report[?wait=S], /v1/status, /v1/leaks, /v1/config.
 *
 * Waits, drains and streams are held on the loop (timers and the feed,
 * never a blocking wait): at most 512 at once per listener, 16 of them
 * streams; beyond, 503 with Retry-After. A held request's client is
 * checked each second and its hold dropped when it has gone; a stream
 * gets its next chunk only once the last is out, and is cut when one
 * is not taken within the deadline.
 *
 * Every request is bounded (header and body size) and answered from
 * memory without blocking; unknown paths get a JSON 404 and methods other
 * than GET/HEAD a 405. The read API (/v1/) names containers, which only
 * root and the docker group may see: without a token (status.token_file)
 * the status listener answers it 401, naming the admin socket and
 * status.token_file; with one, everything but /livez and /readyz needs
 * "Authorization: Bearer <token>". The admin socket needs no token.
 *
 * The endpoint faces whatever can reach its port, so no client can hold
 * it: at most status.max_connections connections are served at once; a
 * new one at that cap closes the connection idle longest between
 * requests, and only when none is idle is it refused (its one request is
 * answered 503 and the connection closed), though /livez and /readyz are
 * answered on it all the same; of refused connections still waiting for
 * their request, max(status.max_connections, 256) are kept. Each connection
 * must deliver a complete request within a deadline (10 s) from its start or
 * from the end of its previous answer, and take each answer within the same
 * deadline. An accept() error (out of descriptors) pauses accepting for 100
 * ms, doubling up to 1 s, instead of spinning, and every log line a client can
 * cause is rate-limited.
 */
#ifndef REAPD_STATUS_H
#define REAPD_STATUS_H

#include <stdbool.h>
#include <stddef.h>

struct config;
struct loop;
struct reaper;
struct status;

/*
 * Listens on `listen`: "HOST:PORT" (numeric IPv4/IPv6 host), "unix:/path"
 * or "off" (then returns a status that serves nothing). `reaper` is
 * borrowed. Returns NULL and logs why when it cannot listen.
 */
struct status *status_new(struct loop *l, const char *listen,
                          struct reaper *reaper);
void status_free(struct status *s);

/*
 * The admin socket (config admin.socket): a unix socket at `path` (or
 * "off"), mode 0600 from the moment it exists, its parent directory
 * made if missing (one level, 0755). It serves everything the status
 * endpoint does, without a token (the socket's mode is the access
 * control), and the writes: POST /v1/reports/{report_id}/requeue,
 * /v1/reports/requeue?state=dead and /v1/drain. A socket some other
 * process still answers on is not taken over. NULL (logged) when it
 * cannot listen.
 */
struct status *status_new_admin(struct loop *l, const char *path,
                                struct reaper *reaper);

/* Reports made durable (store_on_report) come through `f` (borrowed):
 * waits by container and the report stream need it. */
struct feed;
void status_set_feed(struct status *s, struct feed *f);

/* Requeued reports are handed to the outbox at once (borrowed; NULL
 * without an upstream). */
struct outbox;
void status_set_outbox(struct status *s, struct outbox *ob);

/* Delivery attempts in /metrics come from `u` (borrowed; NULL without an
 * upstream). */
struct upstream;
void status_set_upstream(struct status *s, struct upstream *u);

/* Serves /v1/reports and the outbox metrics from `st` (borrowed). */
struct store;
void status_set_store(struct status *s, struct store *st);

/*
 * The bearer token `cfg` asks for (status.token_file), read now so that
 * an unreadable file, or one that is not private (upstream.h:
 * upstream_read_private_token), rejects a config before anything is
 * swapped. 0 and
 * *token (NULL when there is no token_file), or -1 with a reason in
 * `err` that never quotes the file.
 */
int status_read_token(const struct config *cfg, char **token, char *err,
                      size_t errlen);

/*
 * Whether `guess` is `token`. It takes as long for any wrong guess as
 * for the right one (a loop over the whole token, whatever the guess's
 * length and first wrong byte), so timing does not tell how much of a
 * guess was right.
 */
bool status_token_matches(const char *token, const char *guess);

/*
 * Serves /v1/config from `cfg` (borrowed: call again before it is
 * freed) and applies its status.max_connections; `token` (from
 * status_read_token, may be NULL: no auth) is owned from now on.
 */
void status_set_config(struct status *s, const struct config *cfg,
                       char *token);

/* A SIGHUP reload was applied (`ok`) or rejected; for
 * reapd_config_reloads_total. */
void status_note_reload(struct status *s, bool ok);

/* Connections open now, served or refused; for tests. */
size_t status_connections(struct status *s);

/* The request deadline, 10000 ms unless a test shortens it; applies to
 * connections from their next phase on. */
void status_set_deadline_ms(struct status *s, unsigned ms);

#endif
