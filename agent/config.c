/*
 * config — loading the configuration file; see config.h.
 *
 * Loading never stops at the first problem: an operator running
 * --check-config should see everything that is wrong in one go, each
 * problem pointing at FILE:LINE:COL. A config starts out as the embedded
 * default and every key in the file overrides one default, so the file
 * only has to say what differs.
 *
 * Here: reading the file (bounded), the document's top level, each key
 * to its parser, the sections with keys of their own (upstream.headers,
 * log) and the checks across keys. The keys and their defaults are in
 * config_keys.c, their values are read by config_values.c and checked by
 * config_check.c, the policies are config_policies.c's; the effective
 * config as JSON is config_json.c.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_check.h"
#include "config_keys.h"
#include "config_policies.h"
#include "config_values.h"
#include "json.h"

#define CONFIG_MAX_BYTES (1024 * 1024)

/* ---- upstream, log ----------------------------------------------------- */

static void
parse_headers(struct config_ctx *c, const struct json_node *obj,
              struct config *cfg)
{
    char k[CONFIG_SHOW_MAX + 4];
    struct config_header *h;
    size_t i, j;

    if (!config_expect_type(c, obj, JSON_OBJECT, "an object",
                            "upstream.headers"))
        return;
    config_dup_keys(c, obj, "upstream.headers", true);
    h = calloc(obj->count ? obj->count : 1, sizeof(*h));
    if (!h) {
        c->oom = true;
        return;
    }
    for (i = 0; i < cfg->nupstream_headers; i++) {
        free(cfg->upstream_headers[i].name);
        free(cfg->upstream_headers[i].value);
    }
    free(cfg->upstream_headers);
    cfg->upstream_headers = h;
    cfg->nupstream_headers = 0;

    for (i = 0; i < obj->count; i++) {
        const struct json_node *m = obj->items[i];
        bool ok = m->key_len > 0;

        config_show(k, m->key, m->key_len);
        for (j = 0; j < m->key_len && ok; j++)
            ok = config_is_tchar(m->key[j]);
        if (!ok) {
            config_problem(
                c, m->key_offset,
                "upstream.headers: \"%s\" is not a valid header name", k);
            continue;
        }
        if (strcasecmp(m->key, "Content-Type") == 0 ||
            strcasecmp(m->key, "Content-Length") == 0 ||
            strcasecmp(m->key, "Transfer-Encoding") == 0 ||
            strcasecmp(m->key, "Idempotency-Key") == 0) {
            config_problem(c, m->key_offset,
                           "upstream.headers: \"%s\" is set by reapd itself",
                           k);
            continue;
        }
        if (m->type != JSON_STRING) {
            config_problem(c, m->offset,
                           "upstream.headers.%s: expected a string, got %s", k,
                           config_type_name(m));
            continue;
        }
        if (strlen(m->str) != m->len || strpbrk(m->str, "\r\n")) {
            config_problem(
                c, m->offset,
                "upstream.headers.%s: must not contain CR, LF or NUL", k);
            continue;
        }
        h[cfg->nupstream_headers].name = strdup(m->key);
        h[cfg->nupstream_headers].value = strdup(m->str);
        if (!h[cfg->nupstream_headers].name ||
            !h[cfg->nupstream_headers].value)
            c->oom = true;
        cfg->nupstream_headers++;
    }
}

static void
parse_upstream(struct config_ctx *c, const struct json_node *obj,
               struct config *cfg)
{
    size_t i;

    if (!config_expect_type(c, obj, JSON_OBJECT, "an object", "upstream"))
        return;
    config_dup_keys(c, obj, "upstream", false);
    for (i = 0; i < obj->count; i++) {
        const struct json_node *m = obj->items[i];

        if (strcmp(m->key, "headers") == 0)
            parse_headers(c, m, cfg);
        else if (!config_apply_field(c, m, &config_keys_upstream, cfg))
            config_unknown_key(c, m, "upstream");
    }
}

static void
parse_log(struct config_ctx *c, const struct json_node *obj,
          struct config *cfg)
{
    size_t i;

