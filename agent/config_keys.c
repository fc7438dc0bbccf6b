/*
 * config_keys — the keys of the config file and their defaults; see
 * config_keys.h.
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
 */
#include "config_keys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_check.h"
#include "report.h"

#define AT(member) offsetof(struct config, member)
#define NFIELDS(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the keys of each section ----------------------------------------- */

static const struct config_field top_fields[] = {
    {"node", F_STR, AT(node), 0, 0, config_check_nonempty},
    {"state_dir", F_STR, AT(state_dir), 0, 0, config_check_abs_path},
};

static const struct config_field docker_fields[] = {
    {"socket", F_STR, AT(docker_socket), 0, 0, config_check_socket_path},
    {"request_timeout_ms", F_INT, AT(docker_request_timeout_ms), 100, 3600000,
     NULL},
    {"reconnect_max_ms", F_INT, AT(docker_reconnect_max_ms), 100, 3600000,
     NULL},
};

static const struct config_field containerd_fields[] = {
    {"socket", F_STR, AT(containerd_socket), 0, 0,
     config_check_containerd_socket},
    {"namespace", F_STR, AT(containerd_namespace), 0, 0,
     config_check_namespace},
    {"audit_interval_ms", F_INT, AT(containerd_audit_interval_ms), 0, 86400000,
     NULL},
    {"reap_orphans", F_BOOL, AT(containerd_reap_orphans), 0, 0, NULL},
};

static const struct config_field status_fields[] = {
    {"listen", F_STR, AT(status_listen), 0, 0, config_check_listen},
    {"token_file", F_NULLABLE_STR, AT(status_token_file), 0, 0,
     config_check_readable},
    {"max_connections", F_INT, AT(status_max_connections), 1, 65536, NULL},
};

static const struct config_field admin_fields[] = {
    {"socket", F_STR, AT(admin_socket), 0, 0, config_check_admin_socket},
};

static const struct config_field upstream_fields[] = {
    {"url", F_NULLABLE_STR, AT(upstream_url), 0, 0, config_check_url},
    {"timeout_ms", F_INT, AT(upstream_timeout_ms), 100, 600000, NULL},
    {"token_file", F_NULLABLE_STR, AT(upstream_token_file), 0, 0,
     config_check_readable},
    {"ca_file", F_NULLABLE_STR, AT(upstream_ca_file), 0, 0,
     config_check_readable},
    {"client_cert", F_NULLABLE_STR, AT(upstream_client_cert), 0, 0,
     config_check_readable},
    {"client_key", F_NULLABLE_STR, AT(upstream_client_key), 0, 0,
     config_check_readable},
    {"max_in_flight", F_INT, AT(upstream_max_in_flight), 1, 1024, NULL},
    {"retry_base_ms", F_INT, AT(upstream_retry_base_ms), 10, 3600000, NULL},
    {"retry_max_ms", F_INT, AT(upstream_retry_max_ms), 10, 86400000, NULL},
};

static const struct config_field retention_fields[] = {
    {"delivered_max_age_ms", F_INT, AT(retention_delivered_max_age_ms), 0,
     INT64_C(31536000000), NULL},
    {"delivered_max_count", F_INT, AT(retention_delivered_max_count), 0,
     100000000, NULL},
    {"max_db_bytes", F_INT, AT(retention_max_db_bytes), 0,
     INT64_C(1099511627776), NULL},
};

static const struct config_field reports_log_fields[] = {
    {"max_bytes", F_INT, AT(reports_log_max_bytes), 0, INT64_C(1099511627776),
     NULL},
    {"keep", F_INT, AT(reports_log_keep), 0, REPORT_LOG_KEEP_MAX, NULL},
};

static const struct config_field delete_fields[] = {
    {"max_in_flight", F_INT, AT(delete_max_in_flight), 1, 1024, NULL},
    {"poll_interval_ms", F_INT, AT(delete_poll_interval_ms), 10, 3600000,
     NULL},
    {"warn_after_ms", F_INT, AT(delete_warn_after_ms), 0, CONFIG_WEEK_MS,
     NULL},
    {"give_up_after_ms", F_INT, AT(delete_give_up_after_ms), 0, CONFIG_WEEK_MS,
     NULL},
    {"retry_base_ms", F_INT, AT(delete_retry_base_ms), 10, 3600000, NULL},
    {"retry_max_ms", F_INT, AT(delete_retry_max_ms), 10, 86400000, NULL},
};

const struct config_section config_keys_top = {NULL, top_fields,
                                               NFIELDS(top_fields)};
const struct config_section config_keys_docker = {"docker", docker_fields,
                                                  NFIELDS(docker_fields)};
const struct config_section config_keys_containerd = {
    "containerd", containerd_fields, NFIELDS(containerd_fields)};
const struct config_section config_keys_status = {"status", status_fields,
                                                  NFIELDS(status_fields)};
const struct config_section config_keys_admin = {"admin", admin_fields,
                                                 NFIELDS(admin_fields)};
const struct config_section config_keys_upstream = {
    "upstream", upstream_fields, NFIELDS(upstream_fields)};
const struct config_section config_keys_retention = {
    "retention", retention_fields, NFIELDS(retention_fields)};
const struct config_section config_keys_reports_log = {
    "reports_log", reports_log_fields, NFIELDS(reports_log_fields)};
const struct config_section config_keys_delete = {"delete", delete_fields,
                                                  NFIELDS(delete_fields)};

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
struct config *
config_new_default(const char *source)
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
    return config_new_default("<default>");
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
