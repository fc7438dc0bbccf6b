/*
 * jsonw — writing JSON with yajl's generator: the few helpers every
 * writer of reapd's JSON (reports, records, the effective config, the
 * status endpoint) needs, so that none writes them again.
 *
 * Each takes the generator and writes one value or one key and its
 * value; a NULL string is written as null. yajl refuses a value out of
 * place (an integer where a key must be, anything after the end) and
 * writes nothing for it; the helpers do not report that, since every
 * writer is fixed code whose output its tests check.
 */
#ifndef REAPD_JSONW_H
#define REAPD_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <yajl/yajl_gen.h>

/* `s` (a C string), or null. */
void jw_str(yajl_gen g, const char *s);
/* The first `n` bytes of `s`, or null when s is NULL. */
void jw_strn(yajl_gen g, const char *s, size_t n);
void jw_int(yajl_gen g, long long v);

void jw_key_str(yajl_gen g, const char *k, const char *v);
void jw_key_int(yajl_gen g, const char *k, long long v);
/* `v`, or null when !has. */
void jw_key_int_or_null(yajl_gen g, const char *k, bool has, long long v);
void jw_key_bool(yajl_gen g, const char *k, bool v);

/* The text written, as a NUL-terminated string the caller frees (its
 * length in *len when len is not NULL); NULL when the generator failed
 * or out of memory. Frees `g` either way. */
char *jw_finish(yajl_gen g, size_t *len);

#endif
