/*
 * reapctl_http — reapctl's connection to reapd; see reapctl_http.h.
 *
 * One easy handle set up once and used for every request, its options
 * fixed at ctl_new: HTTP/1.1 only, never a proxy, paths as given, the
 * token in a header list whose copies are wiped when the ctl goes.
 */
#include "reapctl_http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "upstream.h"

#define CONNECT_MS 5000
#define URL_MAX    2048

struct buf {
    char *data;
    size_t len, cap;
};

/* The stream being read (ctl_stream). */
struct stream {
    const char *what; /* its name, for messages */
    ctl_line_cb cb;
    void *arg;
    bool started;    /* the status line is known */
    bool ok;         /* ... and it is 200: the body is lines */
    bool ended;      /* ended here: why is in ctl.err */
    struct buf line; /* the line so far */
};

struct ctl {
    CURL *curl;
    struct curl_slist *headers;
    const volatile sig_atomic_t *stop;
    const char *socket;     /* the admin socket, or NULL with --url */
    const char *token_file; /* NULL: no token sent */
    char *base;             /* "http://localhost" or the --url */
    char errbuf[CURL_ERROR_SIZE];
    char err[512]; /* why the last transfer failed */
    long code;
    struct buf body;
    bool body_over;
    struct stream *stream; /* the stream being read, or NULL */
};

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

/* The write callback's part for a stream: lines once the answer is a
 * 200, each bounded; anything else is kept as an answer to report. 0
 * stops the transfer (why in c->err). */
static size_t
stream_feed(struct ctl *c, const char *p, size_t n)
{
    struct stream *f = c->stream;
    size_t left = n, seg;
    const char *nl;
    long code = 0;

    if (!f->started) {
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &code);
        f->started = true;
        f->ok = code == 200;
    }
    if (!f->ok) {
        if (buf_add(&c->body, p, n, CTL_BODY_MAX) == 0)
            return n;
        c->body_over = true;
        return 0;
    }
    while (left > 0) {
        nl = memchr(p, '\n', left);
        seg = nl != NULL ? (size_t)(nl - p) : left;
        if (buf_add(&f->line, p, seg, CTL_BODY_MAX) != 0) {
            snprintf(c->err, sizeof(c->err),
                     "a line of %s is larger than " CTL_BODY_MAX_TEXT
                     " (or out of memory)",
                     f->what);
            f->ended = true;
            return 0;
        }
        if (nl == NULL)
            break;
        if (f->cb(f->line.data, f->line.len, c->err, sizeof(c->err), f->arg) !=
            0) {
            f->ended = true;
            return 0;
        }
        f->line.len = 0;
        p += seg + 1;
        left -= seg + 1;
    }
    return n;
}

static size_t
on_body(char *p, size_t size, size_t nmemb, void *arg)
{
    struct ctl *c = arg;
    size_t n = size * nmemb;

    if (c->stream != NULL)
        return stream_feed(c, p, n);
    if (buf_add(&c->body, p, n, CTL_BODY_MAX) != 0) {
        c->body_over = true;
        return 0;
    }
    return n;
}

static int
on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow,
            curl_off_t ultotal, curl_off_t ulnow)
{
    struct ctl *c = arg;

    return *c->stop != 0;
}

const char *
ctl_target(const struct ctl *c)
{
    return c->socket != NULL ? c->socket : c->base;
}

/* The header list: JSON wanted, no form Content-Type on our empty POSTs,
 * and the token. The token's copies are wiped in ctl_free. */
static int
add_headers(struct ctl *c, const char *token_file, char *err, size_t errlen)
{
    char terr[512], *token = NULL, *line = NULL;
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
        if (upstream_read_token(token_file, &token, terr, sizeof(terr)) != 0) {
            snprintf(err, errlen, "--token-file %s", terr);
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
    snprintf(err, errlen, "out of memory");
out:
    free(line);
    upstream_token_free(token);
    return result;
}

/* The easy handle's options, the same for every request. */
static int
set_options(struct ctl *c)
{
    CURL *h = c->curl;

    if ((c->socket != NULL && curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH,
                                               c->socket) != CURLE_OK) ||
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
        /* reapd is on this node or a known address: never a proxy. */
        curl_easy_setopt(h, CURLOPT_PROXY, "") != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_HTTP_VERSION,
                         (long)CURL_HTTP_VERSION_1_1) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_MS) !=
            CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->headers) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_USERAGENT, "reapctl/" REAPD_VERSION) !=
            CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_WRITEDATA, c) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress) !=
            CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, c) != CURLE_OK)
        return -1;
    return 0;
}

/* Where to connect: 0, or -1 with why in `err` (a usage error). */
static int
set_target(struct ctl *c, const char *socket, const char *url, char *err,
           size_t errlen)
{
    size_t len;

    if (url != NULL) {
        len = strlen(url);
        if ((strncmp(url, "http://", 7) != 0 &&
             strncmp(url, "https://", 8) != 0) ||
            len > URL_MAX || strpbrk(url, "?# \t\r\n") != NULL) {
            snprintf(err, errlen,
                     "--url wants http://HOST:PORT, not \"%.80s\"", url);
            return -1;
        }
        while (len > 0 && url[len - 1] == '/')
            len--;
        c->base = strndup(url, len);
        return 0;
    }
    if (socket[0] == '\0' || strlen(socket) >= 108) {
        snprintf(err, errlen, "--socket: not a socket path: \"%.80s\"",
                 socket);
        return -1;
    }
    c->socket = socket;
    c->base = strdup("http://localhost");
    return 0;
}

