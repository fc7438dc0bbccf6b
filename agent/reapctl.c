/*
 * reapctl — the command-line client of reapd, for executors and operators.
 *
 * It asks a running reapd over its admin socket (every command) or its TCP
 * status listener (--url, read-only), through one blocking libcurl easy
 * handle: a command-line client has nothing else to do while it waits.
 * Every answer is bounded (16 MiB; the report stream per line) and parsed
 * with json.h before any of it is printed, so what reaches stdout is
 * always well-formed JSON, one document per line, whatever reapd sent.
 * The exit codes are the contract executors script against: see
 * usage_exit.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <yajl/yajl_gen.h>

#include "docker.h"
#include "json.h"
#include "upstream.h"

#define EXIT_NOT_READY 1
#define EXIT_FAIL      125

#define DEFAULT_SOCKET "/run/reapd/admin.sock"
#define BODY_MAX       (16u << 20)
#define BODY_MAX_TEXT  "16 MiB"
#define CONNECT_MS     5000
/* For requests reapd answers at once; a long poll adds its wait. */
#define ANSWER_MS 30000
/* The longest ?wait= reapd accepts. */
#define POLL_MAX_S 300
/* How long `wait` keeps asking about a container reapd has not seen yet
 * (an executor calls it right after `docker run -d`), and for a reapd
 * that cannot be reached (restarting), and how often. */
#define GRACE_MS      5000
#define RETRY_MS      1000
#define TIMEOUT_MAX_S 1000000000L
#define REPORT_ID_MAX 64
#define URL_MAX       2048
#define MESSAGE_MAX   300

/* Set by SIGINT/SIGTERM/SIGHUP: the transfer in progress and any retry
 * pause end, everything is freed, and the signal is raised again so the
 * caller sees how reapctl ended. */
static volatile sig_atomic_t stop_signal;

/* What one transfer came to. */
enum xfer {
    X_ANSWER,      /* reapd answered: code and body */
    X_UNREACHABLE, /* no connection (no socket, refused) */
    X_CUT,         /* connected, then the connection broke */
    X_FAILED,      /* anything else: timeout, too large, ... */
    X_STOPPED,     /* a signal */
};

struct buf {
    char *data;
    size_t len, cap;
};

/* The report stream being read (reports --follow). */
struct follow {
    const char *container; /* print only this container's reports */
    bool started;          /* the status line is known */
    bool ok;               /* ... and it is 200: the body is NDJSON */
    bool failed;           /* stopped by us: why is in ctl.err */
    struct buf line;       /* the line so far */
};

struct ctl {
    CURL *curl;
    struct curl_slist *headers;
    const char *socket;     /* the admin socket, or NULL with --url */
    const char *token_file; /* --token-file, or NULL: no token sent */
    char *base;             /* "http://localhost" or the --url */
    char errbuf[CURL_ERROR_SIZE];
    char err[512]; /* why the last transfer failed */
    long code;
    struct buf body;
    bool body_over;
    struct follow *follow;
};

static const struct json_limits answer_limits = {
    .max_bytes = BODY_MAX,
    .max_depth = 64,
    .max_items = 1u << 20,
    .max_string = BODY_MAX,
};

/* ---- usage ----------------------------------------------------------- */

/* A command: its own function, or (run NULL) one request without
 * arguments whose answer is printed. */
struct command {
    const char *name;
    int (*run)(struct ctl *c, int argc, char **argv);
    const char *help;
    const char *method, *path;
};

static const char usage_head[] =
    "Usage: reapctl [--socket PATH | --url URL] [--token-file FILE] "
    "COMMAND [ARGS]\n"
    "       reapctl --help | --version | COMMAND --help\n";

static const char usage_options[] =
    "\n"
    "The command-line client of reapd. It talks to reapd's admin socket\n"
    "(every command) or to its TCP status listener (read-only: not\n"
    "requeue, drain or audit).\n"
    "\n"
    "Options:\n"
    "  --socket PATH      reapd's admin socket (default: $REAPD_SOCKET, "
    "else\n"
    "                     " DEFAULT_SOCKET ")\n"
    "  --url URL          reapd's status listener instead, "
    "http://HOST:PORT\n"
    "                     (default: $REAPD_URL when $REAPD_SOCKET is "
    "unset)\n"
    "  --token-file FILE  send \"Authorization: Bearer TOKEN\", TOKEN "
    "being\n"
    "                     FILE's content (reapd's status.token_file;\n"
    "                     default: $REAPD_TOKEN_FILE). The status listener\n"
    "                     serves the read API only with it\n"
    "  --help             this text; COMMAND --help: that command's\n"
    "  --version          reapctl's version\n"
    "\n"
    "Commands:\n";

static const char usage_exit[] =
    "\n"
    "Exit status:\n"
    "  0    success\n"
    "  1    status: reapd answered but is not ready\n"
    "  N    wait --exit-code: the container's own exit code (0..255)\n"
    "  125  reapctl failed: bad usage, reapd cannot be reached, a "
    "timeout,\n"
    "       an unknown container or report, an error from reapd, or a\n"
    "       malformed answer (the message is on stderr)\n"
    "IDs are full container ids: 64 lowercase hex digits, as `docker run "
    "-d`\n"
    "prints them.\n";

static const char help_status[] =
    "  status\n"
    "      Prints reapd's state as JSON. Exits 0 when reapd is ready, 1 "
    "when\n"
    "      it answers but is not ready, 125 when it cannot be reached: a\n"
    "      health check.\n";
static const char help_containers[] =
    "  containers\n"
    "      Prints every container reapd tracks, with its lifecycle state.\n";
static const char help_show[] = "  show ID\n"
                                "      Prints one container reapd tracks.\n";
static const char help_leaks[] =
    "  leaks\n"
    "      Prints the containerd tasks the audit found with no container.\n";
static const char help_wait[] =
    "  wait ID [--timeout S] [--exit-code]\n"
    "      Waits until reapd has reported container ID's exit, then prints\n"
    "      the report on one line. --exit-code: exit with the container's\n"
    "      exit code instead of 0 (125 when reapd could not tell it). A\n"
    "      container reapd has not seen yet, and a reapd that cannot be\n"
    "      reached or is busy, are asked again every second for 5 s.\n"
    "      Without --timeout (whole seconds) it waits for ever.\n";
