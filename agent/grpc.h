/*
 * grpc — gRPC's message framing and status, as pure functions.
 *
 * On the wire a gRPC message is a 5-byte prefix (compressed flag, 4-byte
 * big-endian length) and then the protobuf bytes; a response stream is a
 * sequence of such frames, and the call's status arrives in the HTTP/2
 * trailers grpc-status / grpc-message. The transport (HTTP/2 over the
 * containerd socket) is libcurl's; this module only frames and unframes,
 * with every frame bounded before it is believed.
 */
#ifndef REAPD_GRPC_H
#define REAPD_GRPC_H

#include <stddef.h>
#include <stdint.h>

/* gRPC status codes we act on (others are kept as numbers). */
enum grpc_code {
    GRPC_OK = 0,
    GRPC_CANCELLED = 1,
    GRPC_UNKNOWN = 2,
    GRPC_DEADLINE_EXCEEDED = 4,
    GRPC_NOT_FOUND = 5,
    GRPC_ALREADY_EXISTS = 6,
    GRPC_FAILED_PRECONDITION = 9,
    GRPC_UNAVAILABLE = 14,
};

/*
 * Frames `msg` (len bytes) into a newly allocated buffer of len + 5 bytes
 * (caller frees). NULL on allocation failure or len > UINT32_MAX.
 */
uint8_t *grpc_frame(const uint8_t *msg, size_t len, size_t *out_len);

/*
 * A unary answer's body: exactly one uncompressed frame spanning all of
 * `buf`, its message at most `max_msg` bytes (0: 4 MiB). 0 with `*msg`
 * pointing into `buf` (borrowed, not copied), or -1 when the body is
 * anything else (none, truncated, trailing bytes, compressed, too large).
 */
int grpc_unframe(const uint8_t *buf, size_t len, size_t max_msg,
                 const uint8_t **msg, size_t *msg_len);

/* Called once per complete message; `msg` is valid during the call only
 * (for a zero-length message it is a valid pointer to no bytes). Return 0
 * to go on, non-zero to stop (the feed then fails). The callback must not
 * free the reader that is calling it. */
typedef int (*grpc_msg_cb)(const uint8_t *msg, size_t len, void *arg);

struct grpc_reader;

/* `max_msg` bounds one message (0: 4 MiB). NULL on allocation failure. */
struct grpc_reader *grpc_reader_new(size_t max_msg, grpc_msg_cb cb, void *arg);
void grpc_reader_free(struct grpc_reader *r);

/*
 * Feeds response bytes; chunk boundaries may fall anywhere. 0, or -1 on a
 * compressed frame (we never ask for compression), a frame flag other
 * than 0 or 1, an oversized frame, or a callback that asked to stop.
 * Errors are sticky.
 */
int grpc_reader_feed(struct grpc_reader *r, const uint8_t *buf, size_t len);
const char *grpc_reader_error(const struct grpc_reader *r); /* or NULL */
/* Bytes of an incomplete frame held back (a cut stream leaves these). */
size_t grpc_reader_pending(const struct grpc_reader *r);

/*
 * Returns the call's status code from grpc-status (a decimal 0..16;
 * anything else -> GRPC_UNKNOWN) and puts grpc-message (percent-decoded,
 * control bytes shown as '?', truncated to msglen - 1, NUL-terminated;
 * "" when absent) into `msg`, which may be NULL. `status_text` NULL (no
 * trailer) -> -1, the call did not finish properly.
 */
int grpc_status(const char *status_text, const char *message_text, char *msg,
                size_t msglen);

#endif
