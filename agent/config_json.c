/*
 * config_json — the effective config as one JSON object (config_to_json,
 * config.h): every key in the order of the file's sections, defaults
 * included, with what could be a secret redacted on request.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_gen.h>

#include "config.h"
#include "config_keys.h"
#include "jsonw.h"

#define REDACTED "<redacted>"

static void
gen_fields(yajl_gen g, const struct config *cfg, const struct config_field *f,
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
gen_section(yajl_gen g, const struct config *cfg,
            const struct config_section *sec)
{
    jw_str(g, sec->name);
    yajl_gen_map_open(g);
    gen_fields(g, cfg, sec->fields, sec->nfields);
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
    gen_fields(g, cfg, config_keys_top.fields, config_keys_top.nfields);
    gen_section(g, cfg, &config_keys_docker);
    gen_section(g, cfg, &config_keys_containerd);
    gen_section(g, cfg, &config_keys_retention);
    gen_section(g, cfg, &config_keys_reports_log);
    gen_section(g, cfg, &config_keys_status);
    gen_section(g, cfg, &config_keys_admin);

    jw_str(g, "upstream");
    yajl_gen_map_open(g);
    for (i = 0; i < config_keys_upstream.nfields; i++) {
        if (config_keys_upstream.fields[i].off ==
                offsetof(struct config, upstream_url) &&
            redact) {
            jw_str(g, "url");
            jw_str(g, url);
            continue;
        }
        gen_fields(g, cfg, &config_keys_upstream.fields[i], 1);
    }
    jw_str(g, "headers");
    yajl_gen_map_open(g);
    for (i = 0; i < cfg->nupstream_headers; i++) {
        jw_str(g, cfg->upstream_headers[i].name);
        jw_str(g, redact ? REDACTED : cfg->upstream_headers[i].value);
    }
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);

    gen_section(g, cfg, &config_keys_delete);
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