static const char help_reports[] =
    "  reports [--dead | --pending | --delivered] [--after SEQ] "
    "[--limit N]\n"
    "          [--container ID] [--follow]\n"
    "      Prints reports with their delivery state, one JSON object per\n"
    "      line: the newest first, or with --after the oldest after "
    "sequence\n"
    "      number SEQ first; at most N (1..1000, default 50). --follow "
    "prints\n"
    "      each report as reapd writes it, until interrupted (not with a\n"
    "      state or --limit).\n";
static const char help_requeue[] =
    "  requeue REPORT_ID | requeue --all-dead\n"
    "      Queues a report, or every dead letter, for delivery again.\n"
    "      Admin socket only.\n";
static const char help_drain[] =
    "  drain [--timeout S]\n"
    "      Waits until no container is being cleaned up and no report "
    "waits\n"
    "      for delivery, then prints the outcome. Without --timeout (whole\n"
    "      seconds) it waits for ever. Admin socket only.\n";
static const char help_audit[] =
    "  audit\n"
    "      Runs the audit of containerd's tasks now, prints its result.\n"
    "      Admin socket only.\n";

/* ---- small helpers --------------------------------------------------- */

static void warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
warnx(const char *fmt, ...)
{
    va_list ap;

    fputs("reapctl: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static int usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Says what is wrong and where help is; returns EXIT_FAIL. */
static int
usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;

    fputs("reapctl: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'reapctl %s%s--help'.\n", cmd != NULL ? cmd : "",
            cmd != NULL ? " " : "");
    return EXIT_FAIL;
}

static int64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sleeps `ms`, or less when a signal asks reapctl to stop. */
static void
nap(int64_t ms)
{
    int64_t end = now_ms() + ms, left;
    struct timespec ts;

    while (!stop_signal && (left = end - now_ms()) > 0) {
        ts.tv_sec = left / 1000;
        ts.tv_nsec = (long)(left % 1000) * 1000000;
        nanosleep(&ts, NULL);
    }
}

static void
on_signal(int sig)
{
    stop_signal = sig;
}

/* A decimal number in 0..max, digits only (no sign, blanks or 0x). */
static int
parse_uint(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;

    if (*s == '\0')
        return -1;
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        if (v > (max - (uint64_t)(*s - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

/* Report ids go into a URL path as they are: printable ASCII that no URL
 * reads specially, and never a dot segment libcurl would fold. */
static bool
valid_report_id(const char *s)
{
    size_t i;

    if (*s == '\0' || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return false;
    for (i = 0; s[i] != '\0'; i++) {
        if (i == REPORT_ID_MAX || s[i] <= ' ' || s[i] > '~' || s[i] == '/' ||
            s[i] == '?' || s[i] == '%' || s[i] == '#')
            return false;
    }
    return true;
}

static int
check_container_id(const char *cmd, const char *id)
{
    if (docker_valid_id(id))
        return 0;
    return usage_error(cmd,
                       "not a full container id: \"%.80s\" (64 lowercase "
                       "hex digits)",
                       id);
}

/* Appends n bytes, keeping the buffer at most `max` bytes and always
 * NUL-terminated. 0, or -1 past `max` or out of memory. */
static int
buf_add(struct buf *b, const char *p, size_t n, size_t max)
{
    size_t cap;
    char *d;

    if (n > max - b->len)
        return -1;
    if (b->len + n + 1 > b->cap) {
        cap = b->cap != 0 ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        d = realloc(b->data, cap);
        if (d == NULL)
            return -1;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

/* A string reapd sent, fit for a terminal: control bytes become '?'. */
static void
tame(const char *s, size_t len, char *out, size_t outlen)
{
    size_t i;

    for (i = 0; i < len && i + 1 < outlen; i++) {
        unsigned char ch = (unsigned char)s[i];

        out[i] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    out[i] = '\0';
}

/* ---- printing JSON --------------------------------------------------- */

/* Depth is bounded by answer_limits.max_depth. */
static yajl_gen_status
emit(yajl_gen g, const struct json_node *n)
{
    yajl_gen_status st = yajl_gen_status_ok;
    size_t i;

    if (n->key != NULL)
        st = yajl_gen_string(g, (const unsigned char *)n->key, n->key_len);
    if (st != yajl_gen_status_ok)
        return st;
    switch (n->type) {
    case JSON_NULL:
        return yajl_gen_null(g);
    case JSON_BOOL:
        return yajl_gen_bool(g, n->boolean);
    case JSON_NUMBER:
        return yajl_gen_number(g, n->str, n->len);
    case JSON_STRING:
        return yajl_gen_string(g, (const unsigned char *)n->str, n->len);
    case JSON_OBJECT:
    case JSON_ARRAY:
        st = n->type == JSON_OBJECT ? yajl_gen_map_open(g)
                                    : yajl_gen_array_open(g);
        for (i = 0; i < n->count && st == yajl_gen_status_ok; i++)
            st = emit(g, n->items[i]);
        if (st != yajl_gen_status_ok)
            return st;
        return n->type == JSON_OBJECT ? yajl_gen_map_close(g)
                                      : yajl_gen_array_close(g);
    }
    return yajl_gen_invalid_string;
}

/* Prints `n` as one line of JSON on stdout. 0, or -1 with why in `err`. */
static int
print_json(const struct json_node *n, bool flush, char *err, size_t errlen)
{
    yajl_gen g = yajl_gen_alloc(NULL);
    const unsigned char *text;
    size_t len;
    int result = -1;

    if (g == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (emit(g, n) != yajl_gen_status_ok ||
        yajl_gen_get_buf(g, &text, &len) != yajl_gen_status_ok) {
        snprintf(err, errlen, "cannot write reapd's answer out as JSON");
        goto out;
    }
    if (fwrite(text, 1, len, stdout) != len || putchar('\n') == EOF ||
        (flush && fflush(stdout) != 0)) {
        snprintf(err, errlen, "cannot write to stdout: %s", strerror(errno));
        goto out;
    }
    result = 0;
out:
    yajl_gen_free(g);
    return result;
}

/* print_json for a command: says why it failed. 0 or EXIT_FAIL. */
static int
print_doc(const char *cmd, const struct json_node *n, bool flush)
{
    char err[256];

    if (print_json(n, flush, err, sizeof(err)) == 0)
        return 0;
    warnx("%s: %s", cmd, err);
    return EXIT_FAIL;
}

/* ---- talking to reapd ------------------------------------------------ */

static size_t follow_feed(struct ctl *c, const char *p, size_t n);

static size_t
on_body(char *p, size_t size, size_t nmemb, void *arg)
{
    struct ctl *c = arg;
    size_t n = size * nmemb;

    if (c->follow != NULL)
        return follow_feed(c, p, n);
    if (buf_add(&c->body, p, n, BODY_MAX) != 0) {
        c->body_over = true;
        return 0;
    }
    return n;
}

static int
on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow,
            curl_off_t ultotal, curl_off_t ulnow)
{
    return stop_signal != 0;
}

static const char *
target(const struct ctl *c)
{
    return c->socket != NULL ? c->socket : c->base;
}

/* The header list: JSON wanted, no form Content-Type on our empty POSTs,
 * and the token. The token's copies are wiped in ctl_close. */
static int
add_headers(struct ctl *c, const char *token_file)
{
    char err[512], *token = NULL, *line = NULL;
    const char *fixed[] = {"Accept: application/json", "Content-Type:"};
    struct curl_slist *l;
    size_t i, len;
    int result = -1;

    for (i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        l = curl_slist_append(c->headers, fixed[i]);
        if (l == NULL)
            goto oom;
        c->headers = l;
    }
    if (token_file != NULL) {
        if (upstream_read_token(token_file, &token, err, sizeof(err)) != 0) {
            warnx("--token-file %s", err);
            goto out;
        }
        len = strlen(token) + sizeof("Authorization: Bearer ");
        line = malloc(len);
        if (line == NULL)
            goto oom;
        snprintf(line, len, "Authorization: Bearer %s", token);
        l = curl_slist_append(c->headers, line);
        explicit_bzero(line, len);
        if (l == NULL)
            goto oom;
        c->headers = l;
    }
    result = 0;
    goto out;
oom:
    warnx("out of memory");
out:
    free(line);
    upstream_token_free(token);
    return result;
}

/* Sets up the one easy handle for `url` (checked here) or else `socket`.
 * 0, or EXIT_FAIL having said why; ctl_close either way. */
static int
ctl_open(struct ctl *c, const char *socket, const char *url,
         const char *token_file)
{
    size_t len;

    memset(c, 0, sizeof(*c));
    if (url != NULL) {
        len = strlen(url);
        if ((strncmp(url, "http://", 7) != 0 &&
             strncmp(url, "https://", 8) != 0) ||
            len > URL_MAX || strpbrk(url, "?# \t\r\n") != NULL)
            return usage_error(NULL,
                               "--url wants http://HOST:PORT, not "
                               "\"%.80s\"",
                               url);
        while (len > 0 && url[len - 1] == '/')
            len--;
        c->base = strndup(url, len);
    } else {
        if (socket[0] == '\0' || strlen(socket) >= 108)
            return usage_error(NULL, "--socket: not a socket path: \"%.80s\"",
                               socket);
        c->socket = socket;
        c->base = strdup("http://localhost");
    }
    c->curl = curl_easy_init();
    if (c->base == NULL || c->curl == NULL) {
        warnx("out of memory");
        return EXIT_FAIL;
    }
    c->token_file = token_file;
    if (add_headers(c, token_file) != 0)
        return EXIT_FAIL;
    if ((c->socket != NULL &&
         curl_easy_setopt(c->curl, CURLOPT_UNIX_SOCKET_PATH, c->socket) !=
             CURLE_OK) ||
        curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
        curl_easy_setopt(c->curl, CURLOPT_PROTOCOLS_STR, "http,https") !=
            CURLE_OK ||
        /* reapd is on this node or a known address: never a proxy. */
        curl_easy_setopt(c->curl, CURLOPT_PROXY, "") != CURLE_OK ||
        curl_easy_setopt(c->curl, CURLOPT_HTTP_VERSION,
                         (long)CURL_HTTP_VERSION_1_1) != CURLE_OK ||
        curl_easy_setopt(c->curl, CURLOPT_PATH_AS_IS, 1L) != CURLE_OK ||
        curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS,
                         (long)CONNECT_MS) != CURLE_OK ||
        curl_easy_setopt(c->curl, CURLOPT_TCP_KEEPALIVE, 1L) != CURLE_OK ||
        curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->headers) !=
            CURLE_OK ||
        curl_easy_setopt(c->curl, CURLOPT_USERAGENT,
                         "reapctl/" REAPD_VERSION) != CURLE_OK ||
        curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, c->errbuf) !=
            CURLE_OK ||
        curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body) !=
            CURLE_OK ||
        curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, c) != CURLE_OK ||
        curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L) != CURLE_OK ||
        curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, on_progress) !=
            CURLE_OK) {
        warnx("libcurl refused an option: %s", c->errbuf);
        return EXIT_FAIL;
    }
    return 0;
}

static void
ctl_close(struct ctl *c)
{
    struct curl_slist *l;

    if (c->curl != NULL)
        curl_easy_cleanup(c->curl);
    for (l = c->headers; l != NULL; l = l->next)
        explicit_bzero(l->data, strlen(l->data));
    curl_slist_free_all(c->headers);
    free(c->base);
    free(c->body.data);
}

/*
 * One request: `method` GET or POST (with an empty body), `path` with its
 * query. On X_ANSWER, c->code and c->body hold reapd's answer; otherwise
 * c->err says what went wrong. `timeout_ms` 0: none (the report stream).
 */
static enum xfer
request(struct ctl *c, const char *method, const char *path, long timeout_ms)
{
    size_t len = strlen(c->base) + strlen(path) + 1;
    enum xfer x = X_FAILED;
    long os_errno = 0;
    const char *why;
    char *url;
    CURLcode rc;

    c->code = 0;
    c->body.len = 0;
    c->body_over = false;
    c->err[0] = '\0';
    c->errbuf[0] = '\0';
    url = malloc(len);
    if (url == NULL) {
        snprintf(c->err, sizeof(c->err), "out of memory");
        return X_FAILED;
    }
    snprintf(url, len, "%s%s", c->base, path);
    if (strcmp(method, "POST") == 0) {
        rc = curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE, 0L);
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, "");
    } else {
        rc = curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
    }
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(c->curl, CURLOPT_URL, url);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(c->curl, CURLOPT_MAXFILESIZE_LARGE,
                              (curl_off_t)(c->follow != NULL ? 0 : BODY_MAX));
    if (rc == CURLE_OK)
        rc = curl_easy_perform(c->curl);
    if (stop_signal) {
        x = X_STOPPED;
        goto out;
    }
    if (rc == CURLE_OK) {
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &c->code);
        x = X_ANSWER;
        goto out;
    }
    curl_easy_getinfo(c->curl, CURLINFO_OS_ERRNO, &os_errno);
    why = c->errbuf[0] != '\0' ? c->errbuf : curl_easy_strerror(rc);
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
        x = X_UNREACHABLE;
        snprintf(c->err, sizeof(c->err), "cannot reach reapd at %s: %s",
                 target(c), os_errno != 0 ? strerror((int)os_errno) : why);
        break;
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
        x = X_CUT;
        snprintf(c->err, sizeof(c->err),
                 "the connection to reapd at %s broke: %s", target(c), why);
        break;
    case CURLE_OPERATION_TIMEDOUT:
        snprintf(c->err, sizeof(c->err),
                 "reapd at %s did not answer in time: %s", target(c), why);
        break;
    case CURLE_FILESIZE_EXCEEDED:
        snprintf(c->err, sizeof(c->err),
                 "reapd's answer is larger than " BODY_MAX_TEXT);
        break;
    case CURLE_WRITE_ERROR:
        /* The stream reader left its reason in c->err; else the body
         * went over its bound or memory ran out. */
        if (c->err[0] == '\0')
            snprintf(c->err, sizeof(c->err), "%s",
                     c->body_over
                         ? "reapd's answer is larger than " BODY_MAX_TEXT
                           " (or out of memory)"
                         : why);
        break;
    default:
        snprintf(c->err, sizeof(c->err), "%s %s at %s: %s", method, path,
                 target(c), why);
        break;
    }
