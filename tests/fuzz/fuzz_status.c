/*
 * fuzz_status — the status endpoint (agent/status.h) as a client meets
 * it: the input is written as raw bytes (request line, path, query,
 * headers, body, pipelined requests...) to a connection on the endpoint's
 * unix socket, and the loop runs until the endpoint has answered all it
 * will and closed, or has gone quiet.
 *
 * Behind the endpoint: a reaper that was never started (its engine
 * socket does not exist), a state database holding two reports, the
 * config, and a bearer token, so every route and the token check are
 * reachable (the token is in the dictionary and the seeds).
 *
 * Checked: every answer has a status line with a code the endpoint can
 * give; an answer that says it is JSON is valid JSON; no answer holds
 * the token or a secret of the config (/v1/config is redacted); once the
 * client closes its side the endpoint closes the connection too;
 * afterwards the endpoint still answers /livez on a new connection and
 * counts no connection as open. Waiting is by loop passes, not sleeps:
 * the socket pair is in this process, so a pass either makes progress or
 * nothing is left to do.
 */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "config.h"
#include "docker.h"
#include "fuzz.h"
#include "json.h"
#include "loop.h"
#include "reaper.h"
#include "report.h"
#include "status.h"
#include "store.h"

#define TOKEN "s3cret-t0ken"
/* Secrets /v1/config must never show (config.h: redacted). */
#define URL_PW        "pw-Zq9x"
#define HEADER_SECRET "hdr-s3cr3t-Zq9"
/* Loop passes without progress after which the exchange is over. */
#define QUIET_PASSES 4
/* Passes at most, for one exchange: far more than any answer takes. */
#define MAX_PASSES 20000
#define MAX_ANSWER ((size_t)8 << 20)

struct env {
    struct loop *l;
    struct docker *d;
    struct config *cfg;
    struct report_log *rl;
    struct reaper *r;
    struct store *st;
    struct status *s;
    char sock[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

static struct env *env;

static void
env_free(void)
{
    if (env == NULL)
        return;
    status_free(env->s);
    reaper_free(env->r);
    store_close(env->st);
    docker_free(env->d);
    loop_free(env->l);
    report_log_close(env->rl);
    config_free(env->cfg);
    free(env);
    env = NULL;
}

static void
write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

    FUZZ_CHECK(fd >= 0);
    FUZZ_CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
}

static void
add_report(const char *id, const char *cid, int code)
{
    char body[512];
    int n;

    n = snprintf(body, sizeof(body),
                 "{\"report_id\":\"%s\",\"container_id\":\"%s\","
                 "\"exit_code\":%d,\"labels\":{\"reapd.managed\":\"true\"},"
                 "\"anomalies\":[\"engine_exit_code_mismatch\"]}",
                 id, cid, code);
    FUZZ_CHECK(store_add_delivered(env->st, id, cid, body, (size_t)n,
                                   report_now_ms()) == STORE_OK);
}

static void
env_new(void)
{
    const char *dir = fuzz_tmpdir();
    struct config_errors errs = {0};
    char text[2048], path[300], err[256], listen[310];
    char *token = NULL;

    env = calloc(1, sizeof(*env));
    FUZZ_CHECK(env != NULL);
    snprintf(path, sizeof(path), "%s/token", dir);
    write_text(path, TOKEN "\n");
    snprintf(text, sizeof(text),
             "{\"node\":\"fuzz\",\"state_dir\":\"%s\","
             "\"docker\":{\"socket\":\"%s/docker.sock\"},"
             "\"containerd\":{\"socket\":\"off\"},"
             "\"status\":{\"listen\":\"unix:%s/status.sock\","
             "\"token_file\":\"%s\"},"
             "\"upstream\":{\"url\":\"http://user:" URL_PW
             "@127.0.0.1:1/in?k=v\","
             "\"headers\":{\"X-Key\":\"" HEADER_SECRET "\"}}}",
             dir, dir, dir, path);
    if (config_parse("fuzz", text, strlen(text), &env->cfg, &errs) != 0) {
        if (errs.count > 0)
            fprintf(stderr, "%s\n", errs.lines[0]);
        FUZZ_CHECK(!"config refused");
    }
    env->l = loop_new();
    FUZZ_CHECK(env->l != NULL);
    env->d = docker_new(env->l, env->cfg->docker_socket, 2000, 200);
    FUZZ_CHECK(env->d != NULL);
    env->rl = report_log_open(dir);
    FUZZ_CHECK(env->rl != NULL);
    env->r = reaper_new(env->l, env->d, env->cfg, env->rl);
    FUZZ_CHECK(env->r != NULL);
    FUZZ_CHECK(store_open(dir, &env->st, err, sizeof(err)) == STORE_OK);
    add_report("0123456789abcdef0123456789abcdef",
               "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
               "a1",
               7);
    add_report("fedcba9876543210fedcba9876543210",
               "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
               "b2",
               255);
    FUZZ_CHECK(snprintf(env->sock, sizeof(env->sock), "%s/status.sock", dir) <
               (int)sizeof(env->sock));
    snprintf(listen, sizeof(listen), "unix:%s", env->sock);
    env->s = status_new(env->l, listen, env->r);
    FUZZ_CHECK(env->s != NULL);
    FUZZ_CHECK(status_read_token(env->cfg, &token, err, sizeof(err)) == 0);
    FUZZ_CHECK(token != NULL);
    status_set_config(env->s, env->cfg, token);
    status_set_store(env->s, env->st);
    atexit(env_free);
}

/* One client connection: what was sent, what came back. */
struct client {
    int fd;
    const uint8_t *out;
    size_t out_len, sent;
    char *in;
    size_t in_len, in_cap;
    bool eof;
};

static void
client_open(struct client *c, const uint8_t *out, size_t len)
{
    struct sockaddr_un sa;

    memset(c, 0, sizeof(*c));
    c->out = out;
    c->out_len = len;
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    FUZZ_CHECK(c->fd >= 0);
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, env->sock, sizeof(sa.sun_path));
    FUZZ_CHECK(connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
}

/* Sends what the socket takes and reads what there is; true if either
 * moved a byte or the answer ended. */
static bool
client_io(struct client *c)
{
    bool moved = false;
    char buf[65536];
    ssize_t n;

    if (c->sent < c->out_len) {
        n = send(c->fd, c->out + c->sent, c->out_len - c->sent, MSG_NOSIGNAL);
        if (n > 0) {
            c->sent += (size_t)n;
            moved = true;
        } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            /* The endpoint closed before reading everything. */
            c->sent = c->out_len;
        }
    }
    while (!c->eof) {
        n = recv(c->fd, buf, sizeof(buf), 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
            c->eof = true;
            moved = true;
            break;
        }
        if (n < 0)
            break;
        moved = true;
        if (c->in_len + (size_t)n > MAX_ANSWER)
            continue; /* enough to check; the rest is drained */
        if (c->in_len + (size_t)n > c->in_cap) {
            size_t cap = c->in_cap ? c->in_cap : 65536;
            char *p;

            while (cap < c->in_len + (size_t)n)
                cap *= 2;
            p = realloc(c->in, cap);
            FUZZ_CHECK(p != NULL);
            c->in = p;
            c->in_cap = cap;
        }
        memcpy(c->in + c->in_len, buf, (size_t)n);
        c->in_len += (size_t)n;
    }
    return moved;
}

