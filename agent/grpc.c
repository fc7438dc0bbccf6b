/*
 * grpc — gRPC message framing and call status; see grpc.h.
 *
 * The reader is fed whatever libcurl hands over, so a frame's 5-byte
 * prefix and its message may be cut anywhere. The length in a prefix is
 * believed only after it was checked against the bound: a peer cannot
 * make us allocate more than one bounded message.
 */
#include "grpc.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX_LEN      5
#define DEFAULT_MAX_MSG (4u * 1024 * 1024)

struct grpc_reader {
    size_t max_msg;
    grpc_msg_cb cb;
    void *arg;

    uint8_t prefix[PREFIX_LEN]; /* the current frame's prefix so far */
    size_t have_prefix;
    size_t msg_len;  /* valid once have_prefix == PREFIX_LEN */
    uint8_t *buf;    /* the message so far, when it spans chunks */
    size_t have_msg; /* bytes of it in buf */
    size_t cap;

    bool failed;
    char err[96];
};

uint8_t *
grpc_frame(const uint8_t *msg, size_t len, size_t *out_len)
{
    uint8_t *f;

    if ((uint64_t)len > UINT32_MAX)
        return NULL;
    f = malloc(len + PREFIX_LEN);
    if (f == NULL)
        return NULL;
    f[0] = 0; /* never compressed */
    f[1] = (uint8_t)(len >> 24);
    f[2] = (uint8_t)(len >> 16);
    f[3] = (uint8_t)(len >> 8);
    f[4] = (uint8_t)len;
    if (len > 0)
        memcpy(f + PREFIX_LEN, msg, len);
    *out_len = len + PREFIX_LEN;
    return f;
}

