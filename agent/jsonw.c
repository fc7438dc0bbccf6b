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

/* Digits written by hand: yajl_gen_integer goes through sprintf, dear
 * for the dozen integers of every record, written several times per
 * exit. The text is the same. */
void
jw_int(yajl_gen g, long long v)
{
    char buf[24];
    char *p = buf + sizeof(buf);
    unsigned long long u = (unsigned long long)v;

    if (v < 0)
        u = 0ull - u;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        *--p = '-';
    yajl_gen_number(g, p, (size_t)(buf + sizeof(buf) - p));
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
    jw_int(g, v);
}

void
jw_key_int_or_null(yajl_gen g, const char *k, bool has, long long v)
{
    jw_str(g, k);
    if (has)
        jw_int(g, v);
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