out:
    free(url);
    return x;
}

/* The answer as a JSON object, or NULL having said why. */
static struct json_node *
answer_json(const struct ctl *c, const char *cmd)
{
    struct json_node *root;
    char err[256];

    root = json_parse(c->body.data != NULL ? c->body.data : "", c->body.len,
                      &answer_limits, 0, err, sizeof(err), NULL);
    if (root == NULL) {
        warnx("%s: malformed answer from reapd (HTTP %ld): %s", cmd, c->code,
              err);
        return NULL;
    }
    if (root->type != JSON_OBJECT) {
        warnx("%s: malformed answer from reapd (HTTP %ld): not a JSON object",
              cmd, c->code);
        json_free(root);
        return NULL;
    }
    return root;
}

/* reapd's {"error": ...} of a failed answer, tamed, into `out`. */
static void
answer_message(const struct ctl *c, char *out, size_t outlen)
{
    struct json_node *root;
    const struct json_node *e;

    snprintf(out, outlen, "no message");
    root = json_parse(c->body.data != NULL ? c->body.data : "", c->body.len,
                      &answer_limits, 0, NULL, 0, NULL);
    e = json_get(root, "error");
    if (json_string(e) != NULL)
        tame(e->str, e->len, out, outlen);
    json_free(root);
}

