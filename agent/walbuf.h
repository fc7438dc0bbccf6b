/*
 * walbuf — a SQLite VFS that writes a transaction's WAL frames with one
 * system call instead of two per page.
 *
 * SQLite writes each WAL frame as two writes, its 24-byte header and its
 * page: two system calls per page a transaction changes, each dear on a
 * virtual machine, and an exit makes several transactions. This VFS
 * sits on another (the store's: SQLite's "unix-excl") and, for WAL files
 * only, gathers
 * writes that follow each other in the file into a buffer, written out
 * when the transaction's commit frame is complete, when the buffer is
 * full, and before anything else is done with the file (a read, a sync,
 * a truncation, its size, its closing). So a commit is in the file when
 * SQLite's write of its last frame returns, as without it, and a failed
 * write fails that write: SQLite never counts a transaction whose frames
 * are not in the file. The database file and temporary files are the
 * parent's own, untouched.
 */
#ifndef REAPD_WALBUF_H
#define REAPD_WALBUF_H

#include <stddef.h>

struct walbuf;

/* Registers a VFS over `parent` (a registered VFS's name; NULL: the
 * default) under a name of its own (walbuf_name), not as the default.
 * `cap` is the buffer's size in bytes (0: WALBUF_CAP). NULL when the
 * parent is unknown or memory cannot be had. Free with walbuf_free, after
 * every database opened through it is closed. */
#define WALBUF_CAP (64 * 1024)
struct walbuf *walbuf_new(const char *parent, size_t cap);
/* Unregisters and frees it. NULL is fine. */
void walbuf_free(struct walbuf *wb);

/* The name to pass to sqlite3_open_v2; owned by `wb`. */
const char *walbuf_name(const struct walbuf *wb);

/* Writes to the WAL files since walbuf_new: as SQLite made them and as
 * they reached the parent. For tests and the benchmarks. */
struct walbuf_stats {
    unsigned long long writes;         /* xWrite calls SQLite made */
    unsigned long long flushes;        /* writes to the parent */
    unsigned long long commit_flushes; /* of them at a commit frame */
};
void walbuf_stats(const struct walbuf *wb, struct walbuf_stats *out);

#endif
