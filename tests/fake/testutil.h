/*
 * testutil — the helpers every test shares, so that no test writes them
 * again: running the loop until a condition holds or for a while; reapd's
 * parts wired against the fake engine; reading fixtures and writing
 * files; a child process; a free TCP port and a test HTTP server's
 * binding; ids and label sets at and past the bounds; a growing string.
 * Each one fails the running cmocka test when something it needs goes
 * wrong (a fixture that cannot be read, a port that cannot be bound).
 * Memory a function returns is the caller's to free unless its comment
 * says who owns it.
 */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>

struct evhttp;
struct evhttp_request;
struct policy_label;
struct loop;

/* Applies TEST_FILTER and TEST_SKIP from the environment (cmocka's
 * patterns on test names: which to run, which to leave out), for main()
 * before cmocka_run_group_tests. */
void tu_test_filters(void);

/* ---- running the loop --------------------------------------------------- */

/* loop_now_ms() `ms` from now, for tu_turn(). */
uint64_t tu_deadline(int ms);

/* The same for a wait's upper bound (TU_RUN_UNTIL): `ms` times
 * TU_TIME_SCALE from the environment (1 to 100, default 1). The unit
 * tests under valgrind run ten times slower and set it; a fixed window,
 * tu_run_for or a count over tu_deadline, is never scaled. */
uint64_t tu_wait_deadline(int ms);

/*
 * One turn of the loop (EVLOOP_ONCE) that waits at most 10 ms for
 * something to happen, so a caller looks at its condition and the clock
 * at least that often without any timer of its own. Returns false,
 * without turning, once `deadline` (a tu_deadline()) has passed.
 */
bool tu_turn(struct loop *l, uint64_t deadline);

/* Fails the running test: `what` did not hold within `ms`, at file:line
 * (TU_RUN_UNTIL's failure). */
void tu_fail_timeout(const char *what, int ms, const char *file, int line);

/*
 * Runs the loop until `expr` holds, looking at it before each turn;
 * fails the test, naming `expr` and the caller's line, when it still
 * does not hold after `ms`.
 */
