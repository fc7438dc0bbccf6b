/*
 * test_sdnotify — systemd's notify protocol in agent/sdnotify.c, against
 * a datagram socket the test owns (named and abstract), on a real
 * event_base for the watchdog's pings; and every malformed environment
 * refused with its reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sdnotify.h"
#include "testutil.h"

struct rx {
    int fd;
    char path[108]; /* "" for an abstract socket */
    char env[120];
};

/* A receiving socket; `abstract`: in the abstract namespace. */
static void
rx_open(struct rx *r, bool abstract)
{
    struct sockaddr_un sun;
    socklen_t len;

    memset(r, 0, sizeof(*r));
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    r->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    assert_true(r->fd >= 0);
    if (abstract) {
        int n = snprintf(sun.sun_path + 1, sizeof(sun.sun_path) - 1,
                         "reapd-test-notify-%ld", (long)getpid());

        snprintf(r->env, sizeof(r->env), "@%s", sun.sun_path + 1);
        len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
                          (size_t)n);
    } else {
        snprintf(r->path, sizeof(r->path), "/tmp/reapd-test-notify-%ld.sock",
                 (long)getpid());
        unlink(r->path);
        snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", r->path);
        snprintf(r->env, sizeof(r->env), "%s", r->path);
        len = sizeof(sun);
    }
    assert_int_equal(bind(r->fd, (struct sockaddr *)&sun, len), 0);
    setenv("NOTIFY_SOCKET", r->env, 1);
}

static void
rx_close(struct rx *r)
{
    close(r->fd);
    if (r->path[0] != '\0')
        unlink(r->path);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
}

/* The next datagram, or "" when none waits. */
static const char *
rx_next(struct rx *r)
{
    static char buf[2048];
    ssize_t n = recv(r->fd, buf, sizeof(buf) - 1, 0);

    if (n < 0) {
        assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
        n = 0;
    }
    buf[n] = '\0';
    return buf;
}

static void
t_unset_is_not_an_error(void **state)
{
    char err[256] = "x";

    (void)state;
    unsetenv("NOTIFY_SOCKET");
    assert_null(sdnotify_new(NULL, err, sizeof(err)));
    assert_string_equal(err, "");
    /* Not under systemd: every call is a harmless no-op. */
    assert_int_equal(sdnotify_ready(NULL, "x"), 0);
    assert_int_equal(sdnotify_status(NULL, "x"), 0);
    assert_int_equal(sdnotify_reloading(NULL), 0);
    assert_int_equal(sdnotify_stopping(NULL), 0);
    assert_int_equal(sdnotify_watchdog_usec(NULL), 0);
    sdnotify_free(NULL);
}

static void
check_messages(bool abstract)
{
    struct event_base *base = event_base_new();
    struct sdnotify *n;
    struct rx r;
    char err[256];
    const char *m;

    rx_open(&r, abstract);
    n = sdnotify_new(base, err, sizeof(err));
    assert_non_null(n);
    assert_int_equal(sdnotify_watchdog_usec(n), 0);
    assert_int_equal(sdnotify_ready(n, "ready: watching\nthe engine"), 0);
    assert_string_equal(rx_next(&r), "READY=1\nSTATUS=ready: watching the "
                                     "engine");
    assert_int_equal(sdnotify_reloading(n), 0);
    m = rx_next(&r);
    assert_non_null(strstr(m, "RELOADING=1\nMONOTONIC_USEC="));
    assert_non_null(strstr(m, "\nSTATUS=reloading the config"));
    assert_int_equal(sdnotify_status(n, "not ready: no stream"), 0);
    assert_string_equal(rx_next(&r), "STATUS=not ready: no stream");
    assert_int_equal(sdnotify_stopping(n), 0);
    assert_string_equal(rx_next(&r), "STOPPING=1\nSTATUS=stopping");
    assert_string_equal(rx_next(&r), "");
    assert_int_equal(sdnotify_sent(n), 4);
    assert_int_equal(sdnotify_dropped(n), 0);
    sdnotify_free(n);
    rx_close(&r);
    event_base_free(base);
}

static void
t_messages_named_socket(void **state)
{
    (void)state;
    check_messages(false);
}

static void
t_messages_abstract_socket(void **state)
{
    (void)state;
    check_messages(true);
}

struct pings {
    struct rx *r;
    int n;
};

/* Reads as they come: a unix datagram socket queues only a few
 * (net.unix.max_dgram_qlen, 10 by default). */
static void
on_rx(evutil_socket_t fd, short what, void *arg)
{
    struct pings *p = arg;
    const char *m;

    (void)fd;
    (void)what;
    while (*(m = rx_next(p->r)) != '\0') {
        assert_string_equal(m, "WATCHDOG=1");
        p->n++;
    }
}

/* Pings every half of WATCHDOG_USEC, from the loop: 100 ms asked, about
 * 20 in a second. */
