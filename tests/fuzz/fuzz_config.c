/*
 * fuzz_config — a config file (agent/config.h): JSON with comments, every
 * key validated, policies included, through config_parse; then what the
 * daemon does with an accepted one: the effective config as JSON
 * (/v1/config, --check-config) and policy decisions.
 *
 * Checked: an accepted config has no problems listed; its JSON (plain
 * and redacted) is one valid JSON document, and that JSON less "source"
 * loads back as the same config; every label a policy matches on is one
 * policy_set_names_label knows (so the parsers keep it whatever the
 * limits); policy decisions on a few containers end in a known action. A
 * refused one lists at least one problem, each a single line
 * "fuzz:LINE:COL: message" (or "fuzz: message") pointing inside the
 * text, with no control bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"
#include "json.h"
#include "policy.h"

static void
check_json(const struct config *cfg, bool redact)
{
    struct json_limits lim = {.max_bytes = SIZE_MAX,
                              .max_depth = 32,
                              .max_items = SIZE_MAX,
                              .max_string = SIZE_MAX};
    struct json_node *root;
    size_t len = 0;
    char *json = config_to_json(cfg, redact, &len);

    FUZZ_CHECK(json != NULL);
    FUZZ_CHECK(strlen(json) == len);
    root = json_parse(json, len, &lim, 0, NULL, 0, NULL);
    FUZZ_CHECK(root != NULL && root->type == JSON_OBJECT);
    json_free(root);
    free(json);
}

/* The effective config, as --check-config and /v1/config show it, loads
 * back as the same config: every value it prints is one the parser takes.
 * Only "source" (where it came from) is not a key of the file. */
static void
check_round_trip(const struct config *cfg)
{
    static const char head[] = "{\"source\":\"fuzz\",";
    struct config_errors errs = {0};
    struct config *again = NULL;
    char *json, *json2;
    size_t len = 0, len2 = 0, i;

    json = config_to_json(cfg, false, &len);
    FUZZ_CHECK(json != NULL);
    FUZZ_CHECK(len > sizeof(head) &&
               memcmp(json, head, sizeof(head) - 1) == 0);
    /* Keep the '{', drop the "source" member. */
    memmove(json + 1, json + sizeof(head) - 1, len - (sizeof(head) - 1) + 1);
    len -= sizeof(head) - 2;
    if (config_parse("fuzz", json, len, &again, &errs) != 0) {
        for (i = 0; i < errs.count; i++)
            fprintf(stderr, "%s\n", errs.lines[i]);
        FUZZ_CHECK(!"the effective config does not load back");
    }
    json2 = config_to_json(again, false, &len2);
    FUZZ_CHECK(json2 != NULL);
    FUZZ_CHECK(len2 == len + sizeof(head) - 2);
    FUZZ_CHECK(memcmp(json2 + sizeof(head) - 1, json + 1, len - 1) == 0);
    free(json2);
    config_free(again);
    config_errors_clear(&errs);
    free(json);
}

static void
check_policies(const struct policy_set *set)
{
    static const struct policy_label labels[] = {
        {"reapd.managed", "true"}, {"team", "infra"}, {"debug", "1"}};
    static const char *const names[] = {"/web-1", "job-7f3a", NULL};
    static const char *const images[] = {"registry.example/app:1.2", "busybox",
                                         NULL};
    const struct policy *matched;
    enum policy_action a;
    size_t i, j;

    FUZZ_CHECK(set->count == 0 || set->items != NULL);
    for (i = 0; i < set->count; i++) {
        const struct policy *p = &set->items[i];

        FUZZ_CHECK(p->name != NULL);
        FUZZ_CHECK((unsigned)p->action <= POLICY_REMOVE);
        FUZZ_CHECK(p->delay_ms >= 0);
        for (j = 0; j < p->nmatch_labels; j++) {
            const struct policy_label *l = &p->match_labels[j];

            FUZZ_CHECK(l->key != NULL && l->value != NULL);
            FUZZ_CHECK(policy_set_names_label(set, l->key, strlen(l->key)));
        }
    }
    for (i = 0; i < 3; i++) {
        a = policy_decide(set, names[i], images[i], labels, 3 - i, &matched);
        FUZZ_CHECK((unsigned)a <= POLICY_REMOVE);
        if (matched != NULL)
            FUZZ_CHECK(matched >= set->items &&
                       matched < set->items + set->count &&
                       a == matched->action);
        else
            FUZZ_CHECK(a == set->default_action);
    }
}

/* "fuzz:LINE:COL: message" within the text, or "fuzz: message". */
static void
check_problem(const char *line, const uint8_t *text, size_t len)
{
    unsigned long nl = 1, ln, col;
    const char *p;
    char *end;
    size_t i;

    for (p = line; *p != '\0'; p++)
        FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
    FUZZ_CHECK(strncmp(line, "fuzz:", 5) == 0);
    p = line + 5;
    if (*p == ' ')
        return;
    ln = strtoul(p, &end, 10);
    FUZZ_CHECK(end != p && *end == ':');
    p = end + 1;
    col = strtoul(p, &end, 10);
    FUZZ_CHECK(end != p && strncmp(end, ": ", 2) == 0);
    for (i = 0; i < len; i++)
        nl += text[i] == '\n';
    FUZZ_CHECK(ln >= 1 && ln <= nl);
    FUZZ_CHECK(col >= 1 && col <= len + 1);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct config_errors errs = {0};
    struct config *cfg = (struct config *)&cfg;
    size_t i;
    int rc;

    fuzz_quiet_logs();
    rc = config_parse("fuzz", (const char *)data, size, &cfg, &errs);
    if (rc == 0) {
        FUZZ_CHECK(cfg != NULL);
        FUZZ_CHECK(errs.count == 0);
        check_json(cfg, false);
        check_json(cfg, true);
        check_round_trip(cfg);
        check_policies(&cfg->policies);
        config_free(cfg);
    } else {
        FUZZ_CHECK(rc == -1);
        FUZZ_CHECK(cfg == NULL);
        FUZZ_CHECK(errs.count >= 1);
        for (i = 0; i < errs.count; i++)
            check_problem(errs.lines[i], data, size);
    }
    config_errors_clear(&errs);
    return 0;
}
