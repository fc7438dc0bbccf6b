/*
 * test_httpd — the hardened HTTP server in agent/httpd.c, through the
 * status endpoint it serves (endpoint.h's harness): listeners (TCP, IPv6,
 * unix sockets, "off", bad addresses), request bounds (header and body
 * size), hostile clients through raw sockets (garbage, floods, half-sent
 * requests, odd HTTP versions), the connection cap with eviction and
 * refusal, the deadline, accept() errors, and the bearer token's check.
 * The endpoint faces whatever can reach the port, so after each hostile
 * request it must still answer /livez.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "endpoint.h"
#include "httpd.h"
#include "json.h"
#include "log.h"
#include "loop.h"
#include "status.h"

/* The longest padding header value the headers' bound lets through. */
#define HDR_PAD_MAX 8166

/* ---- requests: bounds and hostile clients ---------------------------- */

/*
 * Sends `req` (len bytes) on a fresh TCP connection and collects what
 * comes back until the server closes or `ms` pass, running the loop all
 * along (the server lives on it). Returns the bytes received; *closed
 * says whether the server closed the connection.
 */
static size_t
raw_exchange(struct ep *h, const char *req, size_t len, char *out, size_t cap,
             int ms, int *closed)
{
    struct sockaddr_in sin;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    size_t sent = 0, got = 0;
    uint64_t deadline = loop_now_ms() + (uint64_t)ms;

    assert_true(fd >= 0);
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sin.sin_port = htons((uint16_t)h->port);
    /* The kernel completes the handshake from the backlog. */
    assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
    *closed = 0;
    while (loop_now_ms() < deadline) {
        ssize_t n;

        if (sent < len) {
            n = send(fd, req + sent, len - sent, 0);
            if (n > 0)
                sent += (size_t)n;
            else if (n < 0 && errno != EAGAIN && errno != EINTR)
                sent = len; /* the server gave up on us: fine */
        }
        n = recv(fd, out + got, cap - 1 - got, 0);
        if (n > 0) {
            got += (size_t)n;
            if (got == cap - 1)
                break;
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            *closed = 1;
            break;
        }
        event_base_loop(loop_base(h->reapd.l), EVLOOP_ONCE | EVLOOP_NONBLOCK);
        usleep(1000);
    }
    out[got] = '\0';
    close(fd);
    return got;
}

/* A body over the 1 KiB cap is refused before any handler runs. */
static void
t_oversized_body(void **state)
{
    struct ep *h = ep_new();
    struct ep_resp r;
    char *body = malloc(64 * 1024 + 1);

    (void)state;
    memset(body, 'b', 64 * 1024);
    body[64 * 1024] = '\0';
    ep_request_full(h, "POST", "/livez", NULL, 0, body, &r);
    /* Refused one way or another: a 4xx, or the connection dropped. */
    if (r.error == HTTPC_OK)
        assert_true(r.status >= 400 && r.status < 500);
    ep_resp_clear(&r);
    free(body);
    ep_expect_live(h);
    ep_free(h);
}

static void
t_oversized_header(void **state)
{
    struct ep *h = ep_new();
    struct ep_resp r;
    char *hdr = malloc(12 * 1024);
    const char *hdrs[1];

    (void)state;
    memcpy(hdr, "X-Big: ", 7);
    memset(hdr + 7, 'h', 10 * 1024);
    hdr[7 + 10 * 1024] = '\0';
    hdrs[0] = hdr;
    ep_request_full(h, "GET", "/livez", hdrs, 1, NULL, &r);
    assert_int_equal(r.error, HTTPC_OK);
    assert_true(r.status >= 400 && r.status < 500);
    ep_resp_clear(&r);
    free(hdr);
    /* Many small headers that add up past the cap. */
    {
        const char *many[64];
        char(*lines)[200] = calloc(64, 200);
        int i;

        for (i = 0; i < 64; i++) {
            snprintf(lines[i], 200, "X-H%d: %0180d", i, i);
            many[i] = lines[i];
        }
        ep_request_full(h, "GET", "/livez", many, 64, NULL, &r);
        assert_int_equal(r.error, HTTPC_OK);
        assert_true(r.status >= 400 && r.status < 500);
        ep_resp_clear(&r);
        free(lines);
    }
    ep_expect_live(h);
    ep_free(h);
}

/* A raw request that is well-formed, to show the raw client works. */
static void
t_raw_good_request(void **state)
{
    struct ep *h = ep_new();
    static const char get[] = "GET /livez HTTP/1.0\r\n\r\n";
    static const char two[] = "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"
                              "GET /readyz HTTP/1.1\r\nHost: x\r\n"
                              "Connection: close\r\n\r\n";
    char out[4096];
    int closed;
    const char *second;

    (void)state;
    raw_exchange(h, get, sizeof(get) - 1, out, sizeof(out), 3000, &closed);
    assert_int_equal(ep_raw_status(out), 200);
    assert_non_null(strstr(out, "{\"live\":true}"));
    assert_true(closed); /* HTTP/1.0: closed after the answer */
    /* Two pipelined on one keep-alive connection: both answered, in
     * order. */
    raw_exchange(h, two, sizeof(two) - 1, out, sizeof(out), 3000, &closed);
    assert_int_equal(ep_raw_status(out), 200);
    second = strstr(out, "{\"live\":true}\n");
    assert_non_null(second);
    second += strlen("{\"live\":true}\n");
    assert_int_equal(ep_raw_status(second), 503);
    ep_free(h);
}

/*
 * HEAD is served (405 is for "methods other than GET/HEAD") with the
 * same body as GET, and evhttp 2.1 sends whatever body it is given, so
 * httpd_reply drops it. A HEAD answer must end with its headers (RFC 9110
 * 9.3.2); on a keep-alive connection a stray body is read as the start
 * of the next answer.
 */
