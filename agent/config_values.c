/*
 * config_values — the parsing context and typed values; see
 * config_values.h.
 */
#include "config_values.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_PROBLEMS 100

/* ---- problems ---------------------------------------------------------- */

/* Takes ownership of `line` (freed here if it cannot be kept). */
static void
config_keep_line(struct config_ctx *c, char *line)
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

static char *config_vformat(const char *fmt, va_list ap)
    __attribute__((format(printf, 1, 0)));
static char *config_format(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* A malloc'd copy of the printf result (caller frees), or NULL. */
static char *
config_vformat(const char *fmt, va_list ap)
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
config_format(const char *fmt, ...)
{
    va_list ap;
    char *s;

    va_start(ap, fmt);
    s = config_vformat(fmt, ap);
    va_end(ap);
    return s;
}

/* Records "SOURCE:LINE:COL: message" for the byte at `offset`. */
void
config_problem(struct config_ctx *c, size_t offset, const char *fmt, ...)
{
    unsigned line = 0, col = 0;
    va_list ap;
    char *msg;

    c->nproblems++;
    if (!c->errs || c->nproblems > MAX_PROBLEMS + 1)
        return;
    if (c->nproblems == MAX_PROBLEMS + 1) {
        config_keep_line(
            c, config_format("%s: too many problems; giving up after %d",
                             c->source, MAX_PROBLEMS));
        return;
    }
    va_start(ap, fmt);
    msg = config_vformat(fmt, ap);
    va_end(ap);
    if (!msg) {
        c->oom = true;
        return;
    }
    json_linecol(c->text, c->len, offset, &line, &col);
    config_keep_line(c,
                     config_format("%s:%u:%u: %s", c->source, line, col, msg));
    free(msg);
}

void
config_add_plain(struct config_errors *errs, const char *source,
                 const char *msg)
{
    struct config_ctx c = {.source = source, .errs = errs};

    if (errs)
        config_keep_line(&c, config_format("%s: %s", source, msg));
}

/*
 * Text from the file, made safe to quote in a one-line message: control
 * bytes become '?' and long text is cut. `dst` must hold 68 bytes.
 */
const char *
config_show(char *dst, const char *s, size_t len)
{
    size_t i, n = len > CONFIG_SHOW_MAX ? CONFIG_SHOW_MAX : len;

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

const char *
config_type_name(const struct json_node *n)
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

bool
config_expect_type(struct config_ctx *c, const struct json_node *n,
                   enum json_type t, const char *what, const char *path)
{
    if (n->type == t)
        return true;
    config_problem(c, n->offset, "%s: expected %s, got %s", path, what,
                   config_type_name(n));
    return false;
}

void
config_unknown_key(struct config_ctx *c, const struct json_node *m,
                   const char *section)
{
    char k[CONFIG_SHOW_MAX + 4];

    if (section)
        config_problem(c, m->key_offset, "unknown key \"%s\" in %s",
                       config_show(k, m->key, m->key_len), section);
    else
        config_problem(c, m->key_offset, "unknown key \"%s\"",
                       config_show(k, m->key, m->key_len));
}

/*
 * The last duplicate of a key would silently win; that is almost always
 * a mistake in a hand-edited file, so say so. `icase` for HTTP headers.
 */
void
config_dup_keys(struct config_ctx *c, const struct json_node *obj,
                const char *section, bool icase)
{
    char k[CONFIG_SHOW_MAX + 4];
    size_t i, j;

    for (i = 1; i < obj->count; i++) {
        const struct json_node *m = obj->items[i];

        for (j = 0; j < i; j++) {
            const char *prev = obj->items[j]->key;

            if (icase ? strcasecmp(prev, m->key) != 0
                      : strcmp(prev, m->key) != 0)
                continue;
            config_problem(c, m->key_offset, "duplicate key \"%s\" in %s",
                           config_show(k, m->key, m->key_len), section);
            break;
        }
    }
}

/* ---- typed getters ----------------------------------------------------- */

/*
 * A string value, without embedded NULs. Returns a malloc'd copy (caller
 * owns) or NULL after recording the problem.
 */
char *
config_get_string(struct config_ctx *c, const struct json_node *n,
                  const char *path, const char *(*check)(const char *))
{
    const char *why;
    char *s;

    if (!config_expect_type(c, n, JSON_STRING, "a string", path))
        return NULL;
    if (strlen(n->str) != n->len) {
        config_problem(c, n->offset, "%s: must not contain NUL characters",
                       path);
        return NULL;
    }
    why = check ? check(n->str) : NULL;
    if (why) {
        config_problem(c, n->offset, "%s: %s", path, why);
        return NULL;
    }
    s = strdup(n->str);
    if (!s)
        c->oom = true;
    return s;
}

bool
config_get_int(struct config_ctx *c, const struct json_node *n,
               const char *path, int64_t min, int64_t max, int64_t *out)
{
    char lit[CONFIG_SHOW_MAX + 4];
    int64_t v;

    if (!config_expect_type(c, n, JSON_NUMBER, "an integer", path))
        return false;
    if (json_int64(n, &v) != 0) {
        config_problem(c, n->offset, "%s: expected an integer, got %s", path,
                       config_show(lit, n->str, n->len));
        return false;
    }
    if (v < min || v > max) {
        config_problem(c, n->offset, "%s: must be between %lld and %lld", path,
                       (long long)min, (long long)max);
        return false;
    }
    *out = v;
    return true;
}

bool
config_get_bool(struct config_ctx *c, const struct json_node *n,
                const char *path, bool *out)
{
    if (!config_expect_type(c, n, JSON_BOOL, "a boolean", path))
        return false;
    *out = n->boolean != 0;
    return true;
}

/* Replaces the string at *slot (freeing the old one) when `s` is set. */
void
config_set_string(char **slot, char *s)
{
    if (!s)
        return;
    free(*slot);
    *slot = s;
}

/*
 * Applies member `m` if it is one of `sec`'s keys. Returns false when the
 * key is not in the table, so the caller can try its own keys.
 */
bool
config_apply_field(struct config_ctx *c, const struct json_node *m,
                   const struct config_section *sec, struct config *cfg)
{
    const char *section = sec->name;
    char path[128];
    size_t i;

    for (i = 0; i < sec->nfields; i++) {
        const struct config_field *f = &sec->fields[i];
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
            config_set_string((char **)(void *)base,
                              config_get_string(c, m, path, f->check));
        }
        return true;
    }
    return false;
}

/* A section made only of table fields. */
void
config_parse_section(struct config_ctx *c, const struct json_node *obj,
                     const struct config_section *sec, struct config *cfg)
{
    size_t i;

    if (!config_expect_type(c, obj, JSON_OBJECT, "an object", sec->name))
        return;
    config_dup_keys(c, obj, sec->name, false);
    for (i = 0; i < obj->count; i++)
        if (!config_apply_field(c, obj->items[i], sec, cfg))
            config_unknown_key(c, obj->items[i], sec->name);
}
