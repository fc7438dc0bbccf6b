/*
 * config_check — what a string setting must look like: paths, sockets,
 * the status listener, the upstream URL, containerd namespaces, globs,
 * header names. Each check returns NULL when `s` is fine, else what is
 * wrong with it (static text, for a message "KEY: <it>"). Pure, but for
 * config_check_readable, which asks the file system. Private to config's
 * files: callers see config.h.
 */
#ifndef REAPD_CONFIG_CHECK_H
#define REAPD_CONFIG_CHECK_H

#include <stdbool.h>

const char *config_check_nonempty(const char *s);
const char *config_check_abs_path(const char *s);
/* An absolute path reapd can read now (a token, a CA...): "unreadable" is
 * a config error, not a surprise at the first delivery. */
const char *config_check_readable(const char *s);
/* An absolute path that fits a unix socket's address. */
const char *config_check_socket_path(const char *s);
/* "auto", "off", or a socket path. */
const char *config_check_containerd_socket(const char *s);
/* containerd's own rule for namespace names. */
const char *config_check_namespace(const char *s);
/* A socket path, or "off". */
const char *config_check_admin_socket(const char *s);
/* "HOST:PORT", "[ADDR]:PORT", "unix:/path" or "off". */
const char *config_check_listen(const char *s);
/* http:// or https://, a host, no spaces or control characters. */
const char *config_check_url(const char *s);
/* A sound fnmatch(3) glob: not empty, every '[' closed. */
const char *config_check_glob(const char *g);
/* Whether `ch` is an RFC 9110 token character (header names). */
bool config_is_tchar(char ch);

#endif