static void
t_regress_head_has_no_body(void **state)
{
    struct ep *h = ep_new();
    static const char head[] = "HEAD /livez HTTP/1.0\r\n\r\n";
    static const char pipelined[] =
        "HEAD /livez HTTP/1.1\r\nHost: x\r\n\r\n"
        "GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    char one[4096], two[4096];
    const char *end1, *end2;
    int closed;

    (void)state;
    raw_exchange(h, head, sizeof(head) - 1, one, sizeof(one), 3000, &closed);
    raw_exchange(h, pipelined, sizeof(pipelined) - 1, two, sizeof(two), 3000,
                 &closed);
    ep_free(h);
    assert_int_equal(ep_raw_status(one), 200);
    end1 = strstr(one, "\r\n\r\n");
    assert_non_null(end1);
    assert_int_equal(ep_raw_status(two), 200);
    end2 = strstr(two, "\r\n\r\n");
    assert_non_null(end2);
    if (end1[4] != '\0')
        fail_msg("HEAD /livez answered with a body: \"%s\"", end1 + 4);
    /* Right after the HEAD answer's headers: the GET answer. */
    if (strncmp(end2 + 4, "HTTP/1.1 200", 12) != 0)
        fail_msg("after the HEAD answer came \"%.40s\", not the next "
                 "status line",
                 end2 + 4);
}

/*
 * evhttp 2.1 puts a Content-Length only on answers to HTTP/1.x, yet keeps
 * the connection open after an answer to "HTTP/0.9" with "Connection:
 * keep-alive", and to a major number its parser lets through and cuts to
 * a char ("HTTP/144444444444444444.1" is answered as "HTTP/28.1"). Such
 * an answer without a length has no end but the connection's, so the
 * next pipelined answer would read as more of its JSON body
 * (tests/fuzz/regress/status/overflowing-version-answer-runs-into-next).
 */
static void
t_regress_odd_version_answer_has_length(void **state)
{
    static const char *first[] = {
        "GET /livez HTTP/144444444444444444.1\r\n\r\n",
        "GET /livez HTTP/0.9\r\nConnection: keep-alive\r\n\r\n",
        "HEAD /livez HTTP/144444444444444444.1\r\n\r\n",
    };
    static const char next[] = "GET /readyz HTTP/1.1\r\nHost: x\r\n"
                               "Connection: close\r\n\r\n";
    struct ep *h = ep_new();
    char req[256], out[4096];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(first) / sizeof(first[0]); i++) {
        bool head = strncmp(first[i], "HEAD", 4) == 0;
        const char *end, *len, *body;
        int closed;

        snprintf(req, sizeof(req), "%s%s", first[i], next);
        raw_exchange(h, req, strlen(req), out, sizeof(out), 3000, &closed);
        assert_int_equal(ep_raw_status(out), 200);
        end = strstr(out, "\r\n\r\n");
        assert_non_null(end);
        len = strstr(out, "\r\nContent-Length: ");
        if (len == NULL || len > end)
            fail_msg("request %zu answered without a length: \"%.*s\"", i,
                     (int)(end - out), out);
        assert_int_equal(strtoul(len + 18, NULL, 10), 14);
        body = end + 4;
        if (!head) {
            assert_memory_equal(body, "{\"live\":true}\n", 14);
            body += 14;
        }
        /* Right after it: the answer to the next request. */
        if (strncmp(body, "HTTP/1.1 503", 12) != 0)
            fail_msg("after answer %zu came \"%.40s\", not the next status "
                     "line",
                     i, body);
    }
    ep_free(h);
}

static void
t_raw_garbage(void **state)
{
    static const char *garbage[] = {
        "GARBAGE\x01\x02 nonsense\r\n\r\n",
        "GET\r\n\r\n",
        "GET /livez HTTP/9.9\r\n\r\n",
        "GET /livez HTTP/1.1\r\nno colon here\r\n\r\n",
        "\r\n\r\n\r\n\r\n",
        "GET ht!tp://[::1 HTTP/1.1\r\n\r\n",
        "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", /* a TLS hello */
        "GET /livez HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
        "POST /livez HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        "zz\r\n\r\n",
    };
    struct ep *h = ep_new();
    char out[8192];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
        int closed = 0;
        size_t n = raw_exchange(h, garbage[i], strlen(garbage[i]), out,
                                sizeof(out), 1500, &closed);
        int code = ep_raw_status(out);

        /* Answered with a 4xx (or 5xx for an unknown version), or
         * just closed; never a 200 for garbage. */
        if (n > 0 && (code < 400 || code > 599))
            fail_msg("garbage %zu answered: %.80s", i, out);
        ep_expect_live(h);
    }
    ep_free(h);
}

/* A request line far over the header cap, and a flood of junk bytes. */
static void
t_raw_floods(void **state)
{
    struct ep *h = ep_new();
    size_t big = 256 * 1024;
    char *req = malloc(big + 64);
    char out[4096];
    int closed;
    size_t n;

    (void)state;
    memcpy(req, "GET /", 5);
    memset(req + 5, 'a', big);
    memcpy(req + 5 + big, " HTTP/1.1\r\n\r\n", 14);
    n = raw_exchange(h, req, big + 19, out, sizeof(out), 3000, &closed);
    if (n > 0)
        assert_true(ep_raw_status(out) >= 400);
    else
        assert_true(closed);
    ep_expect_live(h);
    memset(req, 0xff, big);
    n = raw_exchange(h, req, big, out, sizeof(out), 3000, &closed);
    if (n > 0)
        assert_true(ep_raw_status(out) >= 400);
    ep_expect_live(h);
    free(req);
    ep_free(h);
}

/* A client that sends half a request and waits does not hold up others
 * (the endpoint is on the daemon's only loop). */
static void
t_half_request_does_not_block(void **state)
{
    struct ep *h = ep_new();
    struct sockaddr_in sin;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    static const char half[] = "GET /livez HTTP/1.1\r\nHost: x\r\n";

    (void)state;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sin.sin_port = htons((uint16_t)h->port);
    assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(send(fd, half, sizeof(half) - 1, 0),
                     (ssize_t)(sizeof(half) - 1));
    tu_run_for(h->reapd.l, 50);
    ep_expect_live(h);
    ep_expect_live(h);
    close(fd);
    tu_run_for(h->reapd.l, 50);
    ep_expect_live(h);
    ep_free(h);
}