/* Bytes sent but not yet read by the endpoint. */
static int
unread(const struct client *c)
{
    int q = 0;

    if (ioctl(c->fd, SIOCOUTQ, &q) != 0)
        return -1;
    return q;
}

/* Runs the loop until the connection ended or, unless `until_eof`,
 * QUIET_PASSES passes in a row moved nothing. False if MAX_PASSES were
 * not enough. */
static bool
run(struct client *c, bool until_eof)
{
    int quiet = 0, passes, q, last_q = -2;

    for (passes = 0; passes < MAX_PASSES; passes++) {
        event_base_loop(loop_base(env->l), EVLOOP_NONBLOCK);
        q = unread(c);
        if (client_io(c) || q != last_q)
            quiet = 0;
        else
            quiet++;
        last_q = q;
        if (c->eof || (!until_eof && quiet >= QUIET_PASSES))
            return true;
    }
    return false;
}

static void
client_close(struct client *c)
{
    close(c->fd);
    free(c->in);
}

/* The first `needle` in [p, p + n), or NULL (memmem is a GNU
 * extension). */
static const char *
find(const char *p, size_t n, const char *needle, size_t k)
{
    const char *end = p + n;

    for (; k <= (size_t)(end - p); p++) {
        p = memchr(p, needle[0], (size_t)(end - p) - k + 1);
        if (p == NULL)
            return NULL;
        if (memcmp(p, needle, k) == 0)
            return p;
    }
    return NULL;
}

static bool
allowed_code(int code)
{
    /* 417: evhttp's answer to an Expect other than 100-continue
     * (RFC 9110 10.1.1), which the endpoint has no use for. */
    static const int codes[] = {200, 400, 401, 404, 405, 413,
                                414, 417, 431, 501, 503};
    size_t i;

    for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        if (codes[i] == code)
            return true;
    return false;
}

/* The value of header `name` within the header block [h, end), or NULL;
 * its length in *len. */
