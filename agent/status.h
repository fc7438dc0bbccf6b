/*
 * status — reapd's two HTTP listeners and the routes they serve: the
 * status endpoint (status.listen) and the admin socket (admin.socket),
 * each a hardened server of its own (httpd.h) on the main loop.
 *
 * Routes: /livez, /readyz, /metrics (metrics.h), /v1/status,
 * /v1/containers[/{id}], /v1/leaks, /v1/config (redacted),
 * /v1/schema/report, and the read API's reports (readapi.h): /v1/reports,
 * /v1/reports/stream, /v1/containers/{id}/report[?wait=S]. These are GET
 * and HEAD only (405 for other methods); unknown paths get a JSON 404.
 *
 * Access: the read API (/v1/) names containers, which only root and the
 * docker group may see. Without a token (status.token_file) the status
 * listener answers it 401, naming the admin socket and
 * status.token_file; with one, everything but /livez and /readyz needs
 * "Authorization: Bearer <token>". The admin socket needs no token (its
 * mode, 0600, is the access control) and is the only listener that
 * takes the writes: POST /v1/reports/{report_id}/requeue and
 * /v1/reports/requeue?state=dead (admin.h), and the waits POST /v1/drain
 * and POST /v1/audit (readapi.h; an audit asks the reaper for a
 * containerd task list now). The status listener answers those 405: it
 * changes nothing.
 *
 * Each listener owns its server and its held requests; the reaper, the
 * store, the feed, the outbox and the upstream are borrowed.
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
 * /v1/reports/requeue?state=dead, /v1/drain and /v1/audit. A socket some
 * other process still answers on is not taken over. NULL (logged) when
 * it cannot listen.
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
