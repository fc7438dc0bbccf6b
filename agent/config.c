/*
 * config — see config.h.
 *
 * Loading never stops at the first problem: an operator running
 * --check-config should see everything that is wrong in one go, each
 * problem pointing at FILE:LINE:COL. A config starts out as the embedded
 * default and every key in the file overrides one default, so the file
 * only has to say what differs.
 *
 * Keys, defaults and accepted values (integers are inclusive ranges; "ms"
 * values are milliseconds):
 *
 *   key                          default               accepted
 *   node                         $REAPD_NODE_NAME, else non-empty string
 *                                gethostname()
 *   state_dir                    /var/lib/reapd        absolute path
 *   docker.socket                /var/run/docker.sock  absolute path < 108 B
 *   docker.request_timeout_ms    30000                 100 .. 3600000
 *   docker.reconnect_max_ms      30000                 100 .. 3600000
 *   containerd.socket            "auto"                "auto" | "off" | path
 *   containerd.namespace         "moby" [A-Za-z0-9][._-A-Za-z0-9]*
 *   containerd.audit_interval_ms 60000                 0 .. 86400000 (0 off)
 *   containerd.reap_orphans      true                  boolean
 *   status.listen                "127.0.0.1:9323"      HOST:PORT | unix:/path
 *                                                      | "off"
 *   status.token_file            null                  readable abs path
 *   status.max_connections       64                    1 .. 65536
 *   admin.socket                 /run/reapd/admin.sock abs path < 108 B
 *                                                      | "off"
 *   upstream.url                 null                  null | http(s)://...
 *   upstream.timeout_ms          5000                  100 .. 600000
 *   upstream.token_file          null                  readable abs path
 *   upstream.ca_file, client_cert, client_key  null    readable abs paths
 *   upstream.max_in_flight       4                     1 .. 1024
 *   upstream.retry_base_ms       1000                  10 .. 3600000
 *   upstream.retry_max_ms        300000                10 .. 86400000
 *   upstream.headers             {}                    token: string
 *   delete.max_in_flight         8                     1 .. 1024
 *   delete.poll_interval_ms      500                   10 .. 3600000
 *   delete.warn_after_ms         60000                 0 .. 604800000
 *                                                      (0: never warn)
 *   delete.give_up_after_ms      0                     0 .. 604800000
 *                                                      (0: never give up)
 *   delete.retry_base_ms         500                   10 .. 3600000
 *   delete.retry_max_ms          30000                 10 .. 86400000
 *                                                      (and >= retry_base_ms)
 *   retention.delivered_max_age_ms 604800000 (7 days)  0 .. 1 year (0: no
 *                                                      age limit)
 *   retention.delivered_max_count 100000               0 .. 1e8 (0: none)
 *   retention.max_db_bytes       1073741824 (1 GiB)    0 .. 1 TiB (0: none)
 *   reports_log.max_bytes        67108864 (64 MiB)     0 (never rotate) |
 *                                                      64 KiB .. 1 TiB
 *   reports_log.keep             5                     0 .. 100
 *   policies                     [managed, see below]  array of policies
 *   policies[].name              (required)            non-empty, unique
 *   policies[].match.labels      {}                    key: value | "*"
 *                                                      (keys <= 1024 B,
 *                                                      values <= 512 B,
 *                                                      <= 64 distinct keys
 *                                                      in all policies:
 *                                                      bounds.h)
 *   policies[].match.name        none                  fnmatch glob
 *   policies[].match.image       none                  fnmatch glob
 *   policies[].action            (required)            remove | keep | ignore
 *   policies[].delay_ms          0                     0 .. 604800000
 *   policies[].force             true                  boolean
 *   policies[].remove_volumes    false                 boolean
 *   policies[].reap_leaked_tasks true                  boolean
 *   policies[].report            true                  boolean
 *   policies[].allow_match_all   false                 boolean
 *   default_action               "ignore"              remove | keep | ignore
 *   labels.allow                 [] (all)              fnmatch globs of
 *   labels.deny                  []                    label keys (<= 64
 *                                                      each, <= 256 B)
 *   log.level                    "info"                debug|info|warn|error
 *   log.format                   "text"                text | json
 *
 * The default policy list is one policy, "managed": remove containers
 * labelled reapd.managed=true. A file that sets "policies" replaces the
 * whole list, so "policies": [] means none.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yajl/yajl_gen.h>

#include "bounds.h"
#include "json.h"
#include "jsonw.h"
#include "report.h"

#define CONFIG_MAX_BYTES (1024 * 1024)
#define MAX_PROBLEMS     100
#define SUN_PATH_MAX     108 /* sizeof(sockaddr_un.sun_path) on Linux */
#define WEEK_MS          INT64_C(604800000)

/* Parsing state; every problem goes through problem(). */
struct ctx {
    const char *source;
    const char *text;
    size_t len;
    struct config_errors *errs; /* may be NULL: count only */
    size_t nproblems;
    bool oom;
    /* The distinct label names the policies match on so far (pointing
     * into the parsed document), up to the bound. */
    const char *label_keys[LIMIT_POLICY_LABELS];
    size_t nlabel_keys;
    bool too_many_label_keys; /* already said */
};

/* A scalar key of a section that maps straight onto a config field. */
enum field_type { F_INT, F_STR, F_NULLABLE_STR, F_BOOL };

struct field {
    const char *key;
    enum field_type type;
    size_t off; /* into struct config */
    int64_t min, max;
    /* F_STR: NULL if the value is fine, else what is wrong with it. */
    const char *(*check)(const char *s);
};

static const char *check_nonempty(const char *s);
static const char *check_abs_path(const char *s);
static const char *check_socket_path(const char *s);
static const char *check_containerd_socket(const char *s);
static const char *check_namespace(const char *s);
static const char *check_listen(const char *s);
static const char *check_admin_socket(const char *s);
static const char *config_check_url(const char *s);
static const char *check_readable(const char *s);

#define AT(member) offsetof(struct config, member)

static const struct field top_fields[] = {
    {"node", F_STR, AT(node), 0, 0, check_nonempty},
    {"state_dir", F_STR, AT(state_dir), 0, 0, check_abs_path},
};

static const struct field docker_fields[] = {
    {"socket", F_STR, AT(docker_socket), 0, 0, check_socket_path},
    {"request_timeout_ms", F_INT, AT(docker_request_timeout_ms), 100, 3600000,
     NULL},
    {"reconnect_max_ms", F_INT, AT(docker_reconnect_max_ms), 100, 3600000,
     NULL},
};

static const struct field containerd_fields[] = {
    {"socket", F_STR, AT(containerd_socket), 0, 0, check_containerd_socket},
    {"namespace", F_STR, AT(containerd_namespace), 0, 0, check_namespace},
    {"audit_interval_ms", F_INT, AT(containerd_audit_interval_ms), 0, 86400000,
     NULL},
    {"reap_orphans", F_BOOL, AT(containerd_reap_orphans), 0, 0, NULL},
};

