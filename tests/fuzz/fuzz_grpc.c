/*
 * fuzz_grpc — what comes back from containerd's socket: a gRPC response
 * body read by grpc_reader (agent/grpc.h) in chunks cut wherever the
 * input says, each message it yields decoded as every containerd answer
 * reapd reads (agent/containerd.h: an Events envelope, a Tasks.List and a
 * Tasks.Get answer); the same body as a unary answer (grpc_unframe); and
 * the call's trailers (grpc_status).
 *
 * Input: byte 0 holds flags (bits 0-2: how many chunk-size bytes follow;
 * bit 3: a 64-byte message bound instead of the default; bit 4: the
 * message callback asks to stop at the second message; bit 5: the rest
 * is trailers, not a body), then the chunk sizes, then the body. As
 * trailers: a byte for the message buffer size, then grpc-status text,
 * a NUL, and grpc-message text (absent without the NUL).
 *
 * Checked: the messages, the error state and the bytes held back are the
 * same whether the body came in chunks or in one piece; each decoder
 * keeps containerd.h's promises (fuzz.h); grpc_unframe accepts exactly a
 * body that is one well-formed frame; grpc_status gives a code in 0..16
 * and a message that is NUL-terminated, bounded, free of control bytes,
 * and the text itself when there was nothing to decode.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "grpc.h"

#define F_CHUNKS   0x07
#define F_SMALL    0x08
#define F_STOP     0x10
#define F_TRAILERS 0x20

#define SMALL_MAX   64
#define DEFAULT_MAX ((size_t)4 << 20)

struct seen {
    uint64_t hash; /* of every message, in order */
    size_t n;
    size_t max_msg;
    bool stop;   /* stop at the second message */
    bool decode; /* run the decoders (one of the two runs does) */
};

static int
on_msg(const uint8_t *msg, size_t len, void *arg)
{
    struct seen *s = arg;

    FUZZ_CHECK(msg != NULL);
    FUZZ_CHECK(len <= s->max_msg);
    s->hash = fuzz_hash(s->hash, &len, sizeof(len));
    s->hash = fuzz_hash(s->hash, msg, len);
    s->n++;
    if (s->decode) {
        fuzz_ctrd_envelope(msg, len);
        fuzz_ctrd_list(msg, len);
        fuzz_ctrd_get(msg, len);
    }
    return s->stop && s->n == 2;
}

struct run {
    struct seen seen;
    bool failed;
    size_t pending;
};

static void
run_reader(const uint8_t *body, size_t len, uint8_t flags,
           struct fuzz_chunks *ch, struct run *out)
{
    struct grpc_reader *r;
    size_t off = 0, k;
    int rc = 0;

    memset(out, 0, sizeof(*out));
    out->seen.hash = FUZZ_HASH_INIT;
    out->seen.max_msg = flags & F_SMALL ? SMALL_MAX : DEFAULT_MAX;
    out->seen.stop = (flags & F_STOP) != 0;
    out->seen.decode = ch != NULL;
    r = grpc_reader_new(flags & F_SMALL ? SMALL_MAX : 0, on_msg, &out->seen);
    FUZZ_CHECK(r != NULL);
    while (off < len) {
        k = ch != NULL ? fuzz_chunks_next(ch, len - off) : len - off;
        rc = grpc_reader_feed(r, body + off, k);
        off += k;
        FUZZ_CHECK(rc == 0 || rc == -1);
        /* Errors are sticky. */
        if (rc != 0)
            FUZZ_CHECK(grpc_reader_feed(r, body, len) == -1);
        FUZZ_CHECK((rc != 0) == (grpc_reader_error(r) != NULL));
        if (rc != 0)
            break;
    }
    out->failed = grpc_reader_error(r) != NULL;
    out->pending = out->failed ? 0 : grpc_reader_pending(r);
    FUZZ_CHECK(out->pending < 5 + out->seen.max_msg);
    grpc_reader_free(r);
}

static void
check_unframe(const uint8_t *body, size_t len, size_t max_msg)
{
    const uint8_t *msg = NULL;
    size_t msg_len = 0;
    uint64_t n;
    bool frame;

    n = len >= 5 ? (uint64_t)body[1] << 24 | (uint64_t)body[2] << 16 |
                       (uint64_t)body[3] << 8 | body[4]
                 : 0;
    frame = len >= 5 && body[0] == 0 && n == len - 5 && n <= max_msg;
    if (grpc_unframe(body, len, max_msg == DEFAULT_MAX ? 0 : max_msg, &msg,
                     &msg_len) == 0) {
        FUZZ_CHECK(frame);
        FUZZ_CHECK(msg == body + 5 && msg_len == len - 5);
    } else {
        FUZZ_CHECK(!frame);
    }
}

static bool
plain(const char *s)
{
    for (; *s != '\0'; s++)
        if (*s == '%' || (unsigned char)*s < 0x20 || *s == 0x7f)
            return false;
    return true;
}

static void
check_trailers(struct fuzz_in *in)
{
    size_t msglen = fuzz_byte(in), i, n;
    char *text = malloc(in->n + 1), *message = NULL, *msg = NULL;
    long want = -1;
    int rc;

    FUZZ_CHECK(text != NULL);
    memcpy(text, in->p, in->n);
    text[in->n] = '\0';
    if (strlen(text) < in->n)
        message = text + strlen(text) + 1;
    if (msglen > 0) {
        msg = malloc(msglen);
        FUZZ_CHECK(msg != NULL);
        memset(msg, 'x', msglen);
    }
    /* A plain decimal 0..16, perhaps followed by blanks, is that code. */
    n = strspn(text, "0123456789");
    if (n >= 1 && n <= 2 && strspn(text + n, " \t") == strlen(text + n))
        want = strtol(text, NULL, 10);
    rc = grpc_status(text, message, msg, msglen);
    FUZZ_CHECK(rc >= 0 && rc <= 16);
    if (want >= 0)
        FUZZ_CHECK(rc == (want <= 16 ? want : GRPC_UNKNOWN));
    if (msg != NULL) {
        FUZZ_CHECK(memchr(msg, '\0', msglen) != NULL);
        for (i = 0; msg[i] != '\0'; i++)
            FUZZ_CHECK((unsigned char)msg[i] >= 0x20 && msg[i] != 0x7f);
        if (message == NULL)
            FUZZ_CHECK(msg[0] == '\0');
        else if (plain(message) && strlen(message) < msglen)
            FUZZ_CHECK(strcmp(msg, message) == 0);
    }
    FUZZ_CHECK(grpc_status(NULL, message, msg, msglen) == -1);
    free(msg);
    free(text);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_in in = {data, size};
    struct fuzz_chunks ch;
    struct run cut, whole;
    uint8_t flags;

    fuzz_quiet_logs();
    flags = fuzz_byte(&in);
    if (flags & F_TRAILERS) {
        check_trailers(&in);
        return 0;
    }
    fuzz_chunks_init(&ch, &in, flags & F_CHUNKS);
    run_reader(in.p, in.n, flags, &ch, &cut);
    run_reader(in.p, in.n, flags, NULL, &whole);
    FUZZ_CHECK(cut.seen.n == whole.seen.n);
    FUZZ_CHECK(cut.seen.hash == whole.seen.hash);
    FUZZ_CHECK(cut.failed == whole.failed);
    FUZZ_CHECK(cut.pending == whole.pending);
    check_unframe(in.p, in.n, flags & F_SMALL ? SMALL_MAX : DEFAULT_MAX);
    return 0;
}
