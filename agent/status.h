/*
 * status — the read-only HTTP status endpoint, served by libevent's evhttp
 * on the main loop: /livez, /readyz, /metrics, /v1/containers[/{id}].
 *
 * Every request is bounded (header and body size, a timeout) and answered
 * from memory without blocking; unknown paths get a JSON 404 and methods
 * other than GET/HEAD a 405.
 */
#ifndef REAPD_STATUS_H
#define REAPD_STATUS_H

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

/* Serves /v1/reports and the outbox metrics from `st` (borrowed). */
struct store;
void status_set_store(struct status *s, struct store *st);

#endif
