/*
 * reapctl_http — reapctl's connection to reapd.
 *
 * HTTP to a running reapd over its admin unix socket (every command) or
 * its TCP status listener (--url, read-only), through one blocking
 * libcurl easy handle: a command-line client has nothing else to do
 * while it waits. An answer is kept whole up to CTL_BODY_MAX; a stream
 * (the report stream) is handed over a line at a time, each line bounded
 * the same. Nothing here prints: a failure leaves its message for the
 * caller (ctl_error). Part of reapctl only; reapd does not link it.
 *
 * Ownership: the ctl owns its easy handle, its copy of the URL and the
 * headers with the token (wiped when freed); `socket` and `token_file`
 * are the caller's and must outlive it. libcurl's global state
 * (curl_global_init) is the caller's too.
 */
#ifndef REAPD_REAPCTL_HTTP_H
#define REAPD_REAPCTL_HTTP_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

/* The largest answer, or line of a stream, kept. */
#define CTL_BODY_MAX      (16u << 20)
#define CTL_BODY_MAX_TEXT "16 MiB"

/* What one transfer came to. */
enum ctl_xfer {
    CTL_ANSWER,      /* reapd answered: ctl_code and ctl_body */
    CTL_UNREACHABLE, /* no connection (no socket, refused) */
    CTL_CUT,         /* connected, then the connection broke */
    CTL_FAILED,      /* anything else: timeout, too large, ... */
    CTL_STOPPED,     /* the stop flag was set (a signal) */
};

struct ctl;

/*
 * A connection to `url` (http[s]://HOST:PORT, checked here) or else to
 * `socket`, every request sending the token read from `token_file` (NULL:
 * none). A transfer in progress ends as soon as *stop is non-zero (set by
 * a signal handler). NULL with why in `err`; *bad_target is then true
 * when `url` or `socket` is not one (a usage error).
 */
struct ctl *ctl_new(const char *socket, const char *url,
                    const char *token_file, const volatile sig_atomic_t *stop,
                    bool *bad_target, char *err, size_t errlen);
/* NULL is fine. */
void ctl_free(struct ctl *c);

/* One request: `method` GET or POST (with an empty body), `path` with its
 * query, `timeout_ms` 0 for none. On CTL_ANSWER, ctl_code and ctl_body
 * hold reapd's answer; otherwise ctl_error says what went wrong (except
 * after CTL_STOPPED). */
enum ctl_xfer ctl_request(struct ctl *c, const char *method, const char *path,
                          long timeout_ms);

/* A line of a stream, without its newline (NUL-terminated at `len`): 0
 * to go on, or -1 to end the transfer with the reason in `err`. */
typedef int (*ctl_line_cb)(const char *line, size_t len, char *err,
                           size_t errlen, void *arg);

/*
 * A GET of a stream (`what` names it in messages), without a timeout:
 * once reapd answers 200, each line of the body goes to `cb` as it
 * arrives; any other answer is kept as ctl_request keeps it. *opened:
 * the body of a 200 had begun. *ended: the transfer was ended here, by
 * `cb` or a line over CTL_BODY_MAX (why in ctl_error).
 */
enum ctl_xfer ctl_stream(struct ctl *c, const char *path, const char *what,
                         ctl_line_cb cb, void *arg, bool *opened, bool *ended);

/* The last answer: its HTTP status, and its body, NUL-terminated ("" when
 * there is none), valid until the next request. */
long ctl_code(const struct ctl *c);
const char *ctl_body(const struct ctl *c, size_t *len);
/* Why the last transfer failed. */
const char *ctl_error(const struct ctl *c);
/* Where reapd is asked: the admin socket's path, or the URL. */
const char *ctl_target(const struct ctl *c);
/* Through the admin socket (not the status listener)? */
bool ctl_on_socket(const struct ctl *c);
/* The token's file, or NULL when none is sent. */
const char *ctl_token_file(const struct ctl *c);

#endif