/* Says what reapd's unexpected answer means; returns EXIT_FAIL. */
static int
answer_error(const struct ctl *c, const char *cmd)
{
    char msg[MESSAGE_MAX];

    answer_message(c, msg, sizeof(msg));
    if (c->code == 405 && c->socket == NULL)
        warnx("%s: reapd's status listener at %s is read-only; write "
              "commands go through its admin socket (--socket PATH, "
              "default " DEFAULT_SOCKET ")",
              cmd, c->base);
    else if (c->code == 401 && c->token_file != NULL)
        warnx("%s: reapd at %s refused the token of %s: %s", cmd, target(c),
              c->token_file, msg);
    else if (c->code == 401)
        /* The read API names containers: without a token the status
         * listener keeps it to itself (reapd says where to go). */
        warnx("%s: the status listener at %s serves the read API only "
              "with a token: --token-file FILE (reapd's status.token_file), "
              "or the admin socket as root (--socket PATH); reapd: %s",
              cmd, target(c), msg);
    else
        warnx("%s: reapd answered %ld: %s", cmd, c->code, msg);
    return EXIT_FAIL;
}

/* Prints the JSON object of a 200 answer to the request that came to
 * `x`; anything else is an error. */
static int
print_answer(struct ctl *c, const char *cmd, enum xfer x)
{
    struct json_node *root;
    int rc;

    if (x == X_STOPPED)
        return EXIT_FAIL;
    if (x != X_ANSWER) {
        warnx("%s: %s", cmd, c->err);
        return EXIT_FAIL;
    }
    if (c->code != 200)
        return answer_error(c, cmd);
    root = answer_json(c, cmd);
    if (root == NULL)
        return EXIT_FAIL;
    rc = print_doc(cmd, root, false);
    json_free(root);
    return rc;
}

static int
fetch_and_print(struct ctl *c, const char *cmd, const char *method,
                const char *path)
{
    return print_answer(c, cmd, request(c, method, path, ANSWER_MS));
}

/* ---- argument parsing ------------------------------------------------ */

/*
 * Is argv[*i] option `name`? Its value, if it takes one (val != NULL), is
 * after '=' or the next argument. 1 (and *i past it), 0 if not this
 * option, -1 with a message if its value is missing.
 */