static const struct field status_fields[] = {
    {"listen", F_STR, AT(status_listen), 0, 0, check_listen},
    {"token_file", F_NULLABLE_STR, AT(status_token_file), 0, 0,
     check_readable},
    {"max_connections", F_INT, AT(status_max_connections), 1, 65536, NULL},
};

static const struct field admin_fields[] = {
    {"socket", F_STR, AT(admin_socket), 0, 0, check_admin_socket},
};

static const struct field upstream_fields[] = {
    {"url", F_NULLABLE_STR, AT(upstream_url), 0, 0, config_check_url},
    {"timeout_ms", F_INT, AT(upstream_timeout_ms), 100, 600000, NULL},
    {"token_file", F_NULLABLE_STR, AT(upstream_token_file), 0, 0,
     check_readable},
    {"ca_file", F_NULLABLE_STR, AT(upstream_ca_file), 0, 0, check_readable},
    {"client_cert", F_NULLABLE_STR, AT(upstream_client_cert), 0, 0,
     check_readable},
    {"client_key", F_NULLABLE_STR, AT(upstream_client_key), 0, 0,
     check_readable},
    {"max_in_flight", F_INT, AT(upstream_max_in_flight), 1, 1024, NULL},
    {"retry_base_ms", F_INT, AT(upstream_retry_base_ms), 10, 3600000, NULL},
    {"retry_max_ms", F_INT, AT(upstream_retry_max_ms), 10, 86400000, NULL},
};

static const struct field retention_fields[] = {
    {"delivered_max_age_ms", F_INT, AT(retention_delivered_max_age_ms), 0,
     INT64_C(31536000000), NULL},
    {"delivered_max_count", F_INT, AT(retention_delivered_max_count), 0,
     100000000, NULL},
    {"max_db_bytes", F_INT, AT(retention_max_db_bytes), 0,
     INT64_C(1099511627776), NULL},
};

/* Below REPORTS_LOG_MIN_BYTES a file would hold a handful of reports
 * (one is up to LIMIT_RECORD_BYTES) and reapd would spend its syncs on
 * rotating. */
#define REPORTS_LOG_MIN_BYTES 65536
static const struct field reports_log_fields[] = {
    {"max_bytes", F_INT, AT(reports_log_max_bytes), 0, INT64_C(1099511627776),
     NULL},
    {"keep", F_INT, AT(reports_log_keep), 0, REPORT_LOG_KEEP_MAX, NULL},
};

static const struct field delete_fields[] = {
    {"max_in_flight", F_INT, AT(delete_max_in_flight), 1, 1024, NULL},
    {"poll_interval_ms", F_INT, AT(delete_poll_interval_ms), 10, 3600000,
     NULL},
    {"warn_after_ms", F_INT, AT(delete_warn_after_ms), 0, WEEK_MS, NULL},
    {"give_up_after_ms", F_INT, AT(delete_give_up_after_ms), 0, WEEK_MS, NULL},
    {"retry_base_ms", F_INT, AT(delete_retry_base_ms), 10, 3600000, NULL},
    {"retry_max_ms", F_INT, AT(delete_retry_max_ms), 10, 86400000, NULL},
};

#define NFIELDS(a) (sizeof(a) / sizeof((a)[0]))

/* ---- problems ---------------------------------------------------------- */

/* Takes ownership of `line` (freed here if it cannot be kept). */
static void
keep_line(struct ctx *c, char *line)
{
    char **lines;

    if (!line) {
        c->oom = true;
        return;
    }
    lines = realloc(c->errs->lines,
                    (c->errs->count + 1) * sizeof(*c->errs->lines));
    if (!lines) {
        free(line);
        c->oom = true;
        return;
    }
    c->errs->lines = lines;
    c->errs->lines[c->errs->count++] = line;
}

static char *vformat(const char *fmt, va_list ap)
    __attribute__((format(printf, 1, 0)));
