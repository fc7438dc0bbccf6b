/*
 * testutil — the helpers every test shares; what each does and who owns
 * what it returns: testutil.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bounds.h"
#include "config.h"
#include "docker.h"
#include "fake_engine.h"
#include "json.h"
#include "loop.h"
#include "policy.h"
#include "reaper.h"
#include "report.h"
#include "store.h"
#include "testutil.h"

/* REAPD_TEST_ONLY=GLOB runs only the test functions it matches, in every
 * unit test linked with this file: tests/mutate/run gives a mutant the
 * one function that must catch it (its "only:"). */
__attribute__((constructor)) static void
tu_only_from_env(void)
{
    const char *only = getenv("REAPD_TEST_ONLY");

    if (only != NULL && *only != '\0')
        cmocka_set_test_filter(only);
}

void
tu_test_filters(void)
{
    if (getenv("TEST_FILTER") != NULL)
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    if (getenv("TEST_SKIP") != NULL)
        cmocka_set_skip_filter(getenv("TEST_SKIP"));
}

/* ---- running the loop --------------------------------------------------- */

/* The longest a turn waits for something to happen. */
#define TU_TICK_MS 10

static void
on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

/* One EVLOOP_ONCE turn that waits at most `ms`: a timer of the turn's own
 * (on the stack, gone when it returns) ends the wait when nothing else
 * does. */
static void
turn(struct loop *l, uint64_t ms)
{
    struct event wake;
    struct timeval tv;

    if (ms > TU_TICK_MS)
        ms = TU_TICK_MS;
    tv.tv_sec = 0;
    tv.tv_usec = (suseconds_t)(ms * 1000);
    event_assign(&wake, loop_base(l), -1, 0, on_wake, NULL);
    event_add(&wake, &tv);
    event_base_loop(loop_base(l), EVLOOP_ONCE);
    event_del(&wake);
}

uint64_t
tu_deadline(int ms)
{
    return loop_now_ms() + (uint64_t)ms;
}

uint64_t
tu_wait_deadline(int ms)
{
    static long scale;

    if (scale == 0) {
        const char *v = getenv("TU_TIME_SCALE");
        char *end = NULL;

        scale = v != NULL ? strtol(v, &end, 10) : 1;
        if (v != NULL &&
            (end == v || *end != '\0' || scale < 1 || scale > 100))
            scale = 1;
    }
    return loop_now_ms() + (uint64_t)ms * (uint64_t)scale;
}

bool
tu_turn(struct loop *l, uint64_t deadline)
{
    uint64_t now = loop_now_ms();

    if (now > deadline)
        return false;
    /* Wakes just past the deadline at the latest. */
    turn(l, deadline - now + 1);
    return true;
}

void
tu_fail_timeout(const char *what, int ms, const char *file, int line)
{
    print_error("ERROR: %s not reached within %d ms\n", what, ms);
    _fail(file, line);
}

void
tu_run_for(struct loop *l, int ms)
{
    uint64_t end = tu_deadline(ms), now;

    while ((now = loop_now_ms()) < end)
        turn(l, end - now);
}

/* ---- reapd against the fake engine -------------------------------------- */

struct config *
tu_config(const char *text)
{
    struct config_errors errs = {0};
    struct config *cfg = NULL;

    if (config_parse("test", text, strlen(text), &cfg, &errs) != 0) {
        size_t i;

        for (i = 0; i < errs.count; i++)
            fprintf(stderr, "%s\n", errs.lines[i]);
        fail_msg("config rejected");
    }
    return cfg;
}

static void
on_report(const char *json, size_t len, void *arg)
{
    struct tu_reapd *h = arg;

    assert_true(h->nreports < TU_MAX_REPORTS);
    h->reports[h->nreports] = json_parse(json, len, NULL, 0, NULL, 0, NULL);
    assert_non_null(h->reports[h->nreports]);
    h->nreports++;
}

void
tu_reapd_open(struct tu_reapd *h, const char *name, const char *delete_extra,
              const char *top)
{
    char text[4096];
    int n;

    snprintf(h->dir, sizeof(h->dir), "/tmp/reapd-%s-XXXXXX", name);
    assert_non_null(mkdtemp(h->dir));
    snprintf(h->sock, sizeof(h->sock), "%s/docker.sock", h->dir);
    n = snprintf(text, sizeof(text),
                 "{\"node\":\"t\",\"state_dir\":\"%s\","
                 "\"docker\":{\"socket\":\"%s\",\"request_timeout_ms\":2000,"
                 "\"reconnect_max_ms\":200},"
                 "\"delete\":{\"poll_interval_ms\":20,\"retry_base_ms\":20,"
                 "\"retry_max_ms\":100%s}%s}",
                 h->dir, h->sock, delete_extra, top);
    assert_true(n > 0 && (size_t)n < sizeof(text));
    h->cfg = tu_config(text);
    h->l = loop_new();
    assert_non_null(h->l);
    h->fe = fake_engine_new(loop_base(h->l), h->sock);
    assert_non_null(h->fe);
    h->rl = report_log_open(h->dir);
    assert_non_null(h->rl);
    tu_reapd_new_reaper(h);
}