static int
take_opt(const char *cmd, int argc, char **argv, int *i, const char *name,
         const char **val)
{
    const char *a = argv[*i];
    size_t n = strlen(name);

    if (strncmp(a, name, n) != 0 || (a[n] != '\0' && a[n] != '='))
        return 0;
    if (val == NULL) {
        if (a[n] == '=') {
            usage_error(cmd, "%s takes no value", name);
            return -1;
        }
        (*i)++;
        return 1;
    }
    if (a[n] == '=') {
        *val = a + n + 1;
        (*i)++;
        return 1;
    }
    if (*i + 1 >= argc) {
        usage_error(cmd, "%s needs a value", name);
        return -1;
    }
    *val = argv[*i + 1];
    *i += 2;
    return 1;
}

/* --timeout's whole seconds into *out: 0, or EXIT_FAIL having said why. */
static int
parse_timeout(const char *cmd, const char *s, long *out)
{
    uint64_t v;

    if (parse_uint(s, TIMEOUT_MAX_S, &v) != 0)
        return usage_error(cmd, "--timeout wants whole seconds, not \"%.40s\"",
                           s);
    *out = (long)v;
    return 0;
}

static int
no_args(const char *cmd, int argc, char **argv)
{
    if (argc > 1)
        return usage_error(cmd, "unexpected argument \"%.80s\"", argv[1]);
    return 0;
}

/* ---- commands -------------------------------------------------------- */

static int
cmd_status(struct ctl *c, int argc, char **argv)
{
    const struct json_node *ready;
    struct json_node *root = NULL;
    int rc = EXIT_FAIL;
    enum xfer x;

    if (no_args("status", argc, argv) != 0)
        return EXIT_FAIL;
    x = request(c, "GET", "/v1/status", ANSWER_MS);
    if (x == X_STOPPED)
        goto out;
    if (x != X_ANSWER) {
        warnx("status: %s", c->err);
        goto out;
    }
    /* A not-ready reapd may say so with 503; the document tells. */
    if (c->code != 200 && c->code != 503) {
        rc = answer_error(c, "status");
        goto out;
    }
    root = answer_json(c, "status");
    if (root == NULL)
        goto out;
    ready = json_get(root, "ready");
    if (ready == NULL || ready->type != JSON_BOOL) {
        if (c->code != 200) {
            rc = answer_error(c, "status");
            goto out;
        }
        warnx("status: malformed answer from reapd: no \"ready\"");
        goto out;
    }
    if (print_doc("status", root, false) != 0)
        goto out;
    rc = ready->boolean ? 0 : EXIT_NOT_READY;
out:
    json_free(root);
    return rc;
}

/* containers, leaks, audit: one request, its answer printed. */
static int
cmd_fetch(struct ctl *c, const struct command *cmd, int argc, char **argv)
{
    if (no_args(cmd->name, argc, argv) != 0)
        return EXIT_FAIL;
    return fetch_and_print(c, cmd->name, cmd->method, cmd->path);
}

static int
cmd_show(struct ctl *c, int argc, char **argv)
{
    char path[128];
    enum xfer x;

    if (argc != 2)
        return usage_error("show", "show wants one container id");
    if (check_container_id("show", argv[1]) != 0)
        return EXIT_FAIL;
    snprintf(path, sizeof(path), "/v1/containers/%s", argv[1]);
    x = request(c, "GET", path, ANSWER_MS);
    if (x == X_ANSWER && c->code == 404) {
        warnx("show: reapd does not track container %s", argv[1]);
        return EXIT_FAIL;
    }
    return print_answer(c, "show", x);
}

static int64_t
min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* The long-poll wait for an ask with `left` ms to the deadline: whole
 * seconds, at most what reapd accepts; 0 asks for an answer at once. */
static long
poll_wait(int64_t left)
{
    return left >= POLL_MAX_S * 1000L ? POLL_MAX_S : (long)(left / 1000);
}

/* wait's 200: the report, printed; the exit status it asks for. */
static int
wait_done(struct ctl *c, const char *id, bool want_code)
{
    struct json_node *root = answer_json(c, "wait");
    const struct json_node *code;
    const char *cid;
    char lit[32];
    int64_t v;
    int rc = EXIT_FAIL;

    if (root == NULL)
        return EXIT_FAIL;
    cid = json_string(json_get(root, "container_id"));
    if (cid == NULL || strcmp(cid, id) != 0 ||
        json_string(json_get(root, "report_id")) == NULL) {
        warnx("wait: malformed answer from reapd: not a report of "
              "container %s",
              id);
        goto out;
    }
    if (print_doc("wait", root, true) != 0)
        goto out;
    if (!want_code) {
        rc = 0;
        goto out;
    }
    code = json_get(root, "exit_code");
    if (code == NULL || code->type == JSON_NULL) {
        warnx("wait: reapd could not tell container %s's exit code", id);
        goto out;
    }
    if (json_int64(code, &v) != 0 || v < 0 || v > 255) {
        if (code->type == JSON_NUMBER)
            tame(code->str, code->len, lit, sizeof(lit));
        else
            snprintf(lit, sizeof(lit), "not a number");
        warnx("wait: container %s's exit code is not in 0..255: %s", id, lit);
        goto out;
    }
    rc = (int)v;
out:
    json_free(root);
    return rc;
}

/*
 * Asks until the report is there. The deadline is the caller's; a
 * container reapd does not know yet (404) and a reapd that cannot be
 * reached or answers 503 are each given GRACE_MS, asked every RETRY_MS,
 * since an executor races `docker run -d` and reapd may be restarting.
 */