static void
t_watchdog_pings(void **state)
{
    struct event_base *base = event_base_new();
    struct timeval one = {1, 0};
    struct sdnotify *n;
    struct event *ev;
    struct rx r;
    struct pings p = {&r, 0};
    char err[256];

    (void)state;
    rx_open(&r, false);
    setenv("WATCHDOG_USEC", "100000", 1);
    n = sdnotify_new(base, err, sizeof(err));
    assert_non_null(n);
    assert_int_equal(sdnotify_watchdog_usec(n), 100000);
    ev = event_new(base, r.fd, EV_READ | EV_PERSIST, on_rx, &p);
    assert_non_null(ev);
    event_add(ev, NULL);
    event_base_loopexit(base, &one);
    event_base_dispatch(base);
    on_rx(r.fd, EV_READ, &p);
    print_message("%d pings in 1 s at WATCHDOG_USEC=100000\n", p.n);
    assert_true(p.n >= 15 && p.n <= 21);
    assert_int_equal(sdnotify_dropped(n), 0);
    event_free(ev);
    sdnotify_free(n);
    rx_close(&r);
    event_base_free(base);
}

/* WATCHDOG_PID of another process: its watchdog, not ours. Ours: on. */
static void
t_watchdog_pid(void **state)
{
    struct event_base *base = event_base_new();
    struct sdnotify *n;
    struct rx r;
    char err[256], pid[32];

    (void)state;
    rx_open(&r, false);
    setenv("WATCHDOG_USEC", "30000000", 1);
    setenv("WATCHDOG_PID", "1", 1);
    n = sdnotify_new(base, err, sizeof(err));
    assert_non_null(n);
    assert_int_equal(sdnotify_watchdog_usec(n), 0);
    sdnotify_free(n);
    snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    setenv("WATCHDOG_PID", pid, 1);
    n = sdnotify_new(base, err, sizeof(err));
    assert_non_null(n);
    assert_int_equal(sdnotify_watchdog_usec(n), 30000000);
    sdnotify_free(n);
    rx_close(&r);
    event_base_free(base);
}

static void
refused(const char *sock, const char *usec, const char *pid,
        const char *reason)
{
    struct event_base *base = event_base_new();
    char err[256] = "";

    setenv("NOTIFY_SOCKET", sock, 1);
    if (usec != NULL)
        setenv("WATCHDOG_USEC", usec, 1);
    else
        unsetenv("WATCHDOG_USEC");
    if (pid != NULL)
        setenv("WATCHDOG_PID", pid, 1);
    else
        unsetenv("WATCHDOG_PID");
    assert_null(sdnotify_new(base, err, sizeof(err)));
    print_message("%s -> %s\n", sock, err);
    assert_non_null(strstr(err, reason));
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    event_base_free(base);
}

static void
t_bad_environment(void **state)
{
    char long_path[200];

    (void)state;
    memset(long_path, 'a', sizeof(long_path) - 1);
    long_path[0] = '/';
    long_path[sizeof(long_path) - 1] = '\0';
    refused("relative/path", NULL, NULL, "neither an absolute path");
    refused("@", NULL, NULL, "neither an absolute path");
    refused("vsock:2:1234", NULL, NULL, "neither an absolute path");
    refused(long_path, NULL, NULL, "bytes long");
    refused("/tmp/x", "abc", NULL, "WATCHDOG_USEC=abc");
    refused("/tmp/x", "-5", NULL, "WATCHDOG_USEC=-5");
    refused("/tmp/x", "100", NULL, "WATCHDOG_USEC=100");
    refused("/tmp/x", "99999999999999999999", NULL, "WATCHDOG_USEC");
    refused("/tmp/x", "1000000", "x1", "WATCHDOG_PID=x1");
    refused("/tmp/x", "1000000", "0", "WATCHDOG_PID=0");
}

/* Nobody listens (systemd gone): sends fail, are counted, never block. */
static void
t_nobody_listening(void **state)
{
    struct event_base *base = event_base_new();
    struct sdnotify *n;
    char err[256];
    int i;

    (void)state;
    setenv("NOTIFY_SOCKET", "/tmp/reapd-test-notify-nobody.sock", 1);
    unlink("/tmp/reapd-test-notify-nobody.sock");
    n = sdnotify_new(base, err, sizeof(err));
    assert_non_null(n);
    for (i = 0; i < 3; i++)
        assert_int_equal(sdnotify_status(n, "x"), -1);
    assert_int_equal(sdnotify_dropped(n), 3);
    assert_int_equal(sdnotify_sent(n), 0);
    sdnotify_free(n);
    unsetenv("NOTIFY_SOCKET");
    event_base_free(base);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_unset_is_not_an_error),
        cmocka_unit_test(t_messages_named_socket),
        cmocka_unit_test(t_messages_abstract_socket),
        cmocka_unit_test(t_watchdog_pings),
        cmocka_unit_test(t_watchdog_pid),
        cmocka_unit_test(t_bad_environment),
        cmocka_unit_test(t_nobody_listening),
    };

    tu_test_filters(); /* REAPD_TEST_ONLY, TEST_FILTER */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