static void
t_concurrent_requests(void **state)
{
    struct ep *h = ep_plain(); /* /metrics needs no token without one */
    struct ep_resp r[20];
    char url[64];
    int i;

    (void)state;
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", h->port);
    for (i = 0; i < 20; i++) {
        struct loop_http_req req = {.url = url, .timeout_ms = 3000};

        memset(&r[i], 0, sizeof(r[i]));
        assert_non_null(
            loop_http(h->reapd.l, &req, NULL, NULL, ep_on_done, &r[i]));
    }
    for (i = 0; i < 20; i++) {
        TU_RUN_UNTIL(h->reapd.l, r[i].done, 4000);
        assert_int_equal(r[i].status, 200);
        assert_non_null(strstr(r[i].body, "reapd_events_received_total"));
        ep_resp_clear(&r[i]);
    }
    ep_free(h);
}

/* ---- listeners -------------------------------------------------------- */

static void
t_unix_listen(void **state)
{
    struct ep *h = ep_base();
    char listen[160];
    struct stat st;

    (void)state;
    snprintf(h->ssock, sizeof(h->ssock), "%s/status.sock", h->reapd.dir);
    snprintf(listen, sizeof(listen), "unix:%s", h->ssock);
    h->s = status_new(h->reapd.l, listen, h->reapd.r);
    assert_non_null(h->s);
    assert_int_equal(stat(h->ssock, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    ep_expect_live(h);
    {
        struct ep_resp r;

        ep_request(h, "GET", "/readyz", &r);
        assert_int_equal(r.status, 503);
        ep_resp_clear(&r);
    }
    /* The socket goes with the endpoint. */
    status_free(h->s);
    h->s = NULL;
    assert_int_equal(stat(h->ssock, &st), -1);
    assert_int_equal(errno, ENOENT);

    /* A stale socket left by an earlier run is replaced. */
    h->s = status_new(h->reapd.l, listen, h->reapd.r);
    assert_non_null(h->s);
    status_free(h->s);
    h->s = status_new(h->reapd.l, listen, h->reapd.r);
    assert_non_null(h->s);
    ep_expect_live(h);
    ep_free(h);
}

/*
 * The unlink before bind is there for "a stale socket from an earlier
 * run". A path that names anything else — a typo pointing status.listen
 * at reports.jsonl, say — must be refused and left alone, not deleted.
 */
static void
t_regress_unix_listen_keeps_regular_file(void **state)
{
    struct ep *h = ep_base();
    char path[128], listen[160];
    struct stat st;
    int fd;

    (void)state;
    snprintf(path, sizeof(path), "%s/precious.txt", h->reapd.dir);
    fd = open(path, O_CREAT | O_WRONLY, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "data\n", 5), 5);
    close(fd);
    snprintf(listen, sizeof(listen), "unix:%s", path);
    h->s = status_new(h->reapd.l, listen, h->reapd.r);
    if (h->s != NULL) {
        status_free(h->s);
        h->s = NULL;
    }
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != 5) {
        unlink(path);
        ep_free(h);
        fail_msg("status_new(\"unix:%s\") deleted the regular file there",
                 path);
    }
    unlink(path);
    ep_free(h);
}

static int
count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        n++;
    closedir(d);
    return n;
}

static void
t_off(void **state)
{
    struct ep *h = ep_base();
    int before, after;

    (void)state;
    before = count_fds();
    h->s = status_new(h->reapd.l, "off", h->reapd.r);
    after = count_fds();
    assert_non_null(h->s);
    /* Not a single socket opened. */
    assert_int_equal(after, before);
    status_free(h->s);
    h->s = NULL;
    status_free(NULL);
    ep_free(h);
}

static void
t_bad_listen(void **state)
{
    struct ep *h = ep_base();
    char buf[256], longpath[200];
    static const char *bad[] = {
        "",
        "127.0.0.1",
        "127.0.0.1:",
        "127.0.0.1:0",
        "127.0.0.1:65536",
        "127.0.0.1:-1",
        "127.0.0.1:80x",
        "127.0.0.1:99999999999999999999",
        "999.1.1.1:9323",
        "192.0.2.1:9323", /* not an address of this host */
        "ON",
        "unix:/nonexistent-dir-for-reapd/x.sock",
    };
    size_t i;
    int fd, port;
    struct sockaddr_in sin;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct status *s = status_new(h->reapd.l, bad[i], h->reapd.r);

        if (s != NULL) {
            status_free(s);
            fail_msg("status_new accepted \"%s\"", bad[i]);
        }
    }
    /* A unix path longer than sun_path. */
    memset(longpath, 'p', sizeof(longpath) - 1);
    longpath[sizeof(longpath) - 1] = '\0';
    snprintf(buf, sizeof(buf), "unix:/tmp/%s", longpath);
    assert_null(status_new(h->reapd.l, buf, h->reapd.r));
    /* A port in use. */
    port = tu_free_port();
    fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sin.sin_port = htons((uint16_t)port);
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(listen(fd, 4), 0);
    snprintf(buf, sizeof(buf), "127.0.0.1:%d", port);
    assert_null(status_new(h->reapd.l, buf, h->reapd.r));
    close(fd);
    ep_free(h);
}