static int
cmd_wait(struct ctl *c, int argc, char **argv)
{
    int64_t deadline, asked, now, unknown_since = -1, lost_since = -1;
    const char *id = NULL, *v;
    const struct json_node *st;
    struct json_node *root;
    char path[160], state[64], msg[MESSAGE_MAX];
    bool want_code = false;
    long timeout = -1, w;
    enum xfer x;
    int i = 1, t;

    while (i < argc) {
        if ((t = take_opt("wait", argc, argv, &i, "--timeout", &v)) != 0) {
            if (t < 0 || parse_timeout("wait", v, &timeout) != 0)
                return EXIT_FAIL;
        } else if ((t = take_opt("wait", argc, argv, &i, "--exit-code",
                                 NULL)) != 0) {
            if (t < 0)
                return EXIT_FAIL;
            want_code = true;
        } else if (argv[i][0] == '-') {
            return usage_error("wait", "unknown option \"%.80s\"", argv[i]);
        } else if (id != NULL) {
            return usage_error("wait", "wait takes one container id");
        } else {
            id = argv[i++];
        }
    }
    if (id == NULL)
        return usage_error("wait", "wait wants a container id");
    if (check_container_id("wait", id) != 0)
        return EXIT_FAIL;
    deadline = timeout >= 0 ? now_ms() + timeout * 1000 : INT64_MAX;
    for (;;) {
        asked = now_ms();
        w = poll_wait(deadline - asked);
        if (w > 0)
            snprintf(path, sizeof(path), "/v1/containers/%s/report?wait=%ld",
                     id, w);
        else
            snprintf(path, sizeof(path), "/v1/containers/%s/report", id);
        x = request(c, "GET", path, w * 1000 + ANSWER_MS);
        now = now_ms();
        if (x == X_STOPPED)
            return EXIT_FAIL;
        /* A 503 is reapd busy (all connections taken) or not yet able
         * to read its reports: as passing as a restart. */
        if (x == X_ANSWER && c->code == 503) {
            answer_message(c, msg, sizeof(msg));
            snprintf(c->err, sizeof(c->err), "reapd is unavailable: %s", msg);
        }
        if (x == X_UNREACHABLE || x == X_CUT ||
            (x == X_ANSWER && c->code == 503)) {
            unknown_since = -1;
            if (lost_since < 0)
                lost_since = asked;
            if (now - lost_since >= GRACE_MS || now >= deadline) {
                warnx("wait: %s", c->err);
                return EXIT_FAIL;
            }
            nap(min64(RETRY_MS, deadline - now));
            continue;
        }
        if (x != X_ANSWER) {
            warnx("wait: %s", c->err);
            return EXIT_FAIL;
        }
        lost_since = -1;
        if (c->code == 200)
            return wait_done(c, id, want_code);
        if (c->code == 404) {
            if (unknown_since < 0)
                unknown_since = asked;
            if (now - unknown_since >= GRACE_MS || now >= deadline) {
                answer_message(c, msg, sizeof(msg));
                warnx("wait: unknown container %s: reapd neither tracks "
                      "nor has reported it (%s)",
                      id, msg);
                return EXIT_FAIL;
            }
            nap(min64(RETRY_MS, deadline - now));
            continue;
        }
        if (c->code != 202)
            return answer_error(c, "wait");
        unknown_since = -1;
        root = answer_json(c, "wait");
        if (root == NULL)
            return EXIT_FAIL;
        st = json_get(root, "state");
        if (json_string(st) != NULL)
            tame(st->str, st->len, state, sizeof(state));
        else
            snprintf(state, sizeof(state), "not reported yet");
        json_free(root);
        if (now >= deadline) {
            warnx("wait: timed out after %ld s: container %s is %s", timeout,
                  id, state);
            return EXIT_FAIL;
        }
        /* A reapd that answers 202 before the wait is up must not turn
         * this into a busy loop. */
        if (now - asked < RETRY_MS)
            nap(min64(RETRY_MS, deadline - now));
    }
}

/* One line of the report stream: blank, or an entry to print. */
static int
follow_line(struct ctl *c, struct follow *f)
{
    const char *s = f->line.data;
    size_t len = f->line.len, i;
    struct json_node *root;
    const char *cid;
    char err[256];
    int result = -1;

    for (i = 0; i < len; i++) {
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            break;
    }
    if (i == len)
        return 0;
    root = json_parse(s, len, &answer_limits, 0, err, sizeof(err), NULL);
    if (root == NULL || root->type != JSON_OBJECT) {
        snprintf(c->err, sizeof(c->err),
                 "malformed line in reapd's report stream: %s",
                 root == NULL ? err : "not a JSON object");
        goto out;
    }
    /* The stream carries every report; the filter is ours. */
    cid = json_string(json_get(json_get(root, "report"), "container_id"));
    if (f->container != NULL && (cid == NULL || strcmp(cid, f->container)))
        result = 0;
    else if (print_json(root, true, err, sizeof(err)) == 0)
        result = 0;
    else
        snprintf(c->err, sizeof(c->err), "%s", err);
out:
    json_free(root);
    return result;
}

/* The write callback's part for the report stream: NDJSON once the
 * answer is a 200, line by line, each bounded; anything else is kept as
 * an answer to report. 0 stops the transfer (why in c->err). */
static size_t
follow_feed(struct ctl *c, const char *p, size_t n)
{
    struct follow *f = c->follow;
    size_t left = n, seg;
    const char *nl;
    long code = 0;

    if (!f->started) {
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &code);
        f->started = true;
        f->ok = code == 200;
    }
    if (!f->ok) {
        if (buf_add(&c->body, p, n, BODY_MAX) == 0)
            return n;
        c->body_over = true;
        return 0;
    }
    while (left > 0) {
        nl = memchr(p, '\n', left);
        seg = nl != NULL ? (size_t)(nl - p) : left;
        if (buf_add(&f->line, p, seg, BODY_MAX) != 0) {
            snprintf(c->err, sizeof(c->err),
                     "a line of reapd's report stream is larger "
                     "than " BODY_MAX_TEXT " (or out of memory)");
            f->failed = true;
            return 0;
        }
        if (nl == NULL)
            break;
        if (follow_line(c, f) != 0) {
            f->failed = true;
            return 0;
        }
        f->line.len = 0;
        p += seg + 1;
        left -= seg + 1;
    }
    return n;
}

static int
follow_reports(struct ctl *c, const char *after, const char *container)
{
    struct follow f = {.container = container};
    char path[96];
    int rc = EXIT_FAIL;
    enum xfer x;

    snprintf(path, sizeof(path), "/v1/reports/stream%s%s",
             after != NULL ? "?after=" : "", after != NULL ? after : "");
    c->follow = &f;
    x = request(c, "GET", path, 0);
    c->follow = NULL;
    if (x == X_STOPPED)
        goto out;
    if (f.failed)
        warnx("reports: %s", c->err);
    else if (x == X_ANSWER && c->code != 200)
        rc = answer_error(c, "reports");
    else if (x == X_ANSWER)
        warnx("reports: reapd ended the report stream");
    else if (f.ok)
        warnx("reports: the report stream broke: %s", c->err);
    else
        warnx("reports: %s", c->err);
out:
    free(f.line.data);
    return rc;
}

