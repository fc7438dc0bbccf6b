/*
 * jsonw — helpers over yajl_gen; see jsonw.h.
 */
#include "jsonw.h"

#include <stdlib.h>
#include <string.h>

void
jw_strn(yajl_gen g, const char *s, size_t n)
{
    if (s == NULL)
        yajl_gen_null(g);
    else
        yajl_gen_string(g, (const unsigned char *)s, n);
}

void
jw_str(yajl_gen g, const char *s)
{
    jw_strn(g, s, s != NULL ? strlen(s) : 0);
}

void
jw_int(yajl_gen g, long long v)
{
    yajl_gen_integer(g, v);
}

void
jw_key_str(yajl_gen g, const char *k, const char *v)
{
    jw_str(g, k);
    jw_str(g, v);
}

void
jw_key_int(yajl_gen g, const char *k, long long v)
{
    jw_str(g, k);
    yajl_gen_integer(g, v);
}

void
jw_key_int_or_null(yajl_gen g, const char *k, bool has, long long v)
{
    jw_str(g, k);
    if (has)
        yajl_gen_integer(g, v);
    else
        yajl_gen_null(g);
}

void
jw_key_bool(yajl_gen g, const char *k, bool v)
{
    jw_str(g, k);
    yajl_gen_bool(g, v);
}

char *
jw_finish(yajl_gen g, size_t *len)
{
    const unsigned char *buf;
    size_t n;
    char *out = NULL;

    if (g == NULL)
        return NULL;
    if (yajl_gen_get_buf(g, &buf, &n) == yajl_gen_status_ok &&
        (out = malloc(n + 1)) != NULL) {
        memcpy(out, buf, n);
        out[n] = '\0';
        if (len != NULL)
            *len = n;
    }
    yajl_gen_free(g);
    return out;
}
