/*
 * config_values — the parsing context, and reading values out of the
 * parsed document (json.h) into a config: each problem is recorded as
 * "FILE:LINE:COL: message", and parsing goes on, so that one run lists
 * everything that is wrong; typed getters that check a value's type and
 * range; the keys of a section applied from its table (config_keys.h).
 * Private to config's files: callers see config.h.
 */
#ifndef REAPD_CONFIG_VALUES_H
#define REAPD_CONFIG_VALUES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bounds.h"
#include "config.h"
#include "config_keys.h"
#include "json.h"

/* Parsing state; every problem goes through config_problem(). */
struct config_ctx {
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

/* Text config_show quotes at most, in bytes; its buffer holds 4 more. */
#define CONFIG_SHOW_MAX 64

/* Records "SOURCE:LINE:COL: message" for the byte at `offset` (up to a
 * bound, then one line saying it gave up). */
void config_problem(struct config_ctx *c, size_t offset, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "SOURCE: msg", a problem with no place in the text, into `errs` (may
 * be NULL). */
void config_add_plain(struct config_errors *errs, const char *source,
                      const char *msg);

/* `len` bytes of `s` made safe to quote in a one-line message, in `dst`
 * (CONFIG_SHOW_MAX + 4 bytes); returns dst. */
const char *config_show(char *dst, const char *s, size_t len);
/* "string", "object", ...: the JSON type of `n`. */
const char *config_type_name(const struct json_node *n);
/* Whether `n` is of type `t`; if not, a problem "PATH: expected WHAT". */
bool config_expect_type(struct config_ctx *c, const struct json_node *n,
                        enum json_type t, const char *what, const char *path);
/* A problem: key `m` is unknown in `section` (NULL: the top level). */
void config_unknown_key(struct config_ctx *c, const struct json_node *m,
                        const char *section);
/* A problem for each key of `obj` that repeats an earlier one (`icase`:
 * ignoring case, for HTTP headers). */
void config_dup_keys(struct config_ctx *c, const struct json_node *obj,
                     const char *section, bool icase);

/* A string value passing `check` (may be NULL), malloc'd (the caller
 * owns it); NULL after recording the problem. */
char *config_get_string(struct config_ctx *c, const struct json_node *n,
                        const char *path, const char *(*check)(const char *));
/* An integer in min..max into *out; false after recording the problem. */
bool config_get_int(struct config_ctx *c, const struct json_node *n,
                    const char *path, int64_t min, int64_t max, int64_t *out);
bool config_get_bool(struct config_ctx *c, const struct json_node *n,
                     const char *path, bool *out);
/* Replaces the string at *slot (freeing the old one) when `s` is set. */
void config_set_string(char **slot, char *s);

/* Applies member `m` if it is one of `sec`'s keys; false when it is not,
 * so the caller can try its own keys. */
bool config_apply_field(struct config_ctx *c, const struct json_node *m,
                        const struct config_section *sec, struct config *cfg);
/* Section `obj`, made only of `sec`'s keys. */
void config_parse_section(struct config_ctx *c, const struct json_node *obj,
                          const struct config_section *sec,
                          struct config *cfg);

#endif
