/*
 * sdnotify — systemd's notify protocol and watchdog, spoken directly on
 * a datagram socket (sdnotify.h says why not libsystemd).
 */
#include "sdnotify.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

/* A watchdog interval beyond a day is a typo; below 2 ms, pings at half
 * of it would be all the loop does. */
#define WATCHDOG_MIN_USEC 2000ULL
#define WATCHDOG_MAX_USEC 86400000000ULL
/* Our messages are a few short lines; STATUS= text is cut to fit. */
#define MSG_MAX 1024

struct sdnotify {
    int fd;
    struct sockaddr_un addr;
    socklen_t addrlen;
    uint64_t watchdog_usec;
    struct event *ping;
    uint64_t sent, dropped;
    bool said_dropped; /* said once, not at every ping */
};

/* NOTIFY_SOCKET: "/abs/path" or "@abstract"; anything else (systemd's
 * "vsock:" among it) is refused with a reason. */
static int
parse_socket(struct sdnotify *n, const char *s, char *err, size_t errlen)
{
    size_t len = strlen(s);

    memset(&n->addr, 0, sizeof(n->addr));
    n->addr.sun_family = AF_UNIX;
    if (len < 2 || (s[0] != '/' && s[0] != '@')) {
        snprintf(err, errlen,
                 "NOTIFY_SOCKET=%.200s is neither an absolute path nor "
                 "@abstract",
                 s);
        return -1;
    }
    if (len >= sizeof(n->addr.sun_path)) {
        snprintf(err, errlen, "NOTIFY_SOCKET is %zu bytes long (at most %zu)",
                 len, sizeof(n->addr.sun_path) - 1);
        return -1;
    }
    memcpy(n->addr.sun_path, s, len);
    if (s[0] == '@')
        n->addr.sun_path[0] = '\0'; /* abstract: no terminating NUL */
    n->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
                             (s[0] == '/' ? 1 : 0));
    return 0;
}

/* WATCHDOG_USEC and WATCHDOG_PID: 0 when the watchdog is not reapd's.
 * -1 on a malformed value. */
static int
parse_watchdog(uint64_t *usec, char *err, size_t errlen)
{
    const char *u = getenv("WATCHDOG_USEC"), *p = getenv("WATCHDOG_PID");
    char *end;
    unsigned long long v;

    *usec = 0;
    if (u == NULL || *u == '\0')
        return 0;
    if (p != NULL && *p != '\0') {
        unsigned long long pid;

        errno = 0;
        pid = strtoull(p, &end, 10);
        if (errno != 0 || *end != '\0' || end == p || pid == 0) {
            snprintf(err, errlen, "WATCHDOG_PID=%.40s is not a process id", p);
            return -1;
        }
        if (pid != (unsigned long long)getpid())
            return 0; /* another process's watchdog */
    }
    errno = 0;
    v = strtoull(u, &end, 10);
    if (errno != 0 || *end != '\0' || end == u || u[0] == '-' ||
        v < WATCHDOG_MIN_USEC || v > WATCHDOG_MAX_USEC) {
        snprintf(err, errlen,
                 "WATCHDOG_USEC=%.40s is not a number of microseconds in "
                 "%llu .. %llu",
                 u, WATCHDOG_MIN_USEC, WATCHDOG_MAX_USEC);
        return -1;
    }
    *usec = v;
    return 0;
}

static void
on_ping(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sdnotify_send(arg, "WATCHDOG=1");
}

struct sdnotify *
sdnotify_new(struct event_base *base, char *err, size_t errlen)
{
    const char *s = getenv("NOTIFY_SOCKET");
    struct sdnotify *n = NULL, *result = NULL;

    if (errlen > 0)
        err[0] = '\0';
    if (s == NULL || *s == '\0')
        return NULL;
    n = calloc(1, sizeof(*n));
    if (n == NULL) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    n->fd = -1;
    if (parse_socket(n, s, err, errlen) != 0 ||
        parse_watchdog(&n->watchdog_usec, err, errlen) != 0)
        goto out;
    n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (n->fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        goto out;
    }
    if (n->watchdog_usec > 0) {
        struct timeval tv;
        uint64_t half = n->watchdog_usec / 2;

        tv.tv_sec = (time_t)(half / 1000000u);
        tv.tv_usec = (suseconds_t)(half % 1000000u);
        n->ping = event_new(base, -1, EV_PERSIST, on_ping, n);
        if (n->ping == NULL || event_add(n->ping, &tv) != 0) {
            snprintf(err, errlen, "cannot arm the watchdog timer");
            goto out;
        }
    }
    result = n;
    n = NULL;
out:
    sdnotify_free(n);
    return result;
}

void
sdnotify_free(struct sdnotify *n)
{
    if (n == NULL)
        return;
    if (n->ping != NULL)
        event_free(n->ping);
    if (n->fd >= 0)
        close(n->fd);
    free(n);
}

int
sdnotify_send(struct sdnotify *n, const char *msg)
{
    ssize_t w;

    if (n == NULL)
        return 0;
    do
        w = sendto(n->fd, msg, strlen(msg), MSG_NOSIGNAL,
                   (const struct sockaddr *)&n->addr, n->addrlen);
    while (w < 0 && errno == EINTR);
    if (w < 0) {
        n->dropped++;
        if (!n->said_dropped) {
            n->said_dropped = true;
            log_warn(NULL, "systemd notify: cannot send (%s); dropped",
                     strerror(errno));
        }
        return -1;
    }
    if (n->said_dropped) {
        n->said_dropped = false;
        log_info(NULL, "systemd notify: sending again");
    }
    n->sent++;
    return 0;
}

/* "PREFIX" then "STATUS=<status>" with newlines made spaces. */
static int
send_with_status(struct sdnotify *n, const char *prefix, const char *status)
{
    char msg[MSG_MAX];
    int len;
    char *p;

    if (n == NULL)
        return 0;
    len = snprintf(msg, sizeof(msg), "%sSTATUS=%s", prefix,
                   status != NULL ? status : "");
    if (len < 0)
        return -1;
    for (p = msg + strlen(prefix); *p != '\0'; p++)
        if (*p == '\n')
            *p = ' ';
    return sdnotify_send(n, msg);
}

int
sdnotify_ready(struct sdnotify *n, const char *status)
{
    return send_with_status(n, "READY=1\n", status);
}

int
sdnotify_reloading(struct sdnotify *n)
{
    struct timespec ts;
    char msg[128];

    if (n == NULL)
        return 0;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(msg, sizeof(msg),
             "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading the config",
             (unsigned long long)ts.tv_sec * 1000000ULL +
                 (unsigned long long)ts.tv_nsec / 1000ULL);
    return sdnotify_send(n, msg);
}

int
sdnotify_stopping(struct sdnotify *n)
{
    return send_with_status(n, "STOPPING=1\n", "stopping");
}

int
sdnotify_status(struct sdnotify *n, const char *status)
{
    return send_with_status(n, "", status);
}

uint64_t
sdnotify_watchdog_usec(const struct sdnotify *n)
{
    return n != NULL ? n->watchdog_usec : 0;
}

uint64_t
sdnotify_sent(const struct sdnotify *n)
{
    return n != NULL ? n->sent : 0;
}

uint64_t
sdnotify_dropped(const struct sdnotify *n)
{
    return n != NULL ? n->dropped : 0;
}
