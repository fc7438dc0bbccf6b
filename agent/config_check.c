/*
 * config_check — the checks of string settings; see config_check.h.
 */
#include "config_check.h"

#include <string.h>
#include <unistd.h>

#define SUN_PATH_MAX 108 /* sizeof(sockaddr_un.sun_path) on Linux */

const char *
config_check_nonempty(const char *s)
{
    return *s ? NULL : "must not be empty";
}

const char *
config_check_abs_path(const char *s)
{
    return s[0] == '/' ? NULL : "must be an absolute path";
}

/* A file reapd must be able to read when it starts (a token, a CA...);
 * "unreadable" is a config error, not a surprise at the first delivery. */
const char *
config_check_readable(const char *s)
{
    if (s[0] != '/')
        return "must be an absolute path";
    if (access(s, R_OK) != 0)
        return "cannot be read";
    return NULL;
}

const char *
config_check_socket_path(const char *s)
{
    if (s[0] != '/')
        return "must be an absolute path";
    if (strlen(s) >= SUN_PATH_MAX)
        return "socket path is too long (at most 107 bytes)";
    return NULL;
}

const char *
config_check_containerd_socket(const char *s)
{
    if (strcmp(s, "auto") == 0 || strcmp(s, "off") == 0)
        return NULL;
    if (s[0] != '/')
        return "must be \"auto\", \"off\" or an absolute path";
    return config_check_socket_path(s);
}

static bool
is_alnum(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9');
}

/* containerd's own rule for namespace names. */
const char *
config_check_namespace(const char *s)
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

const char *
config_check_admin_socket(const char *s)
{
    if (strcmp(s, "off") == 0)
        return NULL;
    if (s[0] != '/')
        return "must be an absolute path or \"off\"";
    if (strlen(s) >= SUN_PATH_MAX)
        return "is too long for a unix socket (at most 107 bytes)";
    return NULL;
}

const char *
config_check_listen(const char *s)
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

const char *
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
const char *
config_check_glob(const char *g)
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
bool
config_is_tchar(char ch)
{
    return is_alnum(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch));
}