/* An IPv6 literal in brackets, where the host has IPv6 loopback. */
static void
t_ipv6_listen(void **state)
{
    struct ep *h = ep_base();
    char listen[64], url[96];
    struct ep_resp r = {0};
    struct loop_http_req req = {0};
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 sin6;

    (void)state;
    memset(&sin6, 0, sizeof(sin6));
    sin6.sin6_family = AF_INET6;
    sin6.sin6_addr = in6addr_loopback;
    /* Not a skip: a pass that checked nothing would say IPv6 works. */
    if (fd < 0 || bind(fd, (struct sockaddr *)&sin6, sizeof(sin6)) != 0)
        fail_msg("this test needs the IPv6 loopback (::1): %s",
                 strerror(errno));
    close(fd);
    h->port = tu_free_port();
    snprintf(listen, sizeof(listen), "[::1]:%d", h->port);
    h->s = status_new(h->reapd.l, listen, h->reapd.r);
    assert_non_null(h->s);
    snprintf(url, sizeof(url), "http://[::1]:%d/livez", h->port);
    req.url = url;
    req.timeout_ms = 3000;
    assert_non_null(loop_http(h->reapd.l, &req, NULL, NULL, ep_on_done, &r));
    TU_RUN_UNTIL(h->reapd.l, r.done, 4000);
    assert_int_equal(r.status, 200);
    ep_resp_clear(&r);
    ep_free(h);
}

/* ---- connections: the cap, eviction, refusal, the deadline ----------- */

/* GET /livez on the keep-alive connection `fd`, and its whole answer. */
static void
ask(struct ep *h, int fd)
{
    static const char req[] = "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n";
    char buf[1024] = "";
    size_t got = 0;
    uint64_t deadline = loop_now_ms() + 3000;

    assert_int_equal(send(fd, req, sizeof(req) - 1, 0),
                     (ssize_t)(sizeof(req) - 1));
    while (strstr(buf, "{\"live\":true}\n") == NULL) {
        ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);

        if (n > 0)
            got += (size_t)n;
        buf[got] = '\0';
        if (n == 0)
            fail_msg("connection closed instead of answering: %s", buf);
        if (loop_now_ms() > deadline)
            fail_msg("no answer on a raw connection");
        event_base_loop(loop_base(h->reapd.l), EVLOOP_ONCE | EVLOOP_NONBLOCK);
        usleep(1000);
    }
    assert_int_equal(ep_raw_status(buf), 200);
}

/* A raw keep-alive connection that has made one request and stays
 * open, idle; returns its fd. */
static int
open_conn(struct ep *h)
{
    int fd = ep_raw_connect(h);

    ask(h, fd);
    return fd;
}

/* A raw connection that has sent half a request and waits. */
static int
half_request(struct ep *h)
{
    static const char half[] = "GET /livez HTTP/1.1\r\nHost: x\r\n";
    int fd = ep_raw_connect(h);

    assert_int_equal(send(fd, half, sizeof(half) - 1, 0),
                     (ssize_t)(sizeof(half) - 1));
    return fd;
}

/* What the endpoint sends on `fd` until it closes it, running the loop
 * for up to `ms`. */
static void
raw_collect(struct ep *h, int fd, char *buf, size_t cap, int ms)
{
    uint64_t deadline = loop_now_ms() + (uint64_t)ms;
    size_t got = 0;

    buf[0] = '\0';
    for (;;) {
        ssize_t n;

        event_base_loop(loop_base(h->reapd.l), EVLOOP_ONCE | EVLOOP_NONBLOCK);
        n = recv(fd, buf + got, cap - 1 - got, 0);
        if (n > 0) {
            got += (size_t)n;
            buf[got] = '\0';
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR))
            return;
        if (loop_now_ms() >= deadline)
            fail_msg("not closed within %d ms: \"%s\"", ms, buf);
        usleep(1000);
    }
}

/* Whether the endpoint has closed `fd`, running the loop for up to `ms`
 * (0: one look). Data that comes first is read and dropped. */
static int
server_closed(struct ep *h, int fd, int ms)
{
    uint64_t deadline = loop_now_ms() + (uint64_t)ms;
    char buf[1024];

    for (;;) {
        ssize_t n;

        event_base_loop(loop_base(h->reapd.l), EVLOOP_ONCE | EVLOOP_NONBLOCK);
        while ((n = recv(fd, buf, sizeof(buf), 0)) > 0)
            ;
        if (n == 0 || (errno != EAGAIN && errno != EINTR))
            return 1;
        if (loop_now_ms() >= deadline)
            return 0;
        usleep(1000);
    }
}

/* Idle keep-alive connections beyond the cap (70 against the default
 * 64) must not lock a probe out: a kubelet would restart reapd. Each
 * newcomer at the cap closes the connection idle longest: the first ones
 * opened. */
static void
t_regress_idle_connections_do_not_lock_out_probes(void **state)
{
    struct ep *h = ep_new();
    int fds[70], i;
    struct ep_resp r;

    (void)state;
    for (i = 0; i < 70; i++)
        fds[i] = open_conn(h);
    ep_expect_live(h);
    assert_int_equal(status_connections(h->s), 64);
    /* Connections 65..70 and the probe each closed one: the 7 oldest. */
    for (i = 0; i < 70; i++) {
        int closed = server_closed(h, fds[i], i < 7 ? 1000 : 0);

        if (closed != (i < 7))
            fail_msg("connection %d: %s", i, closed ? "closed" : "open");
    }
    for (i = 0; i < 70; i++)
        close(fds[i]);
    tu_run_for(h->reapd.l, 50);
    ep_request(h, "GET", "/metrics", &r);
    assert_int_equal(r.status, 200);
    assert_true(ep_sample(r.body, "reapd_status_connections_evicted_total{"
                                  "state=\"idle\"}") == 7);
    assert_true(ep_sample(r.body, "reapd_status_rejected_total{reason=\""
                                  "too_many_connections\"}") == 0);
    ep_resp_clear(&r);
    ep_free(h);
}

/* Oldest idle first: by when a connection last finished an answer, not
 * by when it opened. */