    if (!config_expect_type(c, obj, JSON_OBJECT, "an object", "log"))
        return;
    config_dup_keys(c, obj, "log", false);
    for (i = 0; i < obj->count; i++) {
        const struct json_node *m = obj->items[i];

        if (strcmp(m->key, "level") == 0) {
            if (config_expect_type(c, m, JSON_STRING, "a string",
                                   "log.level") &&
                log_level_parse(m->str, &cfg->log_level) != 0)
                config_problem(c, m->offset,
                               "log.level: must be \"debug\", \"info\", "
                               "\"warn\" or \"error\"");
        } else if (strcmp(m->key, "format") == 0) {
            if (config_expect_type(c, m, JSON_STRING, "a string",
                                   "log.format") &&
                log_format_parse(m->str, &cfg->log_format) != 0)
                config_problem(c, m->offset,
                               "log.format: must be \"text\" or \"json\"");
        } else {
            config_unknown_key(c, m, "log");
        }
    }
}

/* ---- the whole document ------------------------------------------------ */

static void
check_retry_order(struct config_ctx *c, const struct json_node *root,
                  const struct config *cfg)
{
    const struct json_node *del = json_get(root, "delete");
    const struct json_node *at = json_get(del, "retry_base_ms");

    if (cfg->delete_retry_base_ms <= cfg->delete_retry_max_ms)
        return;
    if (!at)
        at = json_get(del, "retry_max_ms");
    config_problem(c, at ? at->offset : root->offset,
                   "delete.retry_base_ms: must not exceed delete.retry_max_ms "
                   "(%lld > %lld)",
                   (long long)cfg->delete_retry_base_ms,
                   (long long)cfg->delete_retry_max_ms);
}

/* The table's range lets 0 (never rotate) through with the sizes. */
static void
check_reports_log(struct config_ctx *c, const struct json_node *root,
                  const struct config *cfg)
{
    const struct json_node *at =
        json_get(json_get(root, "reports_log"), "max_bytes");

    if (cfg->reports_log_max_bytes == 0 ||
        cfg->reports_log_max_bytes >= CONFIG_REPORTS_LOG_MIN_BYTES)
        return;
    config_problem(
        c, at ? at->offset : root->offset,
        "reports_log.max_bytes: must be 0 (never rotate) or between "
        "%d and %lld",
        CONFIG_REPORTS_LOG_MIN_BYTES, (long long)INT64_C(1099511627776));
}

static void
parse_root(struct config_ctx *c, const struct json_node *root,
           struct config *cfg)
{
    size_t i;

    if (root->type != JSON_OBJECT) {
        config_problem(c, root->offset,
                       "the configuration must be a JSON object, got %s",
                       config_type_name(root));
        return;
    }
    config_dup_keys(c, root, "the configuration", false);
    for (i = 0; i < root->count; i++) {
        const struct json_node *m = root->items[i];
        const char *k = m->key;

        if (config_apply_field(c, m, &config_keys_top, cfg))
            continue;
        if (strcmp(k, "docker") == 0)
            config_parse_section(c, m, &config_keys_docker, cfg);
        else if (strcmp(k, "containerd") == 0)
            config_parse_section(c, m, &config_keys_containerd, cfg);
        else if (strcmp(k, "status") == 0)
            config_parse_section(c, m, &config_keys_status, cfg);
        else if (strcmp(k, "admin") == 0)
            config_parse_section(c, m, &config_keys_admin, cfg);
        else if (strcmp(k, "delete") == 0)
            config_parse_section(c, m, &config_keys_delete, cfg);
        else if (strcmp(k, "retention") == 0)
            config_parse_section(c, m, &config_keys_retention, cfg);
        else if (strcmp(k, "reports_log") == 0)
            config_parse_section(c, m, &config_keys_reports_log, cfg);
        else if (strcmp(k, "upstream") == 0)
            parse_upstream(c, m, cfg);
        else if (strcmp(k, "policies") == 0)
            config_parse_policies(c, m, cfg);
        else if (strcmp(k, "default_action") == 0)
            config_parse_action(c, m, "default_action",
                                &cfg->policies.default_action);
        else if (strcmp(k, "log") == 0)
            parse_log(c, m, cfg);
        else if (strcmp(k, "labels") == 0)
            config_parse_label_filter(c, m, cfg);
        else
            config_unknown_key(c, m, NULL);
    }
    check_retry_order(c, root, cfg);
    check_reports_log(c, root, cfg);
}

