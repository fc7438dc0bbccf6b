/*
 * config_keys — every key of the config file: where its value is kept in
 * struct config, what it accepts (an integer range, or a check of the
 * string: config_check.h), and its default (config_default); and freeing
 * a config (config_free). The table of keys at the top of config_keys.c
 * is the reference. Private to config's files: callers see config.h.
 */
#ifndef REAPD_CONFIG_KEYS_H
#define REAPD_CONFIG_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define CONFIG_WEEK_MS INT64_C(604800000)
/* Below this, reports.jsonl would hold a handful of reports (one is up to
 * LIMIT_RECORD_BYTES) and reapd would spend its syncs on rotating:
 * reports_log.max_bytes is 0 (never rotate) or at least this. */
#define CONFIG_REPORTS_LOG_MIN_BYTES 65536

/* A scalar key of a section that maps straight onto a config field. */
enum config_field_type { F_INT, F_STR, F_NULLABLE_STR, F_BOOL };

struct config_field {
    const char *key;
    enum config_field_type type;
    size_t off; /* into struct config */
    int64_t min, max;
    /* F_STR: NULL if the value is fine, else what is wrong with it. */
    const char *(*check)(const char *s);
};

/* The keys of a section (an object of the file) that map straight onto
 * config fields. */
struct config_section {
    const char *name; /* NULL: the top level */
    const struct config_field *fields;
    size_t nfields;
};

extern const struct config_section config_keys_top, config_keys_docker,
    config_keys_containerd, config_keys_status, config_keys_admin,
    config_keys_upstream, config_keys_retention, config_keys_reports_log,
    config_keys_delete;

/* The embedded default, its messages naming `source`; NULL when out of
 * memory. The caller frees it (config_free). */
struct config *config_new_default(const char *source);

#endif