static void
t_evicts_longest_idle(void **state)
{
    struct ep *h = ep_new();
    struct config *cfg = ep_config(h, "\"status\":{\"max_connections\":2}");
    struct ep_resp r;
    int a, b, c;

    (void)state;
    status_set_config(h->s, cfg, NULL);
    a = open_conn(h);
    b = open_conn(h);
    ask(h, a); /* a is now the one idle for the shorter time */
    assert_int_equal(status_connections(h->s), 2);
    c = open_conn(h);
    assert_true(server_closed(h, b, 1000));
    assert_false(server_closed(h, a, 0));
    assert_false(server_closed(h, c, 0));
    /* A probe through libcurl: a is idle longest now. */
    ep_expect_live(h);
    assert_true(server_closed(h, a, 1000));
    assert_false(server_closed(h, c, 0));
    assert_int_equal(status_connections(h->s), 2);
    close(a);
    close(b);
    close(c);
    tu_run_for(h->reapd.l, 50);
    /* Room for libcurl's connection without closing anything. */
    ep_request(h, "GET", "/metrics", &r);
    assert_int_equal(r.status, 200);
    assert_true(ep_sample(r.body, "reapd_status_connections_evicted_total{"
                                  "state=\"idle\"}") == 2);
    assert_true(ep_sample(r.body, "reapd_status_connections") == 1);
    ep_resp_clear(&r);
    ep_free(h);
    config_free(cfg);
}

/* No connection idle: a newcomer is refused, 503 and closed, but a
 * probe on it is answered all the same. */