/* ---- entry points ------------------------------------------------------ */

int
config_parse(const char *source, const char *text, size_t len,
             struct config **out, struct config_errors *errs)
{
    const struct json_limits limits = {
        .max_bytes = CONFIG_MAX_BYTES,
        .max_depth = 16,
        .max_items = 4096,
        .max_string = 64 * 1024,
    };
    struct config_ctx c = {
        .source = source, .text = text, .len = len, .errs = errs};
    struct json_node *root = NULL;
    struct config *cfg = NULL;
    char jerr[256] = "";
    size_t joff = 0;
    int rc = -1;

    *out = NULL;
    if (!source)
        c.source = source = "<config>";
    root = json_parse(text, len, &limits, JSON_ALLOW_COMMENTS, jerr,
                      sizeof(jerr), &joff);
    if (!root) {
        config_problem(&c, joff, "invalid JSON: %s",
                       jerr[0] ? jerr : "cannot parse");
        goto out;
    }
    cfg = config_new_default(source);
    if (!cfg) {
        c.oom = true;
        goto out;
    }
    parse_root(&c, root, cfg);
    if (c.nproblems == 0 && !c.oom) {
        *out = cfg;
        cfg = NULL;
        rc = 0;
    }
out:
    if (c.oom)
        config_add_plain(errs, source, "out of memory");
    config_free(cfg);
    json_free(root);
    return rc;
}

/*
 * Reads the whole file into a malloc'd buffer (*buf, caller frees). On
 * failure returns -1 with a message in `msg`.
 */
static int
read_file(const char *path, char **buf, size_t *len, char *msg, size_t msglen)
{
    struct stat st;
    size_t cap, n = 0;
    char *p = NULL;
    int fd, rc = -1;

    *buf = NULL;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(msg, msglen, "%s", strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0) {
        snprintf(msg, msglen, "%s", strerror(errno));
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(msg, msglen, "%s", strerror(EISDIR));
        goto out;
    }
    if (S_ISREG(st.st_mode) && st.st_size > CONFIG_MAX_BYTES) {
        snprintf(msg, msglen, "file too large (at most %d bytes)",
                 CONFIG_MAX_BYTES);
        goto out;
    }
    /* Size from fstat is only a hint: pipes and /proc say 0. */
    cap = st.st_size > 0 && st.st_size <= CONFIG_MAX_BYTES
              ? (size_t)st.st_size + 1
              : 4096;
    p = malloc(cap);
    if (!p) {
        snprintf(msg, msglen, "out of memory");
        goto out;
    }
    for (;;) {
        ssize_t r;

        if (n == cap) {
            char *q;

            if (cap > CONFIG_MAX_BYTES) {
                snprintf(msg, msglen, "file too large (at most %d bytes)",
                         CONFIG_MAX_BYTES);
                goto out;
            }
            q = realloc(p, cap * 2);
            if (!q) {
                snprintf(msg, msglen, "out of memory");
                goto out;
            }
            p = q;
            cap *= 2;
        }
        r = read(fd, p + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(msg, msglen, "%s", strerror(errno));
            goto out;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (n > CONFIG_MAX_BYTES) {
        snprintf(msg, msglen, "file too large (at most %d bytes)",
                 CONFIG_MAX_BYTES);
        goto out;
    }
    *buf = p;
    *len = n;
    p = NULL;
    rc = 0;
out:
    free(p);
    close(fd);
    return rc;
}

int
config_load(const char *path, struct config **out, struct config_errors *errs)
{
    char msg[256];
    char *text = NULL;
    size_t len = 0;
    int rc;

    *out = NULL;
    if (read_file(path, &text, &len, msg, sizeof(msg)) != 0) {
        config_add_plain(errs, path, msg);
        return -1;
    }
    rc = config_parse(path, text, len, out, errs);
    free(text);
    return rc;
}

void
config_errors_clear(struct config_errors *errs)
{
    size_t i;

    if (!errs)
        return;
    for (i = 0; i < errs->count; i++)
        free(errs->lines[i]);
    free(errs->lines);
    errs->lines = NULL;
    errs->count = 0;
}
