/*
 * upstream — delivers reports to the upstream HTTP endpoint, one POST per
 * report, through the loop (never blocking). See docs/delivery.md.
 *
 * The caller (the outbox) hands over reports with upstream_submit; this
 * module owns each one until it is delivered (2xx) or dead (a 4xx other
 * than 408 and 429), retrying everything else by itself with capped
 * exponential backoff and jitter, without limit. Reports of one container
 * go strictly one at a time, in the order submitted; different containers
 * go concurrently, at most max_in_flight requests at once. Every outcome
 * is a callback: zero or more `retry`, then exactly one `delivered` or
 * `dead` — unless upstream_free comes first, which calls nothing.
 *
 * The bearer token is a secret: it goes into the Authorization header and
 * nowhere else — never into a log line, an error text or a callback, and
 * its memory is wiped when it is dropped.
 */
#ifndef REAPD_UPSTREAM_H
#define REAPD_UPSTREAM_H

#include <stddef.h>
#include <stdint.h>

#include "config.h" /* struct config_header */

struct loop;
struct upstream;

/* Bounds. Error texts (with their NUL) and ids fit these. */
#define UPSTREAM_ERR_MAX    256
#define UPSTREAM_ID_MAX     128        /* report and container ids */
#define UPSTREAM_BODY_MAX   (1u << 20) /* one report */
#define UPSTREAM_RESP_MAX   (64u << 10)
#define UPSTREAM_TOKEN_MAX  4096
#define UPSTREAM_HEADER_MAX 64 /* extra headers */

/* Defaults for the zero values of struct upstream_opts. */
#define UPSTREAM_DEFAULT_IN_FLIGHT      4
#define UPSTREAM_DEFAULT_BASE_MS        1000
#define UPSTREAM_DEFAULT_CAP_MS         300000
#define UPSTREAM_DEFAULT_RETRY_AFTER_MS 3600000

/* Everything is borrowed for the duration of the call and copied. */
struct upstream_opts {
    const char *url; /* http://... or https://... */
    long timeout_ms; /* one attempt, connect to last byte; > 0 */
    const struct config_header *headers; /* extra request headers */
    size_t nheaders;
    /* "Authorization: Bearer <token>"; NULL: none. Visible ASCII only
     * (upstream_read_token gives a b64token). Rejected together with an
     * extra Authorization header. */
    const char *token;
    /* TLS, https only; NULL: libcurl's defaults (the system CAs). */
    const char *ca_file;
    const char *client_cert; /* PEM; may hold the key too */
    const char *client_key;
    unsigned max_in_flight;      /* requests at once (0: default) */
    uint64_t retry_base_ms;      /* first retry delay (0: default) */
    uint64_t retry_max_ms;       /* backoff cap (0: default) */
    uint64_t retry_after_max_ms; /* cap on a Retry-After (0: default) */
};

/* What happened to one attempt. Valid during the callback only. */
struct upstream_outcome {
    const char *report_id;
    const char *container_id;
    unsigned attempts; /* made so far, this one included */
    long status;       /* HTTP status of this attempt; 0: none came */
    const char *error; /* why it failed, bounded; "" when delivered */
    const char *url;   /* where it went, fit for a log (no userinfo) */
    uint64_t delay_ms; /* retry: the next attempt comes in delay_ms, */
    uint64_t next_ms;  /* at loop_now_ms() == next_ms */
};

typedef void (*upstream_cb)(const struct upstream_outcome *o, void *arg);

/*
 * Callbacks run on the loop, never from inside an upstream_* call. They
 * may call upstream_submit, upstream_update, upstream_stats and
 * upstream_free (after which nothing more is called).
 */
struct upstream_cbs {
    upstream_cb delivered; /* 2xx: the report is the upstream's now */
    upstream_cb retry;     /* failed; upstream still owns it and retries */
    upstream_cb dead;      /* rejected (4xx): dropped here, the caller
                              keeps it as a dead letter */
};

/*
 * Validates `o` and makes a delivery module on `l`. Returns 0 and *out
 * (free with upstream_free), or -1 with the reason in `err` (which never
 * holds the token).
 */
int upstream_new(struct loop *l, const struct upstream_opts *o,
                 const struct upstream_cbs *cbs, void *arg,
                 struct upstream **out, char *err, size_t errlen);

/*
 * New options (a reload): validated first, then used by every attempt
 * that starts afterwards; attempts in flight finish with what they
 * started with, and waiting retries keep their time. -1 (and nothing
 * changed) with the reason in `err` when `o` is not valid.
 */
int upstream_update(struct upstream *u, const struct upstream_opts *o,
                    char *err, size_t errlen);

/*
 * Cancels every request and timer and frees everything; no callback runs
 * afterwards. Reports not yet delivered are simply dropped: the caller
 * still has them and submits them again to a new module.
 */
void upstream_free(struct upstream *u);

/*
 * Hands over one report (all copied). Reports with the same container_id
 * are delivered in the order submitted. Ids: 1..UPSTREAM_ID_MAX-1 visible
 * ASCII characters (the report id becomes the Idempotency-Key). Returns
 * 0; -EINVAL for a bad id; -EMSGSIZE for a body over UPSTREAM_BODY_MAX;
 * -EEXIST when that report is already held for that container;
 * -ENOMEM. Never calls back
 * from inside: the first attempt starts on the next loop turn.
 */
int upstream_submit(struct upstream *u, const char *report_id,
                    const char *container_id, const char *body, size_t len);

/* Attempts by the upstream's answer: index = HTTP status (100..599);
 * no_answer: none came (connection refused, timeout, TLS...). */
#define UPSTREAM_CODE_MAX 600
/* The attempt duration histogram's upper bounds, in seconds. */
#define UPSTREAM_LAT_N 12
const double *upstream_latency_bounds(void);

struct upstream_stats {
    size_t held;       /* reports submitted, not yet delivered or dead */
    size_t in_flight;  /* requests running now */
    size_t waiting;    /* containers whose head report awaits a retry */
    size_t containers; /* containers with reports held */
    uint64_t delivered, retries, dead; /* totals */
    uint64_t by_code[UPSTREAM_CODE_MAX];
    uint64_t no_answer;
    /* Attempts by duration, from the request's start to its end:
     * lat_buckets[i] counts those <= bound i (not cumulative), the last
     * one those above every bound. */
    uint64_t lat_buckets[UPSTREAM_LAT_N + 1];
    uint64_t lat_count;
    double lat_sum; /* seconds */
};

void upstream_stats(const struct upstream *u, struct upstream_stats *st);

/*
 * Reads a bearer token from `path` (config upstream.token_file, and
 * status.token_file through status_read_token): a regular file holding
 * 1..UPSTREAM_TOKEN_MAX characters of RFC 6750's b64token (letters,
 * digits, "-._~+/", then "=" padding only) and at most one trailing
 * newline ("\n" or "\r\n"), nothing else: a NUL byte, any other
 * whitespace or control byte, an empty or longer file is refused. Returns 0
 * and *token (the caller's; release with upstream_token_free, which wipes
 * it), or -1 with "PATH: reason" in `err`; the file's content is never
 * quoted.
 */
int upstream_read_token(const char *path, char **token, char *err,
                        size_t errlen);
/*
 * upstream_read_token, for a token that guards (status.token_file): the
 * file opened (a symlink is followed: what counts is the file read) must
 * also be private, neither readable nor writable by its group or others
 * (no bit of 0066), and owned by this process's user or root.
 */
int upstream_read_private_token(const char *path, char **token, char *err,
                                size_t errlen);
void upstream_token_free(char *token);

#endif