static void
t_refused_but_probes_answered(void **state)
{
    struct ep *h = ep_new();
    struct config *cfg = ep_config(h, "\"status\":{\"max_connections\":2}");
    struct ep_resp r;
    struct json_node *root;
    int a, b;

    (void)state;
    status_set_config(h->s, cfg, NULL);
    a = half_request(h);
    b = half_request(h);
    tu_run_for(h->reapd.l, 50);
    assert_int_equal(status_connections(h->s), 2);
    ep_request(h, "GET", "/metrics", &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(r.conn, "close");
    root = ep_json_body(&r);
    assert_string_equal(json_string(json_get(root, "error")),
                        "too many connections to the status endpoint");
    json_free(root);
    ep_resp_clear(&r);
    ep_expect_live(h);
    ep_request(h, "GET", "/livez", &r);
    assert_string_equal(r.conn, "close");
    ep_resp_clear(&r);
    /* /readyz too: its own answer (not ready: nothing started). */
    ep_request(h, "GET", "/readyz", &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(r.conn, "close");
    root = ep_json_body(&r);
    assert_non_null(json_get(root, "ready"));
    assert_false(json_get(root, "ready")->boolean);
    json_free(root);
    ep_resp_clear(&r);
    /* The half requests still wait: nobody closed them. */
    assert_false(server_closed(h, a, 0));
    assert_false(server_closed(h, b, 0));
    close(a);
    tu_run_for(h->reapd.l, 50);
    ep_request(h, "GET", "/metrics", &r);
    assert_int_equal(r.status, 200);
    assert_true(ep_sample(r.body, "reapd_status_rejected_total{reason=\""
                                  "too_many_connections\"}") == 1);
    assert_true(ep_sample(r.body, "reapd_status_connections") == 2);
    ep_resp_clear(&r);
    close(b);
    tu_run_for(h->reapd.l, 50);
    ep_free(h);
    config_free(cfg);
}

/* Connections refused and waiting for their request: as many as the cap,
 * and at least 256 (twice the listen backlog). */
#define WAITING 256

/* `n` connections that connect and send nothing, accepted a batch at a
 * time (each batch fits in the listen backlog). */
static void
silent_conns(struct ep *h, int *fds, int n)
{
    int i;

    for (i = 0; i < n; i++) {
        fds[i] = ep_raw_connect(h);
        if (i % 64 == 63)
            tu_run_for(h->reapd.l, 20);
    }
    tu_run_for(h->reapd.l, 50);
}

/* The refused connection waiting longest is closed for a newcomer when
 * WAITING wait. */
static void
t_refused_waiting_are_bounded(void **state)
{
    struct ep *h = ep_new();
    struct config *cfg = ep_config(h, "\"status\":{\"max_connections\":1}");
    struct ep_resp r;
    int busy, w[WAITING], extra, i;

    (void)state;
    status_set_config(h->s, cfg, NULL);
    busy = half_request(h);
    tu_run_for(h->reapd.l, 50);
    silent_conns(h, w, WAITING);
    assert_int_equal(status_connections(h->s), 1 + WAITING);
    extra = ep_raw_connect(h);
    assert_true(server_closed(h, w[0], 1000));
    assert_false(server_closed(h, w[1], 0));
    assert_false(server_closed(h, extra, 0));
    /* The probe's connection closes the next and is answered. */
    ep_expect_live(h);
    assert_true(server_closed(h, w[1], 1000));
    assert_false(server_closed(h, w[2], 0));
    close(busy);
    close(extra);
    for (i = 0; i < WAITING; i++)
        close(w[i]);
    tu_run_for(h->reapd.l, 100);
    ep_request(h, "GET", "/metrics", &r);
    assert_int_equal(r.status, 200);
    assert_true(ep_sample(r.body, "reapd_status_connections_evicted_total{"
                                  "state=\"refused\"}") == 2);
    assert_true(ep_sample(r.body, "reapd_status_connections_evicted_total{"
                                  "state=\"idle\"}") == 0);
    ep_resp_clear(&r);
    ep_free(h);
    config_free(cfg);
}

/*
 * A probe accepted in one pass with a burst of newcomers, the waiting
 * room full, its request not sent yet (it races the accept): the burst
 * must not push it out, or clients reconnecting together would close a
 * kubelet-like probe's connection before its request was read.
 */
static void
t_regress_probe_survives_a_burst(void **state)
{
    static const char probe[] = "GET /livez HTTP/1.1\r\nHost: x\r\n"
                                "Connection: close\r\n\r\n";
    struct ep *h = ep_new();
    struct config *cfg = ep_config(h, "\"status\":{\"max_connections\":1}");
    char buf[1024];
    int busy, w[WAITING], burst[100], p, i;

    (void)state;
    status_set_config(h->s, cfg, NULL);
    busy = half_request(h);
    tu_run_for(h->reapd.l, 50);
    silent_conns(h, w, WAITING);
    /* One accept pass: the probe, then 100 more (within the backlog). */
    p = ep_raw_connect(h);
    for (i = 0; i < 100; i++)
        burst[i] = ep_raw_connect(h);
    event_base_loop(loop_base(h->reapd.l), EVLOOP_ONCE | EVLOOP_NONBLOCK);
    assert_int_equal(send(p, probe, sizeof(probe) - 1, 0),
                     (ssize_t)(sizeof(probe) - 1));
    raw_collect(h, p, buf, sizeof(buf), 3000);
    assert_int_equal(ep_raw_status(buf), 200);
    assert_non_null(strstr(buf, "{\"live\":true}"));
    /* The oldest waiting ones made the room. */
    assert_true(server_closed(h, w[0], 0));
    assert_false(server_closed(h, w[WAITING - 1], 0));
    close(busy);
    close(p);
    for (i = 0; i < WAITING; i++)
        close(w[i]);
    for (i = 0; i < 100; i++)
        close(burst[i]);
    tu_run_for(h->reapd.l, 100);
    ep_free(h);
    config_free(cfg);
}

/*
 * A refused connection's request and a newcomer in the same loop pass,
 * with the waiting room full: making room for the newcomer must not
 * close the connection whose request evhttp is handing over (it would
 * be freed under evhttp: a use after free).
 */
static void
t_regress_request_and_newcomer_in_one_pass(void **state)
{
    static const char probe[] = "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n";
    struct ep *h = ep_new();
    struct config *cfg = ep_config(h, "\"status\":{\"max_connections\":1}");
    char buf[1024] = "";
    size_t got = 0;
    uint64_t deadline;
    int busy, w1, w[WAITING - 1], w2, i;

    (void)state;
    status_set_config(h->s, cfg, NULL);
    busy = half_request(h);
    tu_run_for(h->reapd.l, 50);
    w1 = ep_raw_connect(h);
    tu_run_for(h->reapd.l, 50); /* w1 waits, refused: the oldest of them */
    silent_conns(h, w, WAITING - 1); /* the waiting room is full */
    /* Ready in this order: the listener (w2), then w1's request. */
    w2 = ep_raw_connect(h);
    assert_int_equal(send(w1, probe, sizeof(probe) - 1, 0),
                     (ssize_t)(sizeof(probe) - 1));
    deadline = loop_now_ms() + 3000;
    while (strstr(buf, "{\"live\":true}") == NULL) {
        ssize_t n = recv(w1, buf + got, sizeof(buf) - 1 - got, 0);

        if (n > 0)
            got += (size_t)n;
        buf[got] = '\0';
        if (n == 0)
            fail_msg("w1 closed without its answer: \"%s\"", buf);
        if (loop_now_ms() > deadline)
            fail_msg("no answer for w1");
        event_base_loop(loop_base(h->reapd.l), EVLOOP_ONCE | EVLOOP_NONBLOCK);
        usleep(1000);
    }
    assert_int_equal(ep_raw_status(buf), 200);
    assert_true(server_closed(h, w1, 1000)); /* refused: one answer */
    assert_false(server_closed(h, w2, 0));
    close(busy);
    close(w1);
    close(w2);
    for (i = 0; i < WAITING - 1; i++)
        close(w[i]);
    tu_run_for(h->reapd.l, 100);
    ep_free(h);
    config_free(cfg);
}

/* A refused connection whose request comes once there is room again is
 * served like any other. */
static void
t_refused_served_when_room(void **state)
{
    struct ep *h = ep_new();
    struct config *cfg = ep_config(h, "\"status\":{\"max_connections\":1}");
    int busy, late;

    (void)state;
    status_set_config(h->s, cfg, NULL);
    busy = half_request(h);
    tu_run_for(h->reapd.l, 50);
    late = ep_raw_connect(h);
    tu_run_for(h->reapd.l, 50);
    close(busy);
    tu_run_for(h->reapd.l, 50);
    ask(h, late);
    /* Served, so kept alive: a second request on it. */
    ask(h, late);
    assert_false(server_closed(h, late, 0));
    close(late);
    tu_run_for(h->reapd.l, 50);
    ep_free(h);
    config_free(cfg);
}

/* A request dripped a byte at a time is never silent, so evhttp's
 * timeout, which counts only silence, never ends it: the deadline counts
 * the whole request (here shortened to 300 ms). */
static void
t_regress_dripping_request_closed_at_deadline(void **state)
{
    struct ep *h = ep_new();
    static const char parts[][24] = {"GET /livez HTTP/1.1\r\n", "Host: x\r\n",
                                     "\r\n"};
    char buf[1024] = "";
    struct ep_resp r;
    uint64_t start, took = 0;
    size_t i, got = 0;
    int fd, idle;

    (void)state;
    status_set_deadline_ms(h->s, 300);
    /* Slow but within the deadline: answered. */
    fd = ep_raw_connect(h);
    for (i = 0; i < 3; i++) {
        assert_int_equal(send(fd, parts[i], strlen(parts[i]), 0),
                         (ssize_t)strlen(parts[i]));
        tu_run_for(h->reapd.l, 60);
    }
    while (strstr(buf, "{\"live\":true}") == NULL && got < sizeof(buf) - 1) {
        ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);

        if (n <= 0)
            break;
        got += (size_t)n;
        buf[got] = '\0';
    }
    assert_int_equal(ep_raw_status(buf), 200);
    close(fd);
    /* A byte every 50 ms, never a whole request: closed at ~300 ms. */
    fd = half_request(h);
    start = loop_now_ms();
    while (loop_now_ms() - start < 3000) {
        if (server_closed(h, fd, 50)) {
            took = loop_now_ms() - start;
            break;
        }
        if (send(fd, "x", 1, MSG_NOSIGNAL) != 1) {
            took = loop_now_ms() - start;
            break;
        }
    }
    close(fd);
    if (took == 0)
        fail_msg("a dripping request was still open after 3 s");
    if (took < 250 || took > 1000)
        fail_msg("closed after %llu ms, deadline 300 ms",
                 (unsigned long long)took);
    /* An idle keep-alive connection ends at the deadline too, but that
     * is no timed-out request. */
    idle = open_conn(h);
    assert_true(server_closed(h, idle, 1000));
    close(idle);
    ep_request(h, "GET", "/metrics", &r);
    assert_int_equal(r.status, 200);
    assert_true(ep_sample(r.body, "reapd_status_requests_timed_out_total") ==
                1);
    ep_resp_clear(&r);
    ep_free(h);
}

static struct rlimit saved_nofile;

static int
save_nofile(void **state)
{
    (void)state;
    return getrlimit(RLIMIT_NOFILE, &saved_nofile);
}

static int
restore_nofile(void **state)
{
    (void)state;
    return setrlimit(RLIMIT_NOFILE, &saved_nofile);
}

/* Lines of `path` that contain `what`. */
static int
count_lines(const char *path, const char *what)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int n = 0;

    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL)
        if (strstr(line, what) != NULL)
            n++;
    fclose(f);
    return n;
}