static char *format(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void problem(struct ctx *c, size_t offset, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A malloc'd copy of the printf result (caller frees), or NULL. */
static char *
vformat(const char *fmt, va_list ap)
{
    va_list ap2;
    char *s;
    int n;

    va_copy(ap2, ap);
    n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return NULL;
    s = malloc((size_t)n + 1);
    if (s)
        vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

/* Same as vformat: caller frees; NULL when out of memory. */
static char *
format(const char *fmt, ...)
{
    va_list ap;
    char *s;

    va_start(ap, fmt);
    s = vformat(fmt, ap);
    va_end(ap);
    return s;
}

/* Records "SOURCE:LINE:COL: message" for the byte at `offset`. */
static void
problem(struct ctx *c, size_t offset, const char *fmt, ...)
{
    unsigned line = 0, col = 0;
    va_list ap;
    char *msg;

    c->nproblems++;
    if (!c->errs || c->nproblems > MAX_PROBLEMS + 1)
        return;
    if (c->nproblems == MAX_PROBLEMS + 1) {
        keep_line(c, format("%s: too many problems; giving up after %d",
                            c->source, MAX_PROBLEMS));
        return;
    }
    va_start(ap, fmt);
    msg = vformat(fmt, ap);
    va_end(ap);
    if (!msg) {
        c->oom = true;
        return;
    }
    json_linecol(c->text, c->len, offset, &line, &col);
    keep_line(c, format("%s:%u:%u: %s", c->source, line, col, msg));
    free(msg);
}

/*
 * Text from the file, made safe to quote in a one-line message: control
 * bytes become '?' and long text is cut. `dst` must hold 68 bytes.
 */
#define SHOW_MAX 64
static const char *
show(char *dst, const char *s, size_t len)
{
    size_t i, n = len > SHOW_MAX ? SHOW_MAX : len;

    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];

        dst[i] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    if (len > n) {
        memcpy(dst + n, "...", 3);
        n += 3;
    }
    dst[n] = '\0';
    return dst;
}

static const char *
type_name(const struct json_node *n)
{
    switch (n->type) {
    case JSON_NULL:
        return "null";
    case JSON_BOOL:
        return "boolean";
    case JSON_NUMBER:
        return "number";
    case JSON_STRING:
        return "string";
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    }
    return "unknown";
}

static bool
expect_type(struct ctx *c, const struct json_node *n, enum json_type t,
            const char *what, const char *path)
{
    if (n->type == t)
        return true;
    problem(c, n->offset, "%s: expected %s, got %s", path, what, type_name(n));
    return false;
}

static void
unknown_key(struct ctx *c, const struct json_node *m, const char *section)
{
    char k[SHOW_MAX + 4];

    if (section)
        problem(c, m->key_offset, "unknown key \"%s\" in %s",
                show(k, m->key, m->key_len), section);
    else
        problem(c, m->key_offset, "unknown key \"%s\"",
                show(k, m->key, m->key_len));
}

/*
 * The last duplicate of a key would silently win; that is almost always
 * a mistake in a hand-edited file, so say so. `icase` for HTTP headers.
 */
static void
check_duplicates(struct ctx *c, const struct json_node *obj,
                 const char *section, bool icase)
{
    char k[SHOW_MAX + 4];
    size_t i, j;

    for (i = 1; i < obj->count; i++) {
        const struct json_node *m = obj->items[i];

        for (j = 0; j < i; j++) {
            const char *prev = obj->items[j]->key;

            if (icase ? strcasecmp(prev, m->key) != 0
                      : strcmp(prev, m->key) != 0)
                continue;
            problem(c, m->key_offset, "duplicate key \"%s\" in %s",
                    show(k, m->key, m->key_len), section);
            break;
        }
    }
}

/* ---- value checks ------------------------------------------------------ */

static const char *
check_nonempty(const char *s)
{
    return *s ? NULL : "must not be empty";
}

static const char *
check_abs_path(const char *s)
{
    return s[0] == '/' ? NULL : "must be an absolute path";
}

/* A file reapd must be able to read when it starts (a token, a CA...);
 * "unreadable" is a config error, not a surprise at the first delivery. */
static const char *
check_readable(const char *s)
{
    if (s[0] != '/')
        return "must be an absolute path";
    if (access(s, R_OK) != 0)
        return "cannot be read";
    return NULL;
}

static const char *
check_socket_path(const char *s)
{
    if (s[0] != '/')
        return "must be an absolute path";
    if (strlen(s) >= SUN_PATH_MAX)
        return "socket path is too long (at most 107 bytes)";
    return NULL;
}

static const char *
check_containerd_socket(const char *s)
{
    if (strcmp(s, "auto") == 0 || strcmp(s, "off") == 0)
        return NULL;
    if (s[0] != '/')
        return "must be \"auto\", \"off\" or an absolute path";
    return check_socket_path(s);
}

static bool
is_alnum(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9');
}

/* containerd's own rule for namespace names. */
static const char *
check_namespace(const char *s)
{
    size_t i;

    if (!is_alnum(s[0]))
        return "must start with a letter or digit";
    for (i = 1; s[i]; i++)
        if (!is_alnum(s[i]) && !strchr("._-", s[i]))
            return "may hold only letters, digits, '.', '_' and '-'";
    if (i > 76)
        return "is too long (at most 76 characters)";
    return NULL;
}

static const char *
check_admin_socket(const char *s)
{
    if (strcmp(s, "off") == 0)
        return NULL;
    if (s[0] != '/')
        return "must be an absolute path or \"off\"";
    if (strlen(s) >= SUN_PATH_MAX)
        return "is too long for a unix socket (at most 107 bytes)";
    return NULL;
}

static const char *
check_listen(const char *s)
{
    const char *colon, *p;
    size_t hostlen;
    long port = 0;

    if (strcmp(s, "off") == 0)
        return NULL;
    if (strncmp(s, "unix:", 5) == 0) {
        if (s[5] != '/')
            return "unix socket path must be absolute (\"unix:/path\")";
        if (strlen(s + 5) >= SUN_PATH_MAX)
            return "unix socket path is too long (at most 107 bytes)";
        return NULL;
    }
    colon = strrchr(s, ':');
    if (!colon)
        return "expected \"HOST:PORT\", \"unix:/path\" or \"off\"";
    hostlen = (size_t)(colon - s);
    if (hostlen == 0)
        return "expected \"HOST:PORT\": the host is missing";
    if (s[0] == '[') {
        /* An IPv6 literal, as in URLs: "[::1]:9323". */
        if (hostlen < 3 || s[hostlen - 1] != ']')
            return "an IPv6 host must be written \"[ADDR]:PORT\"";
        for (p = s + 1; p < s + hostlen - 1; p++)
            if (!strchr("0123456789abcdefABCDEF:.", *p))
                return "invalid IPv6 address";
    } else {
        for (p = s; p < colon; p++)
            if (!is_alnum(*p) && !strchr(".-_", *p))
                return "invalid host (use [ADDR] for IPv6)";
    }
    if (!colon[1])
        return "port must be between 1 and 65535";
    for (p = colon + 1; *p; p++) {
        if (*p < '0' || *p > '9' || port > 65535)
            return "port must be between 1 and 65535";
        port = port * 10 + (*p - '0');
    }
    if (port < 1 || port > 65535)
        return "port must be between 1 and 65535";
    return NULL;
}

static const char *
config_check_url(const char *s)
{
    const char *rest;
    size_t i;

    if (strncmp(s, "http://", 7) == 0)
        rest = s + 7;
    else if (strncmp(s, "https://", 8) == 0)
        rest = s + 8;
    else
        return "must start with http:// or https://";
    if (!*rest || *rest == '/')
        return "has no host";
    for (i = 0; s[i]; i++)
        if ((unsigned char)s[i] <= 0x20 || s[i] == 0x7f)
            return "must not contain spaces or control characters";
    return NULL;
}

/*
 * fnmatch(3) quietly treats an unclosed '[' as a literal, so "web-[0-9"
 * would match nothing anyone meant. NULL if `g` is a sound glob.
 */
static const char *
glob_problem(const char *g)
{
    size_t i = 0, j;

    if (!*g)
        return "must not be empty";
    while (g[i]) {
        if (g[i] == '\\') {
            if (!g[i + 1])
                return "ends with a lone '\\'";
            i += 2;
            continue;
        }
        if (g[i] != '[') {
            i++;
            continue;
        }
        j = i + 1;
        if (g[j] == '!' || g[j] == '^')
            j++;
        if (g[j] == ']') /* a leading ']' is a member, not the end */
            j++;
        while (g[j] && g[j] != ']') {
            if (g[j] == '\\' && g[j + 1]) {
                j += 2;
            } else if (g[j] == '[' && g[j + 1] && strchr(":.=", g[j + 1])) {
                /* "[:alpha:]" and friends hold a ']' of their own. */
                char end[3] = {g[j + 1], ']', '\0'};
                const char *e = strstr(g + j + 2, end);

                j = e ? (size_t)(e - g) + 2 : j + 1;
            } else {
                j++;
            }
        }
        if (!g[j])
            return "unbalanced '[' (no closing ']')";
        i = j + 1;
    }
    return NULL;
}

/* RFC 9110 token characters, for header names. */
static bool
config_is_tchar(char ch)
{
    return is_alnum(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* ---- typed getters ----------------------------------------------------- */

/*
 * A string value, without embedded NULs. Returns a malloc'd copy (caller
 * owns) or NULL after recording the problem.
 */
static char *
get_string(struct ctx *c, const struct json_node *n, const char *path,
           const char *(*check)(const char *))
{
    const char *why;
    char *s;

    if (!expect_type(c, n, JSON_STRING, "a string", path))
        return NULL;
    if (strlen(n->str) != n->len) {
        problem(c, n->offset, "%s: must not contain NUL characters", path);
        return NULL;
    }
    why = check ? check(n->str) : NULL;
    if (why) {
        problem(c, n->offset, "%s: %s", path, why);
        return NULL;
    }
    s = strdup(n->str);
    if (!s)
        c->oom = true;
    return s;
}

static bool
config_get_int(struct ctx *c, const struct json_node *n, const char *path,
               int64_t min, int64_t max, int64_t *out)
{
    char lit[SHOW_MAX + 4];
    int64_t v;

    if (!expect_type(c, n, JSON_NUMBER, "an integer", path))
        return false;
    if (json_int64(n, &v) != 0) {
        problem(c, n->offset, "%s: expected an integer, got %s", path,
                show(lit, n->str, n->len));
        return false;
    }
    if (v < min || v > max) {
        problem(c, n->offset, "%s: must be between %lld and %lld", path,
                (long long)min, (long long)max);
        return false;
    }
    *out = v;
    return true;
}

static bool
config_get_bool(struct ctx *c, const struct json_node *n, const char *path,
                bool *out)
{
    if (!expect_type(c, n, JSON_BOOL, "a boolean", path))
        return false;
    *out = n->boolean != 0;
    return true;
}

/* Replaces the string at *slot (freeing the old one) when `s` is set. */
static void
set_string(char **slot, char *s)
{
    if (!s)
        return;
    free(*slot);
    *slot = s;
}

/*
 * Applies member `m` if it is one of `fields`. Returns false when the key
 * is not in the table, so the caller can try its own keys.
 */
static bool
apply_field(struct ctx *c, const struct json_node *m, const char *section,
            const struct field *fields, size_t nfields, struct config *cfg)
{
    char path[128];
    size_t i;

    for (i = 0; i < nfields; i++) {
        const struct field *f = &fields[i];
        char *base = (char *)cfg + f->off;

        if (strcmp(m->key, f->key) != 0)
            continue;
        snprintf(path, sizeof(path), "%s%s%s", section ? section : "",
                 section ? "." : "", f->key);
        if (f->type == F_INT) {
            config_get_int(c, m, path, f->min, f->max,
                           (int64_t *)(void *)base);
        } else if (f->type == F_BOOL) {
            config_get_bool(c, m, path, (bool *)(void *)base);
        } else if (f->type == F_NULLABLE_STR && m->type == JSON_NULL) {
            free(*(char **)(void *)base);
            *(char **)(void *)base = NULL;
        } else {
            set_string((char **)(void *)base,
                       get_string(c, m, path, f->check));
        }
        return true;
    }
    return false;
}

/* A section made only of table fields. */
static void
parse_section(struct ctx *c, const struct json_node *obj, const char *section,
              const struct field *fields, size_t nfields, struct config *cfg)
{
    size_t i;

    if (!expect_type(c, obj, JSON_OBJECT, "an object", section))
        return;
    check_duplicates(c, obj, section, false);
    for (i = 0; i < obj->count; i++)
        if (!apply_field(c, obj->items[i], section, fields, nfields, cfg))
            unknown_key(c, obj->items[i], section);
}

/* ---- upstream, log ----------------------------------------------------- */

static void
parse_headers(struct ctx *c, const struct json_node *obj, struct config *cfg)
{
    char k[SHOW_MAX + 4];
    struct config_header *h;
    size_t i, j;

    if (!expect_type(c, obj, JSON_OBJECT, "an object", "upstream.headers"))
        return;
    check_duplicates(c, obj, "upstream.headers", true);
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

        show(k, m->key, m->key_len);
        for (j = 0; j < m->key_len && ok; j++)
            ok = config_is_tchar(m->key[j]);
        if (!ok) {
            problem(c, m->key_offset,
                    "upstream.headers: \"%s\" is not a valid header name", k);
            continue;
        }
        if (strcasecmp(m->key, "Content-Type") == 0 ||
            strcasecmp(m->key, "Content-Length") == 0 ||
            strcasecmp(m->key, "Transfer-Encoding") == 0 ||
            strcasecmp(m->key, "Idempotency-Key") == 0) {
            problem(c, m->key_offset,
                    "upstream.headers: \"%s\" is set by reapd itself", k);
            continue;
        }
        if (m->type != JSON_STRING) {
            problem(c, m->offset,
                    "upstream.headers.%s: expected a string, got %s", k,
                    type_name(m));
            continue;
        }
        if (strlen(m->str) != m->len || strpbrk(m->str, "\r\n")) {
            problem(c, m->offset,
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
parse_upstream(struct ctx *c, const struct json_node *obj, struct config *cfg)
{
    size_t i;

    if (!expect_type(c, obj, JSON_OBJECT, "an object", "upstream"))
        return;
    check_duplicates(c, obj, "upstream", false);
    for (i = 0; i < obj->count; i++) {
        const struct json_node *m = obj->items[i];

        if (strcmp(m->key, "headers") == 0)
            parse_headers(c, m, cfg);
        else if (!apply_field(c, m, "upstream", upstream_fields,
                              NFIELDS(upstream_fields), cfg))
            unknown_key(c, m, "upstream");
    }
}

static void
parse_log(struct ctx *c, const struct json_node *obj, struct config *cfg)
{
    size_t i;

    if (!expect_type(c, obj, JSON_OBJECT, "an object", "log"))
        return;
    check_duplicates(c, obj, "log", false);
    for (i = 0; i < obj->count; i++) {
        const struct json_node *m = obj->items[i];

        if (strcmp(m->key, "level") == 0) {
            if (expect_type(c, m, JSON_STRING, "a string", "log.level") &&
                log_level_parse(m->str, &cfg->log_level) != 0)
                problem(c, m->offset,
                        "log.level: must be \"debug\", \"info\", "
                        "\"warn\" or \"error\"");
        } else if (strcmp(m->key, "format") == 0) {
            if (expect_type(c, m, JSON_STRING, "a string", "log.format") &&
                log_format_parse(m->str, &cfg->log_format) != 0)
                problem(c, m->offset,
                        "log.format: must be \"text\" or \"json\"");
        } else {
            unknown_key(c, m, "log");
        }
    }
}

static void
parse_action(struct ctx *c, const struct json_node *n, const char *path,
             enum policy_action *out)
{
    if (expect_type(c, n, JSON_STRING, "a string", path) &&
        policy_action_parse(n->str, out) != 0)
        problem(c, n->offset, "%s: must be \"remove\", \"keep\" or \"ignore\"",
                path);
}

/* ---- policies ---------------------------------------------------------- */

/*
 * Counts the label name of member `m` among those all policies match on.
 * reapd keeps the labels a policy names whatever else it drops
 * (bounds.h), so their number is what lets a container's record and
 * report stay within their bounds: past LIMIT_POLICY_LABELS names, the
 * first one over is a problem.
 */
static void
count_label_key(struct ctx *c, const struct json_node *m, const char *path,
                const char *shown)
{
    size_t i;

    for (i = 0; i < c->nlabel_keys; i++)
        if (strcmp(c->label_keys[i], m->key) == 0)
            return;
    if (c->nlabel_keys < LIMIT_POLICY_LABELS) {
        c->label_keys[c->nlabel_keys++] = m->key;
        return;
    }
    if (c->too_many_label_keys)
        return;
    c->too_many_label_keys = true;
    problem(c, m->key_offset,
            "%s.%s: more than %zu distinct label names in all policies "
            "together",
            path, shown, LIMIT_POLICY_LABELS);
}

static void
parse_labels(struct ctx *c, const struct json_node *obj, const char *path,
             struct policy *p)
{
    char k[SHOW_MAX + 4];
    size_t i;

    if (!expect_type(c, obj, JSON_OBJECT, "an object", path))
        return;
    check_duplicates(c, obj, path, false);
    /* A duplicate "labels" key (already reported) must not leak. */
    for (i = 0; i < p->nmatch_labels; i++) {
        free(p->match_labels[i].key);
        free(p->match_labels[i].value);
    }
    free(p->match_labels);
    p->nmatch_labels = 0;
    p->match_labels =
        calloc(obj->count ? obj->count : 1, sizeof(*p->match_labels));
    if (!p->match_labels) {
        c->oom = true;
        return;
    }
    for (i = 0; i < obj->count; i++) {
        const struct json_node *m = obj->items[i];
        struct policy_label *l;

        show(k, m->key, m->key_len);
        if (m->key_len == 0 || strlen(m->key) != m->key_len) {
            problem(c, m->key_offset, "%s: invalid label name \"%s\"", path,
                    k);
            continue;
        }
        if (m->type != JSON_STRING) {
            problem(c, m->offset,
                    "%s.%s: expected a string (a value, or \"*\" for any), "
                    "got %s",
                    path, k, type_name(m));
            continue;
        }
        if (strlen(m->str) != m->len) {
            problem(c, m->offset, "%s.%s: must not contain NUL characters",
                    path, k);
            continue;
        }
        /* What reapd keeps of a container's labels is bounded; a policy
         * must name only what can be kept whole, so that it is decided
         * exactly (bounds.h). */
        if (m->key_len > LIMIT_LABEL_KEY) {
            problem(c, m->key_offset,
                    "%s.%s: label name longer than %zu bytes", path, k,
                    LIMIT_LABEL_KEY);
            continue;
        }
        if (m->len > LIMIT_POLICY_LABEL_VALUE) {
            problem(c, m->offset, "%s.%s: value longer than %zu bytes", path,
                    k, LIMIT_POLICY_LABEL_VALUE);
            continue;
        }
        count_label_key(c, m, path, k);
        l = &p->match_labels[p->nmatch_labels++];
        l->key = strdup(m->key);
        l->value = strdup(m->str);
        if (!l->key || !l->value)
            c->oom = true;
    }
}

static void
parse_glob(struct ctx *c, const struct json_node *n, const char *path,
           char **out)
{
    char g[SHOW_MAX + 4];
    const char *why;

    if (!expect_type(c, n, JSON_STRING, "a string", path))
        return;
    if (strlen(n->str) != n->len) {
        problem(c, n->offset, "%s: must not contain NUL characters", path);
        return;
    }
    why = glob_problem(n->str);
    if (why) {
        problem(c, n->offset, "%s: invalid glob \"%s\": %s", path,
                show(g, n->str, n->len), why);
        return;
    }
    free(*out);
    *out = strdup(n->str);
    if (!*out)
        c->oom = true;
}

static void
parse_match(struct ctx *c, const struct json_node *obj, const char *ppath,
            struct policy *p)
{
    char path[64], sub[80];
    size_t i;

    snprintf(path, sizeof(path), "%s.match", ppath);
    if (!expect_type(c, obj, JSON_OBJECT, "an object", path))
        return;
    check_duplicates(c, obj, path, false);
    for (i = 0; i < obj->count; i++) {
        const struct json_node *m = obj->items[i];

        snprintf(sub, sizeof(sub), "%s.%s", path, m->key);
        if (strcmp(m->key, "labels") == 0)
            parse_labels(c, m, sub, p);
        else if (strcmp(m->key, "name") == 0)
            parse_glob(c, m, sub, &p->match_name);
        else if (strcmp(m->key, "image") == 0)
            parse_glob(c, m, sub, &p->match_image);
        else
            unknown_key(c, m, path);
    }
}

/* Whether the JSON `match` of a policy (NULL if absent) says anything. */
static bool
match_is_empty(const struct json_node *match)
{
    const struct json_node *labels;

    if (!match || match->type != JSON_OBJECT)
        return match == NULL;
    if (json_get(match, "name") || json_get(match, "image"))
        return false;
    labels = json_get(match, "labels");
    return !labels || (labels->type == JSON_OBJECT && labels->count == 0);
}

static void
parse_policy(struct ctx *c, const struct json_node *obj, size_t idx,
             struct policy *p)
{
    const struct json_node *match = NULL;
    char path[40], sub[64];
    bool allow_all = false, has_action = false;
    size_t i;

    snprintf(path, sizeof(path), "policies[%zu]", idx);
    p->force = true;
    p->reap_leaked_tasks = true;
    p->report = true;
    p->action = POLICY_IGNORE;
    if (!expect_type(c, obj, JSON_OBJECT, "an object", path))
        return;
    check_duplicates(c, obj, path, false);
    for (i = 0; i < obj->count; i++) {
        const struct json_node *m = obj->items[i];
        const char *k = m->key;

        snprintf(sub, sizeof(sub), "%s.%s", path, k);
        if (strcmp(k, "name") == 0) {
            set_string(&p->name, get_string(c, m, sub, check_nonempty));
        } else if (strcmp(k, "match") == 0) {
            match = m;
            parse_match(c, m, path, p);
        } else if (strcmp(k, "action") == 0) {
            has_action = true;
            parse_action(c, m, sub, &p->action);
        } else if (strcmp(k, "delay_ms") == 0) {
            config_get_int(c, m, sub, 0, WEEK_MS, &p->delay_ms);
        } else if (strcmp(k, "force") == 0) {
            config_get_bool(c, m, sub, &p->force);
        } else if (strcmp(k, "remove_volumes") == 0) {
            config_get_bool(c, m, sub, &p->remove_volumes);
        } else if (strcmp(k, "reap_leaked_tasks") == 0) {
            config_get_bool(c, m, sub, &p->reap_leaked_tasks);
        } else if (strcmp(k, "report") == 0) {
            config_get_bool(c, m, sub, &p->report);
        } else if (strcmp(k, "allow_match_all") == 0) {
            config_get_bool(c, m, sub, &allow_all);
        } else {
            unknown_key(c, m, path);
        }
    }
    if (!json_get(obj, "name"))
        problem(c, obj->offset, "%s: missing required key \"name\"", path);
    if (!has_action)
        problem(c, obj->offset, "%s: missing required key \"action\"", path);
    /* The one mistake here that destroys data: refuse it unless asked. */
    if (p->action == POLICY_REMOVE && !allow_all && match_is_empty(match))
        problem(c, match ? match->offset : obj->offset,
                "%s: a remove policy with an empty match would remove "
                "every container; set \"allow_match_all\": true to mean it",
                path);
}

static void
parse_policies(struct ctx *c, const struct json_node *arr, struct config *cfg)
{
    struct policy_set *set = &cfg->policies;
    enum policy_action saved = set->default_action;
    char name[SHOW_MAX + 4];
    size_t i, j;

    if (!expect_type(c, arr, JSON_ARRAY, "an array", "policies"))
        return;
    /* The file's list replaces the default one, default_action stays. */
    policy_set_clear(set);
    set->default_action = saved;
    set->items = calloc(arr->count ? arr->count : 1, sizeof(*set->items));
    if (!set->items) {
        c->oom = true;
        return;
    }
    for (i = 0; i < arr->count; i++) {
        struct policy *p = &set->items[set->count++];

        parse_policy(c, arr->items[i], i, p);
        if (!p->name)
            continue;
        for (j = 0; j < i; j++) {
            if (!set->items[j].name ||
                strcmp(set->items[j].name, p->name) != 0)
                continue;
            problem(c, json_get(arr->items[i], "name")->offset,
                    "policies[%zu].name: duplicate policy name \"%s\" "
                    "(also policies[%zu])",
                    i, show(name, p->name, strlen(p->name)), j);
            break;
        }
    }
}

/* ---- the labels kept -------------------------------------------------- */

/* One list of globs ("allow" or "deny") into *out / *n, replacing what
 * was there (a duplicate key, already reported, must not leak). */
static void
parse_globs(struct ctx *c, const struct json_node *arr, const char *path,
            char ***out, size_t *n)
{
    char g[SHOW_MAX + 4], sub[48];
    const char *why;
    size_t i;

    if (!expect_type(c, arr, JSON_ARRAY, "an array of globs", path))
        return;
    for (i = 0; i < *n; i++)
        free((*out)[i]);
    free(*out);
    *out = NULL;
    *n = 0;
    if (arr->count > CONFIG_LABEL_GLOBS) {
        problem(c, arr->items[CONFIG_LABEL_GLOBS]->offset,
                "%s: more than %d globs", path, CONFIG_LABEL_GLOBS);
        return;
    }
    *out = calloc(arr->count ? arr->count : 1, sizeof(**out));
    if (*out == NULL) {
        c->oom = true;
        return;
    }
    for (i = 0; i < arr->count; i++) {
        const struct json_node *m = arr->items[i];

        snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
        if (!expect_type(c, m, JSON_STRING, "a string", sub))
            continue;
        if (strlen(m->str) != m->len) {
            problem(c, m->offset, "%s: must not contain NUL characters", sub);
            continue;
        }
        if (m->len > CONFIG_LABEL_GLOB_MAX) {
            problem(c, m->offset, "%s: glob longer than %d bytes", sub,
                    CONFIG_LABEL_GLOB_MAX);
            continue;
        }
        why = glob_problem(m->str);
        if (why) {
            problem(c, m->offset, "%s: invalid glob \"%s\": %s", sub,
                    show(g, m->str, m->len), why);
            continue;
        }
        (*out)[*n] = strdup(m->str);
        if ((*out)[*n] == NULL)
            c->oom = true;
        else
            (*n)++;
    }
}

static void
parse_label_filter(struct ctx *c, const struct json_node *obj,
                   struct config *cfg)
{
    struct label_filter *f = &cfg->labels;
    size_t i;

    if (!expect_type(c, obj, JSON_OBJECT, "an object", "labels"))
        return;
    check_duplicates(c, obj, "labels", false);
    for (i = 0; i < obj->count; i++) {
        const struct json_node *m = obj->items[i];

        if (strcmp(m->key, "allow") == 0)
            parse_globs(c, m, "labels.allow", &f->allow, &f->nallow);
        else if (strcmp(m->key, "deny") == 0)
            parse_globs(c, m, "labels.deny", &f->deny, &f->ndeny);
        else
            unknown_key(c, m, "labels");
    }
}

/* ---- the whole document ------------------------------------------------ */

static void
check_retry_order(struct ctx *c, const struct json_node *root,
                  const struct config *cfg)
{
    const struct json_node *del = json_get(root, "delete");
    const struct json_node *at = json_get(del, "retry_base_ms");

    if (cfg->delete_retry_base_ms <= cfg->delete_retry_max_ms)
        return;
    if (!at)
        at = json_get(del, "retry_max_ms");
    problem(c, at ? at->offset : root->offset,
            "delete.retry_base_ms: must not exceed delete.retry_max_ms "
            "(%lld > %lld)",
            (long long)cfg->delete_retry_base_ms,
            (long long)cfg->delete_retry_max_ms);
}

/* The table's range lets 0 (never rotate) through with the sizes. */
static void
check_reports_log(struct ctx *c, const struct json_node *root,
                  const struct config *cfg)
{
    const struct json_node *at =
        json_get(json_get(root, "reports_log"), "max_bytes");

    if (cfg->reports_log_max_bytes == 0 ||
        cfg->reports_log_max_bytes >= REPORTS_LOG_MIN_BYTES)
        return;
    problem(c, at ? at->offset : root->offset,
            "reports_log.max_bytes: must be 0 (never rotate) or between "
            "%d and %lld",
            REPORTS_LOG_MIN_BYTES, (long long)INT64_C(1099511627776));
}

static void
parse_root(struct ctx *c, const struct json_node *root, struct config *cfg)
{
    size_t i;

    if (root->type != JSON_OBJECT) {
        problem(c, root->offset,
                "the configuration must be a JSON object, got %s",
                type_name(root));
        return;
    }
    check_duplicates(c, root, "the configuration", false);
    for (i = 0; i < root->count; i++) {
        const struct json_node *m = root->items[i];
        const char *k = m->key;

        if (apply_field(c, m, NULL, top_fields, NFIELDS(top_fields), cfg))
            continue;
        if (strcmp(k, "docker") == 0)
            parse_section(c, m, "docker", docker_fields,
                          NFIELDS(docker_fields), cfg);
        else if (strcmp(k, "containerd") == 0)
            parse_section(c, m, "containerd", containerd_fields,
                          NFIELDS(containerd_fields), cfg);
        else if (strcmp(k, "status") == 0)
            parse_section(c, m, "status", status_fields,
                          NFIELDS(status_fields), cfg);
        else if (strcmp(k, "admin") == 0)
            parse_section(c, m, "admin", admin_fields, NFIELDS(admin_fields),
                          cfg);
        else if (strcmp(k, "delete") == 0)
            parse_section(c, m, "delete", delete_fields,
                          NFIELDS(delete_fields), cfg);
        else if (strcmp(k, "retention") == 0)
            parse_section(c, m, "retention", retention_fields,
                          NFIELDS(retention_fields), cfg);
        else if (strcmp(k, "reports_log") == 0)
            parse_section(c, m, "reports_log", reports_log_fields,
                          NFIELDS(reports_log_fields), cfg);
        else if (strcmp(k, "upstream") == 0)
            parse_upstream(c, m, cfg);
        else if (strcmp(k, "policies") == 0)
            parse_policies(c, m, cfg);
        else if (strcmp(k, "default_action") == 0)
            parse_action(c, m, "default_action",
                         &cfg->policies.default_action);
        else if (strcmp(k, "log") == 0)
            parse_log(c, m, cfg);
        else if (strcmp(k, "labels") == 0)
            parse_label_filter(c, m, cfg);
        else
            unknown_key(c, m, NULL);
    }
    check_retry_order(c, root, cfg);
    check_reports_log(c, root, cfg);
}

/* ---- defaults ---------------------------------------------------------- */

/* The default policy: clean up what was explicitly handed to reapd. */
static int
default_policies(struct policy_set *set)
{
    struct policy *p;

    set->default_action = POLICY_IGNORE;
    set->items = calloc(1, sizeof(*set->items));
    if (!set->items)
        return -1;
    set->count = 1;
    p = &set->items[0];
    p->action = POLICY_REMOVE;
    p->force = true;
    p->reap_leaked_tasks = true;
    p->report = true;
    p->name = strdup("managed");
    p->match_labels = calloc(1, sizeof(*p->match_labels));
    if (!p->name || !p->match_labels)
        return -1;
    p->nmatch_labels = 1;
    p->match_labels[0].key = strdup("reapd.managed");
    p->match_labels[0].value = strdup("true");
    if (!p->match_labels[0].key || !p->match_labels[0].value)
        return -1;
    return 0;
}

/* The embedded default, or NULL if out of memory. Caller frees. */
static struct config *
make_default(const char *source)
{
    struct config *cfg = calloc(1, sizeof(*cfg));
    char host[256];
    const char *env;

    if (!cfg)
        return NULL;
    /* A pod's host name is the pod's: a DaemonSet passes the node's name
     * in the environment (the downward API's spec.nodeName). An empty or
     * oversized value is ignored rather than trusted. */
    env = getenv("REAPD_NODE_NAME");
    if (env != NULL && env[0] != '\0' && strlen(env) < sizeof(host))
        snprintf(host, sizeof(host), "%s", env);
    else if (gethostname(host, sizeof(host)) != 0 || !host[0])
        snprintf(host, sizeof(host), "localhost");
    host[sizeof(host) - 1] = '\0';

    cfg->node = strdup(host);
    cfg->state_dir = strdup("/var/lib/reapd");
    cfg->docker_socket = strdup("/var/run/docker.sock");
    cfg->docker_request_timeout_ms = 30000;
    cfg->docker_reconnect_max_ms = 30000;
    cfg->containerd_socket = strdup("auto");
    cfg->containerd_namespace = strdup("moby");
    cfg->containerd_audit_interval_ms = 60000;
    cfg->containerd_reap_orphans = true;
    cfg->status_listen = strdup("127.0.0.1:9323");
    cfg->status_max_connections = 64;
    cfg->admin_socket = strdup("/run/reapd/admin.sock");
    cfg->upstream_url = NULL;
    cfg->upstream_timeout_ms = 5000;
    cfg->upstream_max_in_flight = 4;
    cfg->retention_delivered_max_age_ms = INT64_C(604800000);
    cfg->retention_delivered_max_count = 100000;
    cfg->retention_max_db_bytes = INT64_C(1073741824);
    cfg->reports_log_max_bytes = INT64_C(67108864);
    cfg->reports_log_keep = 5;
    cfg->upstream_retry_base_ms = 1000;
    cfg->upstream_retry_max_ms = 300000;
    cfg->delete_max_in_flight = 8;
    cfg->delete_poll_interval_ms = 500;
    cfg->delete_warn_after_ms = 60000;
    cfg->delete_give_up_after_ms = 0;
    cfg->delete_retry_base_ms = 500;
    cfg->delete_retry_max_ms = 30000;
    cfg->log_level = LOG_LEVEL_INFO;
    cfg->log_format = LOG_FORMAT_TEXT;
    cfg->source = strdup(source);
    if (!cfg->node || !cfg->state_dir || !cfg->docker_socket ||
        !cfg->containerd_socket || !cfg->containerd_namespace ||
        !cfg->status_listen || !cfg->admin_socket || !cfg->source ||
        default_policies(&cfg->policies) != 0) {
        config_free(cfg);
        return NULL;
    }
    return cfg;
}

struct config *
config_default(void)
{
    return make_default("<default>");
}

/* ---- entry points ------------------------------------------------------ */

static void
add_plain(struct config_errors *errs, const char *source, const char *msg)
{
    struct ctx c = {.source = source, .errs = errs};

    if (errs)
        keep_line(&c, format("%s: %s", source, msg));
}

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
    struct ctx c = {.source = source, .text = text, .len = len, .errs = errs};
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
        problem(&c, joff, "invalid JSON: %s", jerr[0] ? jerr : "cannot parse");
        goto out;
    }
    cfg = make_default(source);
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
        add_plain(errs, source, "out of memory");
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
        add_plain(errs, path, msg);
        return -1;
    }
    rc = config_parse(path, text, len, out, errs);
    free(text);
    return rc;
}

void
config_free(struct config *cfg)
{
    size_t i;

    if (!cfg)
        return;
    free(cfg->node);
    free(cfg->state_dir);
    free(cfg->docker_socket);
    free(cfg->containerd_socket);
    free(cfg->containerd_namespace);
    free(cfg->status_listen);
    free(cfg->admin_socket);
    free(cfg->status_token_file);
    free(cfg->upstream_url);
    free(cfg->upstream_token_file);
    free(cfg->upstream_ca_file);
    free(cfg->upstream_client_cert);
    free(cfg->upstream_client_key);
    for (i = 0; i < cfg->nupstream_headers; i++) {
        free(cfg->upstream_headers[i].name);
        free(cfg->upstream_headers[i].value);
    }
    free(cfg->upstream_headers);
    policy_set_clear(&cfg->policies);
    label_filter_clear(&cfg->labels);
    free(cfg->source);
    free(cfg);
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

/* ---- the effective config, as JSON ------------------------------------ */

#define REDACTED "<redacted>"

static void
gen_fields(yajl_gen g, const struct config *cfg, const struct field *f,
           size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        const char *base = (const char *)cfg + f[i].off;

        jw_str(g, f[i].key);
        if (f[i].type == F_INT)
            jw_int(g, *(const int64_t *)(const void *)base);
        else if (f[i].type == F_BOOL)
            yajl_gen_bool(g, *(const bool *)(const void *)base);
        else
            jw_str(g, *(char *const *)(const void *)base);
    }
}

static void
gen_section(yajl_gen g, const struct config *cfg, const char *name,
            const struct field *f, size_t n)
{
    jw_str(g, name);
    yajl_gen_map_open(g);
    gen_fields(g, cfg, f, n);
    yajl_gen_map_close(g);
}

/*
 * The URL without what may carry a credential: "user:pass@" and the
 * query or fragment (signed URLs put tokens there). Malloc'd, or NULL.
 */
static char *
redact_url(const char *url)
{
    const char *scheme_end = strstr(url, "://");
    const char *auth, *auth_end, *at, *cut;
    size_t n;
    char *out;

    if (!scheme_end)
        return strdup(REDACTED);
    auth = scheme_end + 3;
    auth_end = auth + strcspn(auth, "/?#");
    at = NULL;
    for (cut = auth; cut < auth_end; cut++)
        if (*cut == '@')
            at = cut; /* the last '@' ends the userinfo */
    cut = auth_end + strcspn(auth_end, "?#");
    n = strlen(url) + 2 * sizeof(REDACTED) + 2;
    out = malloc(n);
    if (!out)
        return NULL;
    if (at)
        snprintf(out, n, "%.*s" REDACTED "@%.*s", (int)(auth - url), url,
                 (int)(cut - (at + 1)), at + 1);
    else
        snprintf(out, n, "%.*s", (int)(cut - url), url);
    if (*cut)
        snprintf(out + strlen(out), n - strlen(out), "%c" REDACTED, *cut);
    return out;
}

static void
gen_policy(yajl_gen g, const struct policy *p)
{
    size_t i;

    yajl_gen_map_open(g);
    jw_str(g, "name");
    jw_str(g, p->name);
    jw_str(g, "match");
    yajl_gen_map_open(g);
    jw_str(g, "labels");
    yajl_gen_map_open(g);
    for (i = 0; i < p->nmatch_labels; i++) {
        jw_str(g, p->match_labels[i].key);
        jw_str(g, p->match_labels[i].value);
    }
    yajl_gen_map_close(g);
    if (p->match_name) {
        jw_str(g, "name");
        jw_str(g, p->match_name);
    }
    if (p->match_image) {
        jw_str(g, "image");
        jw_str(g, p->match_image);
    }
    yajl_gen_map_close(g);
    jw_str(g, "action");
    jw_str(g, policy_action_name(p->action));
    jw_str(g, "delay_ms");
    jw_int(g, p->delay_ms);
    jw_str(g, "force");
    yajl_gen_bool(g, p->force);
    jw_str(g, "remove_volumes");
    yajl_gen_bool(g, p->remove_volumes);
    jw_str(g, "reap_leaked_tasks");
    yajl_gen_bool(g, p->reap_leaked_tasks);
    jw_str(g, "report");
    yajl_gen_bool(g, p->report);
    /* Not kept once validated, but implied: a remove policy that loaded
     * with an empty match must have said it. */
    jw_str(g, "allow_match_all");
    yajl_gen_bool(g, p->action == POLICY_REMOVE && !p->nmatch_labels &&
                         !p->match_name && !p->match_image);
    yajl_gen_map_close(g);
}

static void
gen_globs(yajl_gen g, const char *key, char *const *globs, size_t n)
{
    size_t i;

    jw_str(g, key);
    yajl_gen_array_open(g);
    for (i = 0; i < n; i++)
        jw_str(g, globs[i]);
    yajl_gen_array_close(g);
}

char *
config_to_json(const struct config *cfg, bool redact, size_t *len)
{
    static const char *const level_names[] = {"debug", "info", "warn",
                                              "error"};
    yajl_gen g = yajl_gen_alloc(NULL);
    char *url = NULL, *out = NULL;
    size_t i;

    if (!g)
        return NULL;
    if (cfg->upstream_url && redact) {
        url = redact_url(cfg->upstream_url);
        if (!url)
            goto out;
    }
    yajl_gen_map_open(g);
    jw_str(g, "source");
    jw_str(g, cfg->source);
    gen_fields(g, cfg, top_fields, NFIELDS(top_fields));
    gen_section(g, cfg, "docker", docker_fields, NFIELDS(docker_fields));
    gen_section(g, cfg, "containerd", containerd_fields,
                NFIELDS(containerd_fields));
    gen_section(g, cfg, "retention", retention_fields,
                NFIELDS(retention_fields));
    gen_section(g, cfg, "reports_log", reports_log_fields,
                NFIELDS(reports_log_fields));
    gen_section(g, cfg, "status", status_fields, NFIELDS(status_fields));
    gen_section(g, cfg, "admin", admin_fields, NFIELDS(admin_fields));

    jw_str(g, "upstream");
    yajl_gen_map_open(g);
    for (i = 0; i < NFIELDS(upstream_fields); i++) {
        if (upstream_fields[i].off == AT(upstream_url) && redact) {
            jw_str(g, "url");
            jw_str(g, url);
            continue;
        }
        gen_fields(g, cfg, &upstream_fields[i], 1);
    }
    jw_str(g, "headers");
    yajl_gen_map_open(g);
    for (i = 0; i < cfg->nupstream_headers; i++) {
        jw_str(g, cfg->upstream_headers[i].name);
        jw_str(g, redact ? REDACTED : cfg->upstream_headers[i].value);
    }
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);

    gen_section(g, cfg, "delete", delete_fields, NFIELDS(delete_fields));
    jw_str(g, "policies");
    yajl_gen_array_open(g);
    for (i = 0; i < cfg->policies.count; i++)
        gen_policy(g, &cfg->policies.items[i]);
    yajl_gen_array_close(g);
    jw_str(g, "default_action");
    jw_str(g, policy_action_name(cfg->policies.default_action));
    jw_str(g, "labels");
    yajl_gen_map_open(g);
    gen_globs(g, "allow", cfg->labels.allow, cfg->labels.nallow);
    gen_globs(g, "deny", cfg->labels.deny, cfg->labels.ndeny);
    yajl_gen_map_close(g);
    jw_str(g, "log");
    yajl_gen_map_open(g);
    jw_str(g, "level");
    jw_str(g, level_names[cfg->log_level]);
    jw_str(g, "format");
    jw_str(g, cfg->log_format == LOG_FORMAT_JSON ? "json" : "text");
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
    out = jw_finish(g, len);
    g = NULL;
out:
    free(url);
    if (g != NULL)
        yajl_gen_free(g);
    return out;
}