#define TU_RUN_UNTIL(l, expr, ms)                                             \
    do {                                                                      \
        uint64_t tu_end_ = tu_wait_deadline(ms);                              \
        while (!(expr))                                                       \
            if (!tu_turn((l), tu_end_))                                       \
                tu_fail_timeout(#expr, (ms), __FILE__, __LINE__);             \
    } while (0)

/* Runs the loop for `ms` whatever happens. */
void tu_run_for(struct loop *l, int ms);

/* ---- reapd against the fake engine -------------------------------------- */

struct config;
struct docker;
struct fake_engine;
struct json_node;
struct reaper;
struct report_log;

#define TU_MAX_REPORTS 32

/* reapd's parts as main.c wires them (no store, no status endpoint, no
 * upstream), against the fake engine, in a directory of their own. */
struct tu_reapd {
    char dir[64];  /* /tmp/reapd-<name>-XXXXXX: the state directory */
    char sock[96]; /* the fake engine's socket, in dir */
    struct config *cfg;
    struct loop *l;
    struct fake_engine *fe;
    struct docker *d;
    struct report_log *rl;
    struct reaper *r;
    /* Each report the reaper made, parsed; more than TU_MAX_REPORTS
     * fail the test. */
    struct json_node *reports[TU_MAX_REPORTS];
    int nreports;
};

/*
 * Sets up `h` (zeroed by the caller): a new directory named after
 * `name`, the fake engine on a socket in it, a config of short waits
 * (2 s requests, reconnects within 200 ms, deletes polled every 20 ms and
 * retried from 20 to 100 ms), `delete_extra` spliced into its "delete"
 * object and `top` into the whole ("" for none; each starting with a
 * comma), then the loop, the docker client, the reports journal and the
 * reaper, not started. Fails the test if any part cannot be made.
 * tu_reapd_close() releases all of it.
 */
void tu_reapd_open(struct tu_reapd *h, const char *name,
                   const char *delete_extra, const char *top);

/* A docker client and a reaper (not started) on h's loop, config and
 * journal, their reports collected in h->reports: the last step of
 * tu_reapd_open(), and reapd's next run after the test freed h->d and
 * h->r (set to NULL) as a kill would. */
void tu_reapd_new_reaper(struct tu_reapd *h);

/* Frees what tu_reapd_open() made (h->d and h->r may be NULL) and the
 * reports, removes the journal, then the directory if nothing else is
 * left in it. */
void tu_reapd_close(struct tu_reapd *h);

/* The config in `text`, or the test fails with the parser's errors on
 * stderr. The caller frees it (config_free). */
struct config *tu_config(const char *text);

/* ---- files -------------------------------------------------------------- */

/*
 * The file dir/name in an allocation of exactly its size, without a
 * terminating NUL, so that a parser reading past the end shows under
 * ASan and valgrind; its size in *len. Fails the test if the file cannot
 * be read or is empty. The caller frees the result.
 */
void *tu_read_file(const char *dir, const char *name, size_t *len);

/* The same with a NUL after the last byte, for a caller that wants a
 * string, and an empty file is read as ""; `len` (the size without the
 * NUL) may be NULL. The caller frees the result. */
char *tu_read_text(const char *dir, const char *name, size_t *len);

/* Writes buf[0..len) as the whole of `path` (created 0600 or truncated);
 * fails the test if it cannot. */
void tu_write_file(const char *path, const void *buf, size_t len);

/* Whether some descriptor of this process is open on `path` (*found),
 * and then whether every such one is close-on-exec. */
bool tu_open_cloexec(const char *path, bool *found);

/* Removes the store's files in `dir` (reapd.db, reapd.db-wal,
 * reapd.db-shm), those there are. */
void tu_rm_store(const char *dir);

/* ---- processes ---------------------------------------------------------- */

/*
 * Runs child(arg) in a forked process, its return value the exit status,
 * with the default action for the signals cmocka catches (a crash there
 * must not resume the test runner in the child). Returns the exit status;
 * fails the test if the child was killed by a signal.
 */
int tu_fork(int (*child)(void *arg), void *arg);
/* The same, without judging: the child's wait status (WIFSIGNALED...),
 * for a caller that must clean up before it fails. */
int tu_fork_status(int (*child)(void *arg), void *arg);

/* No file of this process can grow any more (RLIMIT_FSIZE 0, SIGXFSZ
 * ignored), as on a full disk: for a child of tu_fork(). The limit it
 * had goes to *saved, for setrlimit(RLIMIT_FSIZE, saved) to give room
 * again. 0, or -1 if the limit could not be read or set. */
int tu_disk_full(struct rlimit *saved);

/* ---- network ------------------------------------------------------------ */

/* A TCP port on 127.0.0.1 nobody listens on right now (bound to 0, read
 * back, closed). */
int tu_free_port(void);

/* Binds `http` to 127.0.0.1 on a port the system picks; returns it. */
int tu_http_bind(struct evhttp *http);

/* The request's header `name` into out[0..len), "(none)" if absent. */
void tu_http_header(struct evhttp_request *req, const char *name, char *out,
                    size_t len);

/* ---- test data ---------------------------------------------------------- */

/* A report id (32 hex digits) and a container id (64) made of `n`, into
 * buffers of STORE_REPORT_ID_MAX + 1 and STORE_ID_MAX + 1 bytes. */
void tu_report_id(char *buf, unsigned n);
void tu_container_id(char *buf, unsigned n);

/* Labels and the bytes they point into, owned in one place: zero it to
 * start, tu_labset_free() frees all. */
struct tu_labset {
    struct policy_label *v;
    size_t n;
    char **mem;
    size_t nmem;
};

/* A string of `len` bytes `fill`, owned by `ls`. */
char *tu_labset_text(struct tu_labset *ls, size_t len, unsigned char fill);

/*
 * Fills `ls` (empty) with the most bounds.h lets a container keep:
 * LIMIT_LABELS_STORED labels of LIMIT_LABELS_STORED_BYTES together, as
 * LIMIT_POLICY_LABELS labels with the longest key and value and
 * LIMIT_LABELS labels sharing LIMIT_LABEL_BYTES; every byte one that
 * JSON escapes as \u00XX (six bytes for one). Keys differ in their first
 * two bytes.
 */
void tu_labset_max(struct tu_labset *ls);

/*
 * Fills `ls` (empty) with 5000 labels past every bound: first a key of
 * 1025 bytes (over LIMIT_LABEL_KEY), a key that is not UTF-8 (both with
 * the value "dropped"), "cut"="ok\xc3rest" (a value not UTF-8 after
 * "ok"); then keys "l0003", "l0004"... each with the value returned: 1700
 * euro signs (5100 bytes, over LIMIT_LABEL_VALUE), owned by `ls`.
 */
char *tu_labset_over(struct tu_labset *ls);

/* Frees every string and label `ls` owns; it is empty again. */
void tu_labset_free(struct tu_labset *ls);

/* ---- a growing string --------------------------------------------------- */

/* Zero it to start; p is NUL-terminated once anything was added; the
 * owner frees p. */
struct tu_sbuf {
    char *p;
    size_t len, cap;
};

/* Appends printf-style text. */
void tu_sb_printf(struct tu_sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Appends s[0..len), each control or non-ASCII byte and each backslash
 * as \xNN, so that any bytes compare and print as text. */
void tu_sb_bytes(struct tu_sbuf *b, const char *s, size_t len);

#endif