/* Appends "NAME=VALUE" to the query being built in `q`. */
static void
query_add(char *q, size_t qlen, const char *name, const char *value)
{
    size_t used = strlen(q);

    if (value != NULL)
        snprintf(q + used, qlen - used, "%c%s=%s", used == 0 ? '?' : '&', name,
                 value);
}

static int
cmd_reports(struct ctl *c, int argc, char **argv)
{
    static const char *const states[] = {"dead", "pending", "delivered"};
    const char *state = NULL, *after = NULL, *limit = NULL;
    const char *container = NULL, *v;
    const struct json_node *list;
    struct json_node *root = NULL;
    char flag[16], query[256], path[300];
    bool follow = false, known;
    int i = 1, t, rc = EXIT_FAIL;
    uint64_t n;
    size_t k;
    enum xfer x;

    while (i < argc) {
        known = false;
        for (k = 0; k < sizeof(states) / sizeof(states[0]); k++) {
            snprintf(flag, sizeof(flag), "--%s", states[k]);
            if ((t = take_opt("reports", argc, argv, &i, flag, NULL)) < 0)
                return EXIT_FAIL;
            if (t == 0)
                continue;
            if (state != NULL && state != states[k])
                return usage_error("reports", "one of --dead, --pending, "
                                              "--delivered only");
            state = states[k];
            known = true;
            break;
        }
        if (known)
            continue;
        if ((t = take_opt("reports", argc, argv, &i, "--after", &v)) != 0) {
            if (t < 0)
                return EXIT_FAIL;
            if (parse_uint(v, INT64_MAX, &n) != 0)
                return usage_error("reports",
                                   "--after wants a sequence number, not "
                                   "\"%.40s\"",
                                   v);
            after = v;
        } else if ((t = take_opt("reports", argc, argv, &i, "--limit", &v)) !=
                   0) {
            if (t < 0)
                return EXIT_FAIL;
            if (parse_uint(v, 1000, &n) != 0 || n < 1)
                return usage_error("reports",
                                   "--limit wants 1..1000, not \"%.40s\"", v);
            limit = v;
        } else if ((t = take_opt("reports", argc, argv, &i, "--container",
                                 &v)) != 0) {
            if (t < 0 || check_container_id("reports", v) != 0)
                return EXIT_FAIL;
            container = v;
        } else if ((t = take_opt("reports", argc, argv, &i, "--follow",
                                 NULL)) != 0) {
            if (t < 0)
                return EXIT_FAIL;
            follow = true;
        } else {
            return usage_error("reports", "unexpected argument \"%.80s\"",
                               argv[i]);
        }
    }
    if (follow && (state != NULL || limit != NULL))
        return usage_error("reports", "--follow takes no --%s",
                           state != NULL ? state : "limit");
    if (follow)
        return follow_reports(c, after, container);
    query[0] = '\0';
    query_add(query, sizeof(query), "after", after);
    query_add(query, sizeof(query), "limit", limit);
    query_add(query, sizeof(query), "container_id", container);
    query_add(query, sizeof(query), "state", state);
    snprintf(path, sizeof(path), "/v1/reports%s", query);
    x = request(c, "GET", path, ANSWER_MS);
    if (x != X_ANSWER || c->code != 200)
        return print_answer(c, "reports", x);
    root = answer_json(c, "reports");
    if (root == NULL)
        goto out;
    list = json_get(root, "reports");
    if (list == NULL || list->type != JSON_ARRAY) {
        warnx("reports: malformed answer from reapd: no \"reports\" list");
        goto out;
    }
    /* All or nothing: a bad entry is found before any is printed. */
    for (k = 0; k < list->count; k++) {
        if (list->items[k]->type != JSON_OBJECT) {
            warnx("reports: malformed answer from reapd: entry %zu is not "
                  "an object",
                  k);
            goto out;
        }
    }
    for (k = 0; k < list->count; k++) {
        if (print_doc("reports", list->items[k], false) != 0)
            goto out;
    }
    rc = 0;
out:
    json_free(root);
    return rc;
}

static int
cmd_requeue(struct ctl *c, int argc, char **argv)
{
    const char *id = NULL;
    char path[128], msg[MESSAGE_MAX];
    bool all = false;
    enum xfer x;
    int i = 1, t;

    while (i < argc) {
        if ((t = take_opt("requeue", argc, argv, &i, "--all-dead", NULL)) !=
            0) {
            if (t < 0)
                return EXIT_FAIL;
            all = true;
        } else if (argv[i][0] == '-') {
            return usage_error("requeue", "unknown option \"%.80s\"", argv[i]);
        } else if (id != NULL) {
            return usage_error("requeue", "requeue takes one report id");
        } else {
            id = argv[i++];
        }
    }
    if (all == (id != NULL))
        return usage_error("requeue",
                           "requeue wants a report id or --all-dead");
    if (id != NULL && !valid_report_id(id))
        return usage_error("requeue", "not a report id: \"%.80s\"", id);
    if (all)
        snprintf(path, sizeof(path), "/v1/reports/requeue?state=dead");
    else
        snprintf(path, sizeof(path), "/v1/reports/%s/requeue", id);
    x = request(c, "POST", path, ANSWER_MS);
    if (x == X_ANSWER && id != NULL && (c->code == 404 || c->code == 409)) {
        answer_message(c, msg, sizeof(msg));
        if (c->code == 404)
            warnx("requeue: reapd has no report %s (%s)", id, msg);
        else
            warnx("requeue: report %s stays as it is: %s", id, msg);
        return EXIT_FAIL;
    }
    return print_answer(c, "requeue", x);
}

/* "N cleaning, N pending" of a 202 from /v1/drain. */
static void
drain_counts(const struct json_node *root, char *out, size_t outlen)
{
    const struct json_node *cl = json_get(root, "cleaning");
    const struct json_node *pe = json_get(root, "pending");

    snprintf(out, outlen, "%s cleaning, %s pending",
             cl != NULL && cl->type == JSON_NUMBER ? cl->str : "?",
             pe != NULL && pe->type == JSON_NUMBER ? pe->str : "?");
}