struct ctl *
ctl_new(const char *socket, const char *url, const char *token_file,
        const volatile sig_atomic_t *stop, bool *bad_target, char *err,
        size_t errlen)
{
    struct ctl *c = calloc(1, sizeof(*c));

    *bad_target = false;
    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->stop = stop;
    if (set_target(c, socket, url, err, errlen) != 0) {
        *bad_target = true;
        goto fail;
    }
    c->curl = curl_easy_init();
    if (c->base == NULL || c->curl == NULL) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    c->token_file = token_file;
    if (add_headers(c, token_file, err, errlen) != 0)
        goto fail;
    if (set_options(c) != 0) {
        snprintf(err, errlen, "libcurl refused an option: %s", c->errbuf);
        goto fail;
    }
    return c;
fail:
    ctl_free(c);
    return NULL;
}

void
ctl_free(struct ctl *c)
{
    struct curl_slist *l;

    if (c == NULL)
        return;
    if (c->curl != NULL)
        curl_easy_cleanup(c->curl);
    for (l = c->headers; l != NULL; l = l->next)
        explicit_bzero(l->data, strlen(l->data));
    curl_slist_free_all(c->headers);
    free(c->base);
    free(c->body.data);
    free(c);
}

/* What a transfer that libcurl failed with `rc` came to, said in
 * c->err. */
static enum ctl_xfer
xfer_failed(struct ctl *c, CURLcode rc, const char *method, const char *path)
{
    long os_errno = 0;
    const char *why;

    curl_easy_getinfo(c->curl, CURLINFO_OS_ERRNO, &os_errno);
    why = c->errbuf[0] != '\0' ? c->errbuf : curl_easy_strerror(rc);
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
        snprintf(c->err, sizeof(c->err), "cannot reach reapd at %s: %s",
                 ctl_target(c), os_errno != 0 ? strerror((int)os_errno) : why);
        return CTL_UNREACHABLE;
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
        snprintf(c->err, sizeof(c->err),
                 "the connection to reapd at %s broke: %s", ctl_target(c),
                 why);
        return CTL_CUT;
    case CURLE_OPERATION_TIMEDOUT:
        snprintf(c->err, sizeof(c->err),
                 "reapd at %s did not answer in time: %s", ctl_target(c), why);
        break;
    case CURLE_FILESIZE_EXCEEDED:
        snprintf(c->err, sizeof(c->err),
                 "reapd's answer is larger than " CTL_BODY_MAX_TEXT);
        break;
    case CURLE_WRITE_ERROR:
        /* The stream reader left its reason in c->err; else the body
         * went over its bound or memory ran out. */
        if (c->err[0] == '\0')
            snprintf(c->err, sizeof(c->err), "%s",
                     c->body_over
                         ? "reapd's answer is larger than " CTL_BODY_MAX_TEXT
                           " (or out of memory)"
                         : why);
        break;
    default:
        snprintf(c->err, sizeof(c->err), "%s %s at %s: %s", method, path,
                 ctl_target(c), why);
        break;
    }
    return CTL_FAILED;
}

enum ctl_xfer
ctl_request(struct ctl *c, const char *method, const char *path,
            long timeout_ms)
{
    size_t len = strlen(c->base) + strlen(path) + 1;
    enum ctl_xfer x;
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
        return CTL_FAILED;
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
        rc = curl_easy_setopt(
            c->curl, CURLOPT_MAXFILESIZE_LARGE,
            (curl_off_t)(c->stream != NULL ? 0 : CTL_BODY_MAX));
    if (rc == CURLE_OK)
        rc = curl_easy_perform(c->curl);
    if (*c->stop) {
        x = CTL_STOPPED;
    } else if (rc == CURLE_OK) {
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &c->code);
        x = CTL_ANSWER;
    } else {
        x = xfer_failed(c, rc, method, path);
    }
    free(url);
    return x;
}

enum ctl_xfer
ctl_stream(struct ctl *c, const char *path, const char *what, ctl_line_cb cb,
           void *arg, bool *opened, bool *ended)
{
    struct stream f = {.what = what, .cb = cb, .arg = arg};
    enum ctl_xfer x;

    c->stream = &f;
    x = ctl_request(c, "GET", path, 0);
    c->stream = NULL;
    free(f.line.data);
    *opened = f.ok;
    *ended = f.ended;
    return x;
}

long
ctl_code(const struct ctl *c)
{
    return c->code;
}

const char *
ctl_body(const struct ctl *c, size_t *len)
{
    *len = c->body.len;
    return c->body.data != NULL ? c->body.data : "";
}

const char *
ctl_error(const struct ctl *c)
{
    return c->err;
}

bool
ctl_on_socket(const struct ctl *c)
{
    return c->socket != NULL;
}

const char *
ctl_token_file(const struct ctl *c)
{
    return c->token_file;
}