static uint32_t
prefix_len(const uint8_t *p)
{
    return (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 |
           (uint32_t)p[4];
}

/* NULL, or why the prefix is not one we accept. */
static const char *
check_prefix(const uint8_t *p, size_t max_msg, char *err, size_t errlen)
{
    uint32_t n = prefix_len(p);

    if (p[0] == 1) {
        /* We never send grpc-accept-encoding, so this is a broken peer. */
        snprintf(err, errlen, "compressed gRPC frame (never requested)");
        return err;
    }
    if (p[0] != 0) {
        snprintf(err, errlen, "bad gRPC frame flag 0x%02x", p[0]);
        return err;
    }
    if (n > max_msg) {
        snprintf(err, errlen, "gRPC message of %lu bytes over the %zu limit",
                 (unsigned long)n, max_msg);
        return err;
    }
    return NULL;
}

int
grpc_unframe(const uint8_t *buf, size_t len, size_t max_msg,
             const uint8_t **msg, size_t *msg_len)
{
    char err[96];

    if (max_msg == 0)
        max_msg = DEFAULT_MAX_MSG;
    if (buf == NULL || len < PREFIX_LEN)
        return -1;
    if (check_prefix(buf, max_msg, err, sizeof(err)) != NULL)
        return -1;
    if ((uint64_t)prefix_len(buf) != (uint64_t)(len - PREFIX_LEN))
        return -1;
    *msg = buf + PREFIX_LEN;
    *msg_len = len - PREFIX_LEN;
    return 0;
}

struct grpc_reader *
grpc_reader_new(size_t max_msg, grpc_msg_cb cb, void *arg)
{
    struct grpc_reader *r = calloc(1, sizeof(*r));

    if (r == NULL)
        return NULL;
    r->max_msg = max_msg ? max_msg : DEFAULT_MAX_MSG;
    r->cb = cb;
    r->arg = arg;
    return r;
}

void
grpc_reader_free(struct grpc_reader *r)
{
    if (r == NULL)
        return;
    free(r->buf);
    free(r);
}

static int
grpc_fail(struct grpc_reader *r, const char *why)
{
    if (!r->failed) {
        r->failed = true;
        if (why != r->err)
            snprintf(r->err, sizeof(r->err), "%s", why);
    }
    return -1;
}

/* Hands one complete message to the callback; the frame is then done. */
static int
deliver(struct grpc_reader *r, const uint8_t *msg, size_t len)
{
    static const uint8_t empty[1];

    r->have_prefix = 0;
    r->have_msg = 0;
    r->msg_len = 0;
    if (r->cb(len > 0 ? msg : empty, len, r->arg) != 0)
        return grpc_fail(r, "stopped by the message callback");
    return 0;
}

int
grpc_reader_feed(struct grpc_reader *r, const uint8_t *buf, size_t len)
{
    size_t take;

    if (r->failed)
        return -1;
    while (len > 0 || (r->have_prefix == PREFIX_LEN && r->msg_len == 0)) {
        if (r->have_prefix < PREFIX_LEN) {
            take = PREFIX_LEN - r->have_prefix;
            if (take > len)
                take = len;
            memcpy(r->prefix + r->have_prefix, buf, take);
            r->have_prefix += take;
            buf += take;
            len -= take;
            if (r->have_prefix < PREFIX_LEN)
                break;
            if (check_prefix(r->prefix, r->max_msg, r->err, sizeof(r->err)) !=
                NULL)
                return grpc_fail(r, r->err);
            r->msg_len = prefix_len(r->prefix);
            r->have_msg = 0;
            continue;
        }
        if (r->have_msg == 0 && len >= r->msg_len) {
            /* The whole message is in this chunk: no copy. */
            const uint8_t *m = buf;
            size_t n = r->msg_len;

            buf += n;
            len -= n;
            if (deliver(r, m, n) != 0)
                return -1;
            continue;
        }
        if (r->cap < r->msg_len) {
            uint8_t *nb = realloc(r->buf, r->msg_len);

            if (nb == NULL)
                return grpc_fail(r, "out of memory");
            r->buf = nb;
            r->cap = r->msg_len;
        }
        take = r->msg_len - r->have_msg;
        if (take > len)
            take = len;
        memcpy(r->buf + r->have_msg, buf, take);
        r->have_msg += take;
        buf += take;
        len -= take;
        if (r->have_msg < r->msg_len)
            break;
        if (deliver(r, r->buf, r->msg_len) != 0)
            return -1;
    }
    return 0;
}

const char *
grpc_reader_error(const struct grpc_reader *r)
{
    return r->failed ? r->err : NULL;
}

size_t
grpc_reader_pending(const struct grpc_reader *r)
{
    return r->have_prefix + r->have_msg;
}

static int
hex_value(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/*
 * grpc-message is percent-encoded UTF-8. Decoded control bytes (and
 * NUL) become '?': the text ends up in one-line log records and reports.
 * A '%' not followed by two hex digits is kept as it is, as gRPC's
 * spec asks of a lenient decoder.
 */
static void
percent_decode(const char *in, char *out, size_t outlen)
{
    size_t o = 0;

    if (out == NULL || outlen == 0)
        return;
    while (*in != '\0' && o + 1 < outlen) {
        unsigned char ch = (unsigned char)*in;

        if (ch == '%' && hex_value(in[1]) >= 0 && hex_value(in[2]) >= 0) {
            ch = (unsigned char)(hex_value(in[1]) * 16 + hex_value(in[2]));
            in += 3;
        } else {
            in++;
        }
        out[o++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    out[o] = '\0';
}

int
grpc_status(const char *status_text, const char *message_text, char *msg,
            size_t msglen)
{
    int code = 0;
    size_t i, n;

    if (msg != NULL && msglen > 0)
        msg[0] = '\0';
    if (status_text == NULL)
        return -1;
    if (message_text != NULL)
        percent_decode(message_text, msg, msglen);
    n = strlen(status_text);
    while (n > 0 && (status_text[n - 1] == ' ' || status_text[n - 1] == '\t'))
        n--;
    if (n == 0 || n > 2)
        return GRPC_UNKNOWN;
    for (i = 0; i < n; i++) {
        if (status_text[i] < '0' || status_text[i] > '9')
            return GRPC_UNKNOWN;
        code = code * 10 + (status_text[i] - '0');
    }
    return code <= 16 ? code : GRPC_UNKNOWN;
}
