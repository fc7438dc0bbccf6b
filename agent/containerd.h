/*
 * containerd — the engine's containerd, spoken to directly over gRPC.
 *
 * Docker's API cannot tell whether a container's containerd task is gone,
 * nor the init process's exit status when dockerd's own task deletion
 * timed out (its die event then says 255). containerd can: Tasks.Get
 * answers NOT_FOUND once the task is deleted, and the TaskExit event
 * carries the true exit status. This client makes those calls (and the
 * deletions reapd performs when the engine gave up) over HTTP/2 with
 * prior knowledge on the unix socket, through the loop's libcurl multi
 * handle, never blocking. Requests carry the namespace header.
 *
 * The events subscription reconnects by itself forever with capped
 * backoff and jitter; each (re)subscription is announced so the caller
 * reconciles (containerd does not replay events).
 */
#ifndef REAPD_CONTAINERD_H
#define REAPD_CONTAINERD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct loop;
struct ctrd;
struct ctrd_req;

enum ctrd_status {
    CTRD_OK,
    CTRD_NOT_FOUND, /* grpc-status 5 */
    CTRD_FAILED,    /* any other status, transport error, bad frame */
};

/* containerd.v1.types.Status */
enum ctrd_task_status {
    CTRD_TASK_UNKNOWN = 0,
    CTRD_TASK_CREATED = 1,
    CTRD_TASK_RUNNING = 2,
    CTRD_TASK_STOPPED = 3,
    CTRD_TASK_PAUSED = 4,
    CTRD_TASK_PAUSING = 5,
};

/* One task (a containerd.v1.types.Process). Valid during the callback. */
struct ctrd_task {
    const char *container_id; /* the Docker container id (containerd
                                 1.6 leaves it out of Get/List answers;
                                 then the init process's id, which is
                                 the same, fills it) */
    const char *id;           /* process id: == container_id for init */
    uint32_t pid;
    enum ctrd_task_status status;
    uint32_t exit_status;
    int64_t exited_at_ns; /* 0 if unset */
};

typedef void (*ctrd_task_cb)(enum ctrd_status st, const struct ctrd_task *t,
                             const char *msg, void *arg);
typedef void (*ctrd_list_cb)(enum ctrd_status st, const struct ctrd_task *ts,
                             size_t n, const char *msg, void *arg);
/* Tasks.Delete answers with the exit status it collected. */
typedef void (*ctrd_delete_cb)(enum ctrd_status st, uint32_t exit_status,
                               const char *msg, void *arg);
typedef void (*ctrd_done_cb)(enum ctrd_status st, const char *msg, void *arg);

/*
 * `socket` is "auto" (try /run/containerd/containerd.sock, then
 * /var/run/docker/containerd/containerd.sock), "off", or a path; the
 * first path that exists is used when the first call or subscription
 * starts. Strings are copied. NULL when `socket` is "off" or on
 * allocation failure (`*off` tells which; may be NULL), or when
 * `namespace_` is not a containerd namespace name (letters, digits, '.',
 * '_', '-'; at most 76), since it goes into the events filter.
 * `request_timeout_ms` also bounds connecting.
 */
struct ctrd *ctrd_new(struct loop *l, const char *socket,
                      const char *namespace_, long request_timeout_ms,
                      long reconnect_max_ms, bool *off);
/* Cancels everything, no callbacks. Not from inside a ctrd callback. */
void ctrd_free(struct ctrd *c);

/* The socket in use (NULL until resolved, or none found for "auto"). */
const char *ctrd_socket(const struct ctrd *c);

/* Calls; each returns a handle valid until its callback runs or
 * ctrd_cancel, or NULL when it could not be started (no callback): no
 * socket found yet for "auto", or an id that is empty, longer than 128
 * bytes or not printable ASCII. Answers are bounded (List 4 MiB, the
 * others 64 KiB); a task is the init process (exec_id ""). */
struct ctrd_req *ctrd_task_get(struct ctrd *c, const char *container_id,
                               ctrd_task_cb cb, void *arg);
struct ctrd_req *ctrd_task_list(struct ctrd *c, ctrd_list_cb cb, void *arg);
/* No request timeout: the runtime may be slow, and a delete in progress
 * must not be abandoned half-way. */
struct ctrd_req *ctrd_task_delete(struct ctrd *c, const char *container_id,
                                  ctrd_delete_cb cb, void *arg);
struct ctrd_req *ctrd_container_delete(struct ctrd *c, const char *id,
                                       ctrd_done_cb cb, void *arg);
void ctrd_cancel(struct ctrd_req *r);

enum ctrd_event_kind {
    CTRD_EV_TASK_EXIT,   /* /tasks/exit */
    CTRD_EV_TASK_DELETE, /* /tasks/delete */
};

struct ctrd_event {
    enum ctrd_event_kind kind;
    const char *container_id; /* TaskExit/TaskDelete container_id */
    const char *id;           /* TaskExit/TaskDelete process id */
    uint32_t pid;
    uint32_t exit_status;
    int64_t exited_at_ns;
    int64_t timestamp_ns; /* the envelope's */
};

/*
 * containerd (grpc-go) sends Events.Subscribe's response headers only
 * with the first event, so "subscribed" is announced when the first event
 * arrives or once the request has been in flight for 250 ms without
 * failing, whichever is first. An answer refused at once (a trailers-only
 * error) is never announced. ctrd_watch_stop may be called from any of
 * these callbacks; no event is delivered after it.
 */
struct ctrd_watch_cbs {
    void (*on_subscribed)(void *arg); /* reconcile now */
    void (*on_event)(const struct ctrd_event *ev, void *arg);
    void (*on_lost)(const char *why, uint64_t retry_ms, void *arg);
};

int ctrd_watch_start(struct ctrd *c, const struct ctrd_watch_cbs *cbs,
                     void *arg);
void ctrd_watch_stop(struct ctrd *c);
bool ctrd_watch_connected(const struct ctrd *c);
uint64_t ctrd_watch_reconnects(const struct ctrd *c);

/* Decoders, exposed for tests: one protobuf message (unframed). 0 or -1.
 * Results point into `ctx`-owned memory until ctrd_decoded_free. A list
 * with any invalid entry fails as a whole (a task left out would look
 * deleted). Timestamps that are unset, Go's zero time or invalid are 0. */
struct ctrd_decoded;
int ctrd_decode_list(const uint8_t *msg, size_t len, struct ctrd_decoded **ctx,
                     const struct ctrd_task **tasks, size_t *n);
int ctrd_decode_get(const uint8_t *msg, size_t len, struct ctrd_decoded **ctx,
                    const struct ctrd_task **task);
/* An Envelope. Returns 0 and fills `ev` for the three topics we use, 1
 * for an envelope of another topic (ignored), -1 when malformed. */
int ctrd_decode_envelope(const uint8_t *msg, size_t len,
                         struct ctrd_decoded **ctx, struct ctrd_event *ev);
void ctrd_decoded_free(struct ctrd_decoded *ctx);

#endif