/*
 * With the descriptor limit reached accept() fails and the listening
 * socket stays readable: without a pause the loop would spin, logging a
 * line each time. Each failure pauses accepting (100, 200, 400, 800
 * ms...) and one line is logged.
 */
static void
t_regress_accept_errors_pause(void **state)
{
    struct ep *h = ep_new();
    enum log_level level = log_get_level();
    struct rlimit low = saved_nofile;
    char logpath[128];
    struct ep_resp r;
    uint64_t end;
    int waiting[8], fresh, logfd, lowest, passes = 0, i;
    double errors;

    (void)state;
    ep_expect_live(h);
    /* Clients waiting in the backlog, so that every resume meets one
     * (valgrind, emulating the limit, closes what it cannot give). */
    for (i = 0; i < 8; i++)
        waiting[i] = ep_raw_connect(h);
    snprintf(logpath, sizeof(logpath), "%s/log", h->reapd.dir);
    logfd = open(logpath, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(logfd >= 0);
    log_setup(LOG_LEVEL_INFO, LOG_FORMAT_TEXT);
    log_set_fd(logfd);
    /* Every descriptor below the lowest free one is in use: a limit
     * there leaves accept() nothing. */
    lowest = open("/dev/null", O_RDONLY);
    assert_true(lowest >= 0);
    close(lowest);
    low.rlim_cur = (rlim_t)lowest;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    end = tu_deadline(1000);
    while (tu_turn(h->reapd.l, end))
        passes++;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved_nofile), 0);
    log_set_fd(-1);
    log_setup(level, LOG_FORMAT_TEXT);
    /* About 100 passes of tu_turn's 10 ms wait and 4 resumes; a spinning
     * loop makes tens of thousands. */
    if (passes > 400)
        fail_msg("%d loop passes in 1 s with accept() failing", passes);
    /* Accepting again after the next pause (800 ms at most). */
    fresh = open_conn(h);
    assert_int_equal(count_lines(logpath, "cannot accept a connection"), 1);
    ep_request(h, "GET", "/metrics", &r);
    assert_int_equal(r.status, 200);
    /* Failures at 0, 100, 300 and 700 ms into the window. */
    errors = ep_sample(r.body, "reapd_status_accept_errors_total");
    if (errors < 3 || errors > 5)
        fail_msg("%g accept errors counted, 4 expected", errors);
    ep_resp_clear(&r);
    close(fresh);
    for (i = 0; i < 8; i++)
        close(waiting[i]);
    close(logfd);
    unlink(logpath);
    ep_free(h);
}

/* ---- bounds at their edges, the token ---------------------------------- */

/* The status of a raw request on a fresh TCP connection, or -1 when
 * nothing came within `ms`; the whole answer in `out`. */
static int
raw_answer(struct ep *h, const char *req, size_t len, char *out, size_t cap,
           int ms)
{
    int closed;

    raw_exchange(h, req, len, out, cap, ms, &closed);
    return ep_raw_status(out);
}

/* A raw HTTP/1.0 request (answered, then closed): "POST /livez" with a
 * body of `body` bytes, or with `hdr_bytes` a GET of one header, "X-Pad: "
 * and that many bytes. */
static char *
sized_request(size_t body, size_t hdr_bytes, size_t *len)
{
    size_t cap = body + hdr_bytes + 256, off;
    char *s = malloc(cap);

    assert_non_null(s);
    if (hdr_bytes == 0) {
        off = (size_t)snprintf(s, cap,
                               "POST /livez HTTP/1.0\r\nHost: x\r\n"
                               "Content-Length: %zu\r\n\r\n",
                               body);
        memset(s + off, 'b', body);
        *len = off + body;
        return s;
    }
    off = (size_t)snprintf(s, cap, "GET /livez HTTP/1.0\r\nX-Pad: ");
    memset(s + off, 'p', hdr_bytes);
    off += hdr_bytes;
    off += (size_t)snprintf(s + off, cap - off, "\r\n\r\n");
    *len = off;
    return s;
}

/* A body of 1024 bytes reaches the handler (405 on a read-only route);
 * 1025 is refused before (413). */
static void
t_corner_body_limit(void **state)
{
    struct ep *h = ep_new();
    size_t len;
    char *req, out[4096];

    (void)state;
    req = sized_request(1023, 0, &len);
    assert_int_equal(raw_answer(h, req, len, out, sizeof(out), 2000), 405);
    free(req);
    req = sized_request(1024, 0, &len);
    assert_int_equal(raw_answer(h, req, len, out, sizeof(out), 2000), 405);
    free(req);
    req = sized_request(1025, 0, &len);
    assert_int_equal(raw_answer(h, req, len, out, sizeof(out), 2000), 413);
    free(req);
    ep_expect_live(h);
    ep_free(h);
}