static int
cmd_drain(struct ctl *c, int argc, char **argv)
{
    int64_t deadline, asked, now;
    struct json_node *root;
    char path[64], counts[128];
    long timeout = -1, w;
    const char *v;
    enum xfer x;
    int i = 1, t;

    while (i < argc) {
        if ((t = take_opt("drain", argc, argv, &i, "--timeout", &v)) == 0)
            return usage_error("drain", "unexpected argument \"%.80s\"",
                               argv[i]);
        if (t < 0 || parse_timeout("drain", v, &timeout) != 0)
            return EXIT_FAIL;
    }
    deadline = timeout >= 0 ? now_ms() + timeout * 1000 : INT64_MAX;
    for (;;) {
        asked = now_ms();
        w = poll_wait(deadline - asked);
        if (w > 0)
            snprintf(path, sizeof(path), "/v1/drain?wait=%ld", w);
        else
            snprintf(path, sizeof(path), "/v1/drain");
        x = request(c, "POST", path, w * 1000 + ANSWER_MS);
        if (x != X_ANSWER || c->code != 202)
            return print_answer(c, "drain", x);
        root = answer_json(c, "drain");
        if (root == NULL)
            return EXIT_FAIL;
        drain_counts(root, counts, sizeof(counts));
        json_free(root);
        now = now_ms();
        if (now >= deadline) {
            warnx("drain: not drained after %ld s: %s", timeout, counts);
            return EXIT_FAIL;
        }
        /* As in wait: an early 202 is not a reason to spin. */
        if (now - asked < RETRY_MS)
            nap(min64(RETRY_MS, deadline - now));
    }
}

/* ---- main ------------------------------------------------------------ */

static const struct command commands[] = {
    {"status", cmd_status, help_status, NULL, NULL},
    {"containers", NULL, help_containers, "GET", "/v1/containers"},
    {"show", cmd_show, help_show, NULL, NULL},
    {"leaks", NULL, help_leaks, "GET", "/v1/leaks"},
    {"wait", cmd_wait, help_wait, NULL, NULL},
    {"reports", cmd_reports, help_reports, NULL, NULL},
    {"requeue", cmd_requeue, help_requeue, NULL, NULL},
    {"drain", cmd_drain, help_drain, NULL, NULL},
    {"audit", NULL, help_audit, "POST", "/v1/audit"},
};

/* All of it, or the part of one command. 0, or EXIT_FAIL when stdout
 * cannot take it. */
static int
usage(const struct command *only)
{
    size_t k;

    fputs(usage_head, stdout);
    if (only != NULL) {
        fputc('\n', stdout);
        fputs(only->help, stdout);
    } else {
        fputs(usage_options, stdout);
        for (k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
            fputs(commands[k].help, stdout);
        fputs(usage_exit, stdout);
    }
    return fflush(stdout) == 0 ? 0 : EXIT_FAIL;
}

static const char *
env(const char *name)
{
    const char *v = getenv(name);

    return v != NULL && *v != '\0' ? v : NULL;
}

int
main(int argc, char **argv)
{
    const char *socket = NULL, *url = NULL, *token_file = NULL, *v;
    const struct command *cmd = NULL;
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa;
    struct ctl c;
    bool curl_up = false;
    int i = 1, j, t, rc = EXIT_FAIL;
    size_t k;

    memset(&c, 0, sizeof(c));
    while (i < argc && argv[i][0] == '-') {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return usage(NULL);
        if (strcmp(argv[i], "--version") == 0) {
            printf("reapctl %s\n", REAPD_VERSION);
            return fflush(stdout) == 0 ? 0 : EXIT_FAIL;
        }
        if ((t = take_opt(NULL, argc, argv, &i, "--socket", &v)) > 0)
            socket = v;
        else if (t == 0 &&
                 (t = take_opt(NULL, argc, argv, &i, "--url", &v)) > 0)
            url = v;
        else if (t == 0 &&
                 (t = take_opt(NULL, argc, argv, &i, "--token-file", &v)) > 0)
            token_file = v;
        else if (t == 0)
            return usage_error(NULL, "unknown option \"%.80s\"", argv[i]);
        if (t < 0)
            return EXIT_FAIL;
    }
    if (i >= argc)
        return usage_error(NULL, "no command given");
    for (k = 0; k < sizeof(commands) / sizeof(commands[0]); k++) {
        if (strcmp(argv[i], commands[k].name) == 0)
            cmd = &commands[k];
    }
    if (cmd == NULL)
        return usage_error(NULL, "unknown command \"%.80s\"", argv[i]);
    for (j = i + 1; j < argc; j++) {
        if (strcmp(argv[j], "--help") == 0 || strcmp(argv[j], "-h") == 0)
            return usage(cmd);
    }
    if (socket != NULL && url != NULL)
        return usage_error(NULL, "--socket or --url, not both");
    if (socket == NULL && url == NULL) {
        socket = env("REAPD_SOCKET");
        url = socket == NULL ? env("REAPD_URL") : NULL;
        if (socket == NULL && url == NULL)
            socket = DEFAULT_SOCKET;
    }
    if (token_file == NULL)
        token_file = env("REAPD_TOKEN_FILE");

    /* No SA_RESTART: a signal has to cut a retry pause short. */
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++)
        sigaction(sigs[k], &sa, NULL);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        warnx("cannot initialise libcurl");
        goto out;
    }
    curl_up = true;
    if (ctl_open(&c, socket, url, token_file) != 0)
        goto out;
    rc = cmd->run != NULL ? cmd->run(&c, argc - i, argv + i)
                          : cmd_fetch(&c, cmd, argc - i, argv + i);
out:
    ctl_close(&c);
    if (curl_up)
        curl_global_cleanup();
    if (fflush(stdout) != 0 && rc != EXIT_FAIL) {
        warnx("cannot write to stdout: %s", strerror(errno));
        rc = EXIT_FAIL;
    }
    if (stop_signal) {
        /* End the way an interrupted program does, with nothing left
         * behind. */
        signal(stop_signal, SIG_DFL);
        raise(stop_signal);
    }
    return rc;
}