void
tu_reapd_new_reaper(struct tu_reapd *h)
{
    h->d = docker_new(h->l, h->sock, 2000, 200);
    assert_non_null(h->d);
    h->r = reaper_new(h->l, h->d, h->cfg, h->rl);
    assert_non_null(h->r);
    reaper_on_report(h->r, on_report, h);
}

void
tu_reapd_close(struct tu_reapd *h)
{
    char path[128];
    int i;

    reaper_free(h->r);
    docker_free(h->d);
    fake_engine_free(h->fe);
    loop_free(h->l);
    report_log_close(h->rl);
    config_free(h->cfg);
    for (i = 0; i < h->nreports; i++)
        json_free(h->reports[i]);
    snprintf(path, sizeof(path), "%s/reports.jsonl", h->dir);
    unlink(path);
    rmdir(h->dir);
}

/* ---- files -------------------------------------------------------------- */

/* dir/name with `extra` bytes more allocated than the file holds; an
 * empty file only if `empty_ok`. */
static char *
read_padded(const char *dir, const char *name, size_t extra, bool empty_ok,
            size_t *len)
{
    char path[512];
    FILE *f;
    long n;
    char *buf;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot open %s", path);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    assert_true(n > 0 || (n == 0 && empty_ok));
    rewind(f);
    buf = malloc((size_t)n + extra);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

void *
tu_read_file(const char *dir, const char *name, size_t *len)
{
    return read_padded(dir, name, 0, false, len);
}

char *
tu_read_text(const char *dir, const char *name, size_t *len)
{
    size_t n;
    char *buf = read_padded(dir, name, 1, true, &n);

    buf[n] = '\0';
    if (len != NULL)
        *len = n;
    return buf;
}

void
tu_write_file(const char *path, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

    if (fd < 0)
        fail_msg("cannot create %s", path);
    assert_int_equal(write(fd, buf, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
}

bool
tu_open_cloexec(const char *path, bool *found)
{
    char link[64], target[256];
    bool all = true;
    int fd;

    *found = false;
    for (fd = 0; fd < 1024; fd++) {
        ssize_t n;

        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        n = readlink(link, target, sizeof(target) - 1);
        if (n < 0)
            continue;
        target[n] = '\0';
        if (strcmp(target, path) != 0)
            continue;
        *found = true;
        all = all && (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
    }
    return all;
}

void
tu_rm_store(const char *dir)
{
    static const char *const names[] = {"reapd.db", "reapd.db-wal",
                                        "reapd.db-shm"};
    char path[128];
    size_t i;

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        unlink(path);
    }
}

/* ---- processes ---------------------------------------------------------- */

int
tu_fork_status(int (*child)(void *arg), void *arg)
{
    pid_t pid;
    int st = 0;

    fflush(NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        signal(SIGABRT, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        signal(SIGILL, SIG_DFL);
        signal(SIGFPE, SIG_DFL);
        _exit(child(arg));
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return st;
}

int
tu_fork(int (*child)(void *arg), void *arg)
{
    int st = tu_fork_status(child, arg);

    if (WIFSIGNALED(st))
        fail_msg("the child died of signal %d (%s)", WTERMSIG(st),
                 strsignal(WTERMSIG(st)));
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

int
tu_disk_full(struct rlimit *saved)
{
    struct rlimit full;

    signal(SIGXFSZ, SIG_IGN);
    if (getrlimit(RLIMIT_FSIZE, saved) != 0)
        return -1;
    full = *saved;
    full.rlim_cur = 0;
    return setrlimit(RLIMIT_FSIZE, &full);
}

/* ---- network ------------------------------------------------------------ */

/* A port below the kernel's ephemeral range: one in it (what binding port
 * 0 gives) can be taken by any outgoing connection, the tests' own to
 * their fake engines, before the code under test binds it. */
int
tu_free_port(void)
{
    static unsigned seed;
    struct sockaddr_in sin;
    unsigned lo = 20000, hi = 32767, eph;
    FILE *f;
    int i;

    f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f != NULL) {
        if (fscanf(f, "%u", &eph) == 1 && eph > lo + 1000 && eph <= 65535)
            hi = eph - 1;
        fclose(f);
    }
    if (seed == 0)
        seed = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
    for (i = 0; i < 200; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0), ok;
        unsigned port;

        assert_true(fd >= 0);
        seed = seed * 1103515245u + 12345u;
        port = lo + (seed >> 8) % (hi - lo + 1);
        memset(&sin, 0, sizeof(sin));
        sin.sin_family = AF_INET;
        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sin.sin_port = htons((uint16_t)port);
        ok = bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0;
        close(fd);
        if (ok)
            return (int)port;
    }
    fail_msg("no free port in %u-%u", lo, hi);
    return -1;
}

int
tu_http_bind(struct evhttp *http)
{
    struct evhttp_bound_socket *bs;
    struct sockaddr_in sin;
    socklen_t slen = sizeof(sin);
    int port;

    bs = evhttp_bind_socket_with_handle(http, "127.0.0.1", 0);
    assert_non_null(bs);
    assert_int_equal(getsockname(evconnlistener_get_fd(
                                     evhttp_bound_socket_get_listener(bs)),
                                 (struct sockaddr *)&sin, &slen),
                     0);
    port = ntohs(sin.sin_port);
    assert_true(port > 0);
    return port;
}

void
tu_http_header(struct evhttp_request *req, const char *name, char *out,
               size_t len)
{
    const char *v =
        evhttp_find_header(evhttp_request_get_input_headers(req), name);

    snprintf(out, len, "%s", v != NULL ? v : "(none)");
}

/* ---- test data ---------------------------------------------------------- */

void
tu_report_id(char *buf, unsigned n)
{
    snprintf(buf, STORE_REPORT_ID_MAX + 1, "%032x", n);
}

void
tu_container_id(char *buf, unsigned n)
{
    snprintf(buf, STORE_ID_MAX + 1, "%064x", n);
}

char *
tu_labset_text(struct tu_labset *ls, size_t len, unsigned char fill)
{
    char *t = malloc(len + 1);

    assert_non_null(t);
    memset(t, fill, len);
    t[len] = '\0';
    ls->mem = realloc(ls->mem, (ls->nmem + 1) * sizeof(*ls->mem));
    assert_non_null(ls->mem);
    ls->mem[ls->nmem++] = t;
    return t;
}

void
tu_labset_max(struct tu_labset *ls)
{
    size_t i, total = 0;

    /* The arithmetic below, written out. */
    assert_int_equal(LIMIT_LABELS_STORED, 320);
    assert_int_equal(LIMIT_LABELS_STORED_BYTES, 393216);
    ls->n = 320;
    ls->v = calloc(ls->n, sizeof(*ls->v));
    assert_non_null(ls->v);
    for (i = 0; i < ls->n; i++) {
        bool big = i < 64;
        char *k = tu_labset_text(ls, big ? 1024 : 16, big ? 0x01 : 0x02);

        k[0] = (char)(0x10 + (i >> 4 & 0xf));
        k[1] = (char)(0x10 + (i & 0xf));
        ls->v[i].key = k;
        ls->v[i].value = tu_labset_text(ls, big ? 4096 : 240, 0x1f);
        total += strlen(ls->v[i].key) + strlen(ls->v[i].value);
    }
    assert_int_equal(total, LIMIT_LABELS_STORED_BYTES);
}

char *
tu_labset_over(struct tu_labset *ls)
{
    char *euro;
    size_t i;

    /* The arithmetic of the callers, written out. */
    assert_int_equal(LIMIT_LABEL_KEY, 1024);
    assert_int_equal(LIMIT_LABEL_VALUE, 4096);
    assert_int_equal(LIMIT_NAME_BYTES, 4096);
    assert_int_equal(LIMIT_IMAGE_BYTES, 4096);
    assert_int_equal(REPORT_TEXT_MAX, 512);
    ls->n = 5000;
    ls->v = calloc(ls->n, sizeof(*ls->v));
    assert_non_null(ls->v);
    euro = tu_labset_text(ls, 5100, 'x');
    for (i = 0; i < 5100; i += 3)
        memcpy(euro + i, "\xe2\x82\xac", 3);
    ls->v[0].key = tu_labset_text(ls, 1025, 'k');
    ls->v[0].value = "dropped";
    ls->v[1].key = "bad\xff";
    ls->v[1].value = "dropped";
    ls->v[2].key = "cut";
    ls->v[2].value = "ok\xc3rest";
    for (i = 3; i < ls->n; i++) {
        char *k = tu_labset_text(ls, 5, 'l');

        snprintf(k, 6, "l%04u", (unsigned)(i % 10000));
        ls->v[i].key = k;
        ls->v[i].value = euro;
    }
    return euro;
}

void
tu_labset_free(struct tu_labset *ls)
{
    size_t i;

    for (i = 0; i < ls->nmem; i++)
        free(ls->mem[i]);
    free(ls->mem);
    free(ls->v);
    memset(ls, 0, sizeof(*ls));
}

/* ---- a growing string --------------------------------------------------- */

void
tu_sb_printf(struct tu_sbuf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    assert_true(n >= 0);
    if (b->len + (size_t)n + 1 > b->cap) {
        b->cap = (b->len + (size_t)n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void
tu_sb_bytes(struct tu_sbuf *b, const char *s, size_t len)
{
    size_t i;

    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c < 0x20 || c >= 0x7f || c == '\\')
            tu_sb_printf(b, "\\x%02x", c);
        else
            tu_sb_printf(b, "%c", c);
    }
}
