/*
 * config — the configuration file: JSON with comments, defaults for every
 * key, and validation that points at FILE:LINE:COL for every problem.
 *
 * A config is immutable once loaded; reload builds a new one and swaps the
 * pointer, so anything in flight keeps what it started with.
 *
 * This header is the config's whole interface. Its files: config.c
 * (loading, the document's top level), config_keys.c (every key, its
 * range or check, its default; config_default, config_free),
 * config_values.c (problems at FILE:LINE:COL, typed values),
 * config_check.c (the checks of string values), config_policies.c
 * (policies and the labels filter) and config_json.c (config_to_json).
 */
#ifndef REAPD_CONFIG_H
#define REAPD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"
#include "policy.h"

/* The "labels" filter's bounds: globs per list, bytes per glob. */
#define CONFIG_LABEL_GLOBS    64
#define CONFIG_LABEL_GLOB_MAX 256

struct config_header {
    char *name;
    char *value;
};

struct config {
    char *node;      /* default: gethostname() */
    char *state_dir; /* default: /var/lib/reapd */

    char *docker_socket;               /* /var/run/docker.sock */
    int64_t docker_request_timeout_ms; /* 30000: one engine call */
    int64_t docker_reconnect_max_ms;   /* 30000: events backoff cap */

    char *containerd_socket;    /* "auto" | "off" | path */
    char *containerd_namespace; /* "moby" */
    /* How often the task list is checked for tasks without an engine
     * container (0: only after each (re)subscription). */
    int64_t containerd_audit_interval_ms; /* 60000 */
    bool containerd_reap_orphans;         /* true */

    char *status_listen; /* "127.0.0.1:9323" | "unix:/path" | "off" */
    /* NULL: the endpoint is open; else a file whose content is the
     * bearer token every endpoint but /livez and /readyz requires. */
    char *status_token_file;
    int64_t status_max_connections; /* 64: open connections at once */
    char *admin_socket;             /* "/run/reapd/admin.sock" | "off" */

    char *upstream_url;          /* NULL: no upstream */
    int64_t upstream_timeout_ms; /* 5000 */
    char *upstream_token_file;   /* "Authorization: Bearer <its text>" */
    char *upstream_ca_file;      /* https only; NULL: system CAs */
    char *upstream_client_cert;
    char *upstream_client_key;
    int64_t upstream_max_in_flight; /* 4 */
    int64_t upstream_retry_base_ms; /* 1000 */
    int64_t upstream_retry_max_ms;  /* 300000 */
    struct config_header *upstream_headers;
    size_t nupstream_headers;

    int64_t delete_max_in_flight;    /* 8 */
    int64_t delete_poll_interval_ms; /* 500 */
    int64_t delete_warn_after_ms;    /* 60000 */
    int64_t delete_give_up_after_ms; /* 0 = never */
    int64_t delete_retry_base_ms;    /* 500 */
    int64_t delete_retry_max_ms;     /* 30000 */

    /* default: one policy, "managed" (label reapd.managed=true ->
     * remove), and default_action ignore. A file's "policies" replaces
     * the whole list. */
    /* Delivered reports are pruned from the state database beyond these
     * (pending and dead ones never are); 0: no limit. */
    int64_t retention_delivered_max_age_ms; /* 7 days */
    int64_t retention_delivered_max_count;  /* 100000 */
    /* The state database never grows past this; beyond it, writes fail
     * as on a full disk (loudly, nothing accepted is lost). 0: none. */
    int64_t retention_max_db_bytes; /* 1 GiB */
    /* reports.jsonl is rotated once it holds this many bytes (0: never),
     * and this many rotated files are kept, reports.jsonl.1 the newest
     * (0: none). */
    int64_t reports_log_max_bytes; /* 64 MiB */
    int64_t reports_log_keep;      /* 5 */

    struct policy_set policies;
    /* The labels reapd keeps of each container, taken in through it (the
     * engine's events, lists and inspects) besides those a policy names;
     * default: empty, all kept. */
    struct label_filter labels;

    enum log_level log_level;   /* info */
    enum log_format log_format; /* text */

    char *source; /* file it came from, or "<default>" */
};

/* One problem, already formatted as "FILE:LINE:COL: message". */
struct config_errors {
    char **lines;
    size_t count;
};

/* The embedded default config. Caller frees with config_free. */
struct config *config_default(void);

/*
 * Loads and validates `path`. On success returns 0 and *out (caller frees).
 * On failure returns -1, *out is NULL and `errs` holds every problem found
 * (caller frees with config_errors_clear). A file that cannot be read is
 * one error "PATH: <strerror>". Problems are appended: `errs` must start
 * zeroed (or cleared); it may be NULL when only the verdict matters.
 */
int config_load(const char *path, struct config **out,
                struct config_errors *errs);

/* Same, from a buffer; `source` names it in messages. */
int config_parse(const char *source, const char *text, size_t len,
                 struct config **out, struct config_errors *errs);

void config_free(struct config *cfg);

/*
 * The effective config as one JSON object (every key, defaults
 * included) in a malloc'd, NUL-terminated buffer; *len (may be NULL)
 * gets its length. With `redact`, what could be a secret is replaced by
 * "<redacted>": upstream header values, and the userinfo, query and
 * fragment of upstream.url; files (token_file...) are shown by path,
 * never read. NULL when out of memory.
 */
char *config_to_json(const struct config *cfg, bool redact, size_t *len);
void config_errors_clear(struct config_errors *errs);

#endif