/* The headers' bound, 8 KiB: evhttp counts the request line and each
 * header line without their CRLFs, so "GET /livez HTTP/1.0" (19) and
 * "X-Pad: " (7) with 8166 bytes make 8192 and pass; one more is
 * refused. */
static void
t_corner_header_limit(void **state)
{
    struct ep *h = ep_new();
    size_t len;
    char *req, out[4096];

    (void)state;
    req = sized_request(0, HDR_PAD_MAX - 1, &len);
    assert_int_equal(raw_answer(h, req, len, out, sizeof(out), 2000), 200);
    free(req);
    req = sized_request(0, HDR_PAD_MAX, &len);
    assert_int_equal(raw_answer(h, req, len, out, sizeof(out), 2000), 200);
    free(req);
    req = sized_request(0, HDR_PAD_MAX + 1, &len);
    assert_int_equal(raw_answer(h, req, len, out, sizeof(out), 2000), 400);
    free(req);
    ep_expect_live(h);
    ep_free(h);
}

/* The token's scheme is case-insensitive (RFC 9110 11.1). */
static void
t_corner_auth_scheme_any_case(void **state)
{
    struct ep *h = ep_new();
    struct ep_resp r;
    char tokpath[128];
    struct config *cfg = ep_secret_config(h, tokpath, sizeof(tokpath));

    (void)state;
    ep_request_auth(h, "/v1/containers", "Authorization: bearer " EP_TOKEN,
                    &r);
    assert_int_equal(r.status, 200);
    ep_resp_clear(&r);
    ep_request_auth(h, "/v1/containers", "Authorization: BEARER " EP_TOKEN,
                    &r);
    assert_int_equal(r.status, 200);
    ep_resp_clear(&r);
    ep_request_auth(h, "/v1/containers", "Authorization: Bearer  " EP_TOKEN,
                    &r);
    assert_int_equal(r.status, 401);
    ep_resp_clear(&r);
    unlink(tokpath);
    ep_free(h);
    config_free(cfg);
}

/* Nanoseconds of `n` comparisons of `guess` with `token`. */
static uint64_t
match_ns(const char *token, const char *guess, int n)
{
    struct timespec t0, t1;
    int hits = 0, i;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (i = 0; i < n; i++)
        hits += httpd_token_matches(token, guess);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_int_equal(hits, 0);
    return (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u +
           (uint64_t)t1.tv_nsec - (uint64_t)t0.tv_nsec;
}

/*
 * The comparison takes as long for a guess wrong at its first byte as for
 * one wrong at its last (both as long as the token): an early exit would
 * make the first ~4000 times faster, so a factor of 4 is far from noise.
 * The two are measured in turns, the fastest of 9 rounds each, so that a
 * busy machine slows both alike (the load of a moment would slow one pass
 * after the other unevenly). The guess's own
 * length is not the secret: only where it differs is compared.
 */
static void
t_token_compare_constant_time(void **state)
{
    size_t n = 4096;
    char *token = malloc(n + 1), *first = malloc(n + 1), *last = malloc(n + 1);
    uint64_t t_first = UINT64_MAX, t_last = UINT64_MAX, t;
    int round;
    bool slow;

    (void)state;
    assert_non_null(token);
    assert_non_null(first);
    assert_non_null(last);
    memset(token, 'a', n);
    token[n] = '\0';
    memcpy(first, token, n + 1);
    memcpy(last, token, n + 1);
    first[0] = 'b';
    last[n - 1] = 'b';
    assert_true(httpd_token_matches(token, token));
    assert_false(httpd_token_matches(token, first));
    assert_false(httpd_token_matches(token, last));
    assert_false(httpd_token_matches(token, "a"));
    assert_false(httpd_token_matches(token, ""));
    for (round = 0; round < 9; round++) {
        if ((t = match_ns(token, first, 500)) < t_first)
            t_first = t;
        if ((t = match_ns(token, last, 500)) < t_last)
            t_last = t;
    }
    slow = t_last > 4 * t_first;
    free(token);
    free(first);
    free(last);
    if (slow)
        fail_msg("wrong at the end: %llu ns; at the start: %llu ns",
                 (unsigned long long)t_last, (unsigned long long)t_first);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_oversized_body),
        cmocka_unit_test(t_oversized_header),
        cmocka_unit_test(t_raw_good_request),
        cmocka_unit_test(t_regress_head_has_no_body),
        cmocka_unit_test(t_regress_odd_version_answer_has_length),
        cmocka_unit_test(t_raw_garbage),
        cmocka_unit_test(t_raw_floods),
        cmocka_unit_test(t_half_request_does_not_block),
        cmocka_unit_test(t_concurrent_requests),
        cmocka_unit_test(t_unix_listen),
        cmocka_unit_test(t_regress_unix_listen_keeps_regular_file),
        cmocka_unit_test(t_off),
        cmocka_unit_test(t_bad_listen),
        cmocka_unit_test(t_ipv6_listen),
        cmocka_unit_test(t_regress_idle_connections_do_not_lock_out_probes),
        cmocka_unit_test(t_evicts_longest_idle),
        cmocka_unit_test(t_refused_but_probes_answered),
        cmocka_unit_test(t_refused_waiting_are_bounded),
        cmocka_unit_test(t_regress_request_and_newcomer_in_one_pass),
        cmocka_unit_test(t_regress_probe_survives_a_burst),
        cmocka_unit_test(t_refused_served_when_room),
        cmocka_unit_test(t_regress_dripping_request_closed_at_deadline),
        cmocka_unit_test_setup_teardown(t_regress_accept_errors_pause,
                                        save_nofile, restore_nofile),
        cmocka_unit_test(t_corner_body_limit),
        cmocka_unit_test(t_corner_header_limit),
        cmocka_unit_test(t_corner_auth_scheme_any_case),
        cmocka_unit_test(t_token_compare_constant_time),
    };

    signal(SIGPIPE, SIG_IGN); /* raw clients and the fake engine */
    tu_test_filters();
    log_setup(getenv("TEST_DEBUG") ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR,
              LOG_FORMAT_TEXT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