static const char *
header(const char *h, const char *end, const char *name, size_t *len)
{
    size_t n = strlen(name);
    const char *eol;

    while (h < end) {
        eol = find(h, (size_t)(end - h), "\r\n", 2);
        if (eol == NULL)
            eol = end;
        if ((size_t)(eol - h) > n + 1 && strncasecmp(h, name, n) == 0 &&
            h[n] == ':') {
            h += n + 1;
            while (h < eol && *h == ' ')
                h++;
            *len = (size_t)(eol - h);
            return h;
        }
        h = eol + 2;
    }
    return NULL;
}

/*
 * Walks the answers in `in`: each must start with a status line whose
 * code is one the endpoint gives; a JSON body must parse. An answer to
 * HEAD has a Content-Length and no body; it is told by what follows.
 */
static void
check_answers(const char *in, size_t len, bool complete)
{
    struct json_limits lim = {.max_bytes = SIZE_MAX, .max_depth = 64};
    const char *p = in, *end, *hend, *v;
    size_t vlen, body;
    int code;

    if (len == 0)
        return; /* closed without a word: allowed for garbage */
    end = in + len;
    while (p < end) {
        struct json_node *root;
        bool json;

        if ((size_t)(end - p) < 13) {
            FUZZ_CHECK(!complete);
            return;
        }
        /* evhttp answers in the version asked in, whatever it was
         * ("HTTP/0.0"; "HTTP/1.11001" comes back as "HTTP/1.-7"). */
        FUZZ_CHECK(memcmp(p, "HTTP/", 5) == 0);
        p += 5;
        while (p < end && *p != ' ' && *p != '\r')
            p++;
        if ((size_t)(end - p) < 5) {
            FUZZ_CHECK(!complete);
            return;
        }
        FUZZ_CHECK(p[0] == ' ' && p[1] >= '1' && p[1] <= '5' && p[2] >= '0' &&
                   p[2] <= '9' && p[3] >= '0' && p[3] <= '9' && p[4] == ' ');
        code = (p[1] - '0') * 100 + (p[2] - '0') * 10 + (p[3] - '0');
        FUZZ_CHECK(allowed_code(code));
        hend = find(p, (size_t)(end - p), "\r\n\r\n", 4);
        if (hend == NULL) {
            FUZZ_CHECK(!complete);
            return;
        }
        v = header(p, hend, "Content-Type", &vlen);
        json = v != NULL && vlen >= 16 &&
               strncasecmp(v, "application/json", 16) == 0;
        v = header(p, hend, "Content-Length", &vlen);
        p = hend + 4;
        if (p == end || ((size_t)(end - p) >= 5 && memcmp(p, "HTTP/", 5) == 0))
            continue; /* no body: an answer to HEAD */
        body = v != NULL ? (size_t)strtoul(v, NULL, 10) : (size_t)(end - p);
        if (body > (size_t)(end - p)) {
            FUZZ_CHECK(!complete);
            return;
        }
        if (json) {
            root = json_parse(p, body, &lim, 0, NULL, 0, NULL);
            FUZZ_CHECK(root != NULL);
            json_free(root);
        }
        p += body;
    }
}

/* The endpoint still serves: /livez on a new connection. */
static void
check_alive(void)
{
    static const char req[] = "GET /livez HTTP/1.0\r\n\r\n";
    struct client c;

    client_open(&c, (const uint8_t *)req, sizeof(req) - 1);
    FUZZ_CHECK(run(&c, true));
    FUZZ_CHECK(c.in_len > 12 && memcmp(c.in + 8, " 200 ", 5) == 0);
    FUZZ_CHECK(find(c.in, c.in_len, "{\"live\":true}", 13) != NULL);
    client_close(&c);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct client c;

    fuzz_quiet_logs();
    if (env == NULL)
        env_new();
    client_open(&c, data, size);
    FUZZ_CHECK(run(&c, false));
    /* The client is done: the endpoint must close its side too. */
    c.sent = c.out_len;
    shutdown(c.fd, SHUT_WR);
    FUZZ_CHECK(run(&c, true));
    check_answers(c.in, c.in_len > MAX_ANSWER ? MAX_ANSWER : c.in_len,
                  c.in_len < MAX_ANSWER);
    /* Nothing secret is ever sent back, whatever was asked. */
    if (c.in_len > 0) {
        FUZZ_CHECK(find(c.in, c.in_len, TOKEN, strlen(TOKEN)) == NULL);
        FUZZ_CHECK(find(c.in, c.in_len, URL_PW, strlen(URL_PW)) == NULL);
        FUZZ_CHECK(find(c.in, c.in_len, HEADER_SECRET,
                        strlen(HEADER_SECRET)) == NULL);
    }
    client_close(&c);
    check_alive();
    FUZZ_CHECK(status_connections(env->s) == 0);
    return 0;
}
