/*
 * walbuf — the WAL write-gathering VFS; see walbuf.h.
 *
 * The frame layout it relies on is the WAL file format's
 * (https://sqlite.org/fileformat2.html#walformat): a 32-byte header at
 * offset 0, then frames of a 24-byte header and a page, and a frame whose
 * header's second word (the database size after the commit) is not zero
 * ends a transaction. Only that word is read, and only to know when to
 * write out early: whatever SQLite does next with the file writes out
 * first anyway, so a reading of the format that went wrong would cost
 * a commit's durability against a crash of reapd before its next write,
 * never the file's consistency.
 */
#include "walbuf.h"

#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WAL_HEADER       32
#define WAL_FRAME_HEADER 24

struct walbuf {
    sqlite3_vfs vfs; /* first: SQLite hands it back as sqlite3_vfs * */
    sqlite3_vfs *parent;
    size_t cap;
    bool registered;
    char name[48];
    atomic_ullong writes, flushes, commit_flushes;
};

/* A WAL file: ours, then the parent's file (`real`) in the same block. */
struct wal_file {
    sqlite3_file base;
    sqlite3_file *real;
    struct walbuf *wb;
    unsigned char *buf; /* NULL until the first write; cap bytes */
    size_t len;         /* bytes pending, from offset `off` */
    sqlite3_int64 off;
    bool commit; /* the pending frame header is a commit's */
};

/* The parent's file follows ours, aligned for anything it holds. */
#define REAL_OFFSET                                                           \
    ((sizeof(struct wal_file) + sizeof(max_align_t) - 1) /                    \
     sizeof(max_align_t) * sizeof(max_align_t))

static uint32_t
be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           (uint32_t)p[3];
}

/* Writes what is pending. Whatever happens, nothing is pending after:
 * a failed write is that write's error, and SQLite undoes the
 * transaction it was part of. */
static int
flush(struct wal_file *f, bool at_commit)
{
    int rc;

    if (f->len == 0)
        return SQLITE_OK;
    rc = f->real->pMethods->xWrite(f->real, f->buf, (int)f->len, f->off);
    f->len = 0;
    f->commit = false;
    atomic_fetch_add_explicit(&f->wb->flushes, 1, memory_order_relaxed);
    if (at_commit)
        atomic_fetch_add_explicit(&f->wb->commit_flushes, 1,
                                  memory_order_relaxed);
    return rc;
}

static int
w_close(sqlite3_file *file)
{
    struct wal_file *f = (struct wal_file *)file;
    int rc = flush(f, false);
    int rc2 = f->real->pMethods->xClose(f->real);

    free(f->buf);
    f->buf = NULL;
    return rc != SQLITE_OK ? rc : rc2;
}

static int
w_read(sqlite3_file *file, void *p, int amt, sqlite3_int64 off)
{
    struct wal_file *f = (struct wal_file *)file;
    int rc = flush(f, false);

    if (rc != SQLITE_OK)
        return rc;
    return f->real->pMethods->xRead(f->real, p, amt, off);
}

static int
w_write(sqlite3_file *file, const void *p, int amt, sqlite3_int64 off)
{
    struct wal_file *f = (struct wal_file *)file;
    bool was_commit = f->commit;
    int rc;

    atomic_fetch_add_explicit(&f->wb->writes, 1, memory_order_relaxed);
    /* Anything but the write that follows the pending ones in the file
     * (an earlier frame rewritten, the header at 0 after a restart) goes
     * after them, as SQLite issued it. */
    if (f->len > 0 &&
        (off != f->off + (sqlite3_int64)f->len || f->len + amt > f->wb->cap)) {
        rc = flush(f, false);
        if (rc != SQLITE_OK)
            return rc;
    }
    if (f->buf == NULL && amt <= (int)f->wb->cap)
        f->buf = malloc(f->wb->cap);
    if (f->buf == NULL || amt > (int)f->wb->cap)
        return f->real->pMethods->xWrite(f->real, p, amt, off);
    if (f->len == 0)
        f->off = off;
    memcpy(f->buf + f->len, p, (size_t)amt);
    f->len += (size_t)amt;
    if (amt == WAL_FRAME_HEADER && off >= WAL_HEADER) {
        f->commit = be32((const unsigned char *)p + 4) != 0;
        return SQLITE_OK;
    }
    /* The page of a commit frame: the transaction is whole. */
    if (was_commit)
        return flush(f, true);
    return SQLITE_OK;
}

static int
w_truncate(sqlite3_file *file, sqlite3_int64 size)
{
    struct wal_file *f = (struct wal_file *)file;
    int rc = flush(f, false);

    if (rc != SQLITE_OK)
        return rc;
    return f->real->pMethods->xTruncate(f->real, size);
}

static int
w_sync(sqlite3_file *file, int flags)
{
    struct wal_file *f = (struct wal_file *)file;
    int rc = flush(f, false);

    if (rc != SQLITE_OK)
        return rc;
    return f->real->pMethods->xSync(f->real, flags);
}

static int
w_file_size(sqlite3_file *file, sqlite3_int64 *size)
{
    struct wal_file *f = (struct wal_file *)file;
    int rc = flush(f, false);

    if (rc != SQLITE_OK)
        return rc;
    return f->real->pMethods->xFileSize(f->real, size);
}

static int
w_lock(sqlite3_file *file, int lock)
{
    struct wal_file *f = (struct wal_file *)file;

    return f->real->pMethods->xLock(f->real, lock);
}

static int
w_unlock(sqlite3_file *file, int lock)
{
    struct wal_file *f = (struct wal_file *)file;

    return f->real->pMethods->xUnlock(f->real, lock);
}

static int
w_check_reserved_lock(sqlite3_file *file, int *out)
{
    struct wal_file *f = (struct wal_file *)file;

    return f->real->pMethods->xCheckReservedLock(f->real, out);
}

/* A file control may act on the file's contents (a size hint, a
 * persistence setting read with its size): pending writes go first. */
static int
w_file_control(sqlite3_file *file, int op, void *arg)
{
    struct wal_file *f = (struct wal_file *)file;
    int rc = flush(f, false);

    if (rc != SQLITE_OK)
        return rc;
    if (op == SQLITE_FCNTL_VFSNAME) {
        /* Said as "walbuf/unix", the shape SQLite's own shims use. */
        int rc2 = f->real->pMethods->xFileControl(f->real, op, arg);
        char **name = arg;

        if (rc2 == SQLITE_OK && *name != NULL) {
            char *both = sqlite3_mprintf("walbuf/%s", *name);

            sqlite3_free(*name);
            *name = both;
        }
        return rc2;
    }
    return f->real->pMethods->xFileControl(f->real, op, arg);
}

static int
w_sector_size(sqlite3_file *file)
{
    struct wal_file *f = (struct wal_file *)file;

    return f->real->pMethods->xSectorSize(f->real);
}

static int
w_device_characteristics(sqlite3_file *file)
{
    struct wal_file *f = (struct wal_file *)file;

    return f->real->pMethods->xDeviceCharacteristics(f->real);
}

/* SQLite maps no WAL file and shares no memory through one; these pass
 * through only so that the methods are whole. */
static int
w_shm_map(sqlite3_file *file, int pg, int pgsz, int extend, void volatile **pp)
{
    struct wal_file *f = (struct wal_file *)file;

    return f->real->pMethods->xShmMap(f->real, pg, pgsz, extend, pp);
}

static int
w_shm_lock(sqlite3_file *file, int offset, int n, int flags)
{
    struct wal_file *f = (struct wal_file *)file;

    return f->real->pMethods->xShmLock(f->real, offset, n, flags);
}

static void
w_shm_barrier(sqlite3_file *file)
{
    struct wal_file *f = (struct wal_file *)file;

    f->real->pMethods->xShmBarrier(f->real);
}

static int
w_shm_unmap(sqlite3_file *file, int del)
{
    struct wal_file *f = (struct wal_file *)file;

    return f->real->pMethods->xShmUnmap(f->real, del);
}

static int
w_fetch(sqlite3_file *file, sqlite3_int64 off, int amt, void **pp)
{
    struct wal_file *f = (struct wal_file *)file;
    int rc = flush(f, false);

    if (rc != SQLITE_OK)
        return rc;
    return f->real->pMethods->xFetch(f->real, off, amt, pp);
}

static int
w_unfetch(sqlite3_file *file, sqlite3_int64 off, void *p)
{
    struct wal_file *f = (struct wal_file *)file;

    return f->real->pMethods->xUnfetch(f->real, off, p);
}

static const sqlite3_io_methods wal_methods = {
    .iVersion = 3,
    .xClose = w_close,
    .xRead = w_read,
    .xWrite = w_write,
    .xTruncate = w_truncate,
    .xSync = w_sync,
    .xFileSize = w_file_size,
    .xLock = w_lock,
    .xUnlock = w_unlock,
    .xCheckReservedLock = w_check_reserved_lock,
    .xFileControl = w_file_control,
    .xSectorSize = w_sector_size,
    .xDeviceCharacteristics = w_device_characteristics,
    .xShmMap = w_shm_map,
    .xShmLock = w_shm_lock,
    .xShmBarrier = w_shm_barrier,
    .xShmUnmap = w_shm_unmap,
    .xFetch = w_fetch,
    .xUnfetch = w_unfetch,
};

/* ---- the VFS: WAL files wrapped, everything else the parent's -------- */

static int
v_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags,
       int *out_flags)
{
    struct walbuf *wb = (struct walbuf *)vfs;
    struct wal_file *f = (struct wal_file *)file;
    sqlite3_file *real;
    int rc;

    /* Not a WAL: the parent's file fills the block, its methods are
     * called directly. */
    if (!(flags & SQLITE_OPEN_WAL))
        return wb->parent->xOpen(wb->parent, name, file, flags, out_flags);
    real = (sqlite3_file *)((char *)file + REAL_OFFSET);
    memset(f, 0, sizeof(*f));
    rc = wb->parent->xOpen(wb->parent, name, real, flags, out_flags);
    if (rc != SQLITE_OK || real->pMethods == NULL) {
        if (real->pMethods != NULL)
            real->pMethods->xClose(real);
        file->pMethods = NULL;
        return rc != SQLITE_OK ? rc : SQLITE_CANTOPEN;
    }
    /* A parent whose files lack the methods ours forward keeps its own:
     * nothing gathered, nothing broken. */
    if (real->pMethods->iVersion < wal_methods.iVersion) {
        real->pMethods->xClose(real);
        return wb->parent->xOpen(wb->parent, name, file, flags, out_flags);
    }
    f->real = real;
    f->wb = wb;
    file->pMethods = &wal_methods;
    return SQLITE_OK;
}

static int
v_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
    struct walbuf *wb = (struct walbuf *)vfs;

    return wb->parent->xDelete(wb->parent, name, sync_dir);
}

static int
v_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
    struct walbuf *wb = (struct walbuf *)vfs;

    return wb->parent->xAccess(wb->parent, name, flags, out);
}

static int
v_full_pathname(sqlite3_vfs *vfs, const char *name, int n, char *out)
{
    struct walbuf *wb = (struct walbuf *)vfs;

    return wb->parent->xFullPathname(wb->parent, name, n, out);
}

static void *
v_dl_open(sqlite3_vfs *vfs, const char *path)
{
    struct walbuf *wb = (struct walbuf *)vfs;

    return wb->parent->xDlOpen(wb->parent, path);
}

static void
v_dl_error(sqlite3_vfs *vfs, int n, char *msg)
{
    struct walbuf *wb = (struct walbuf *)vfs;

    wb->parent->xDlError(wb->parent, n, msg);
}

static void (*v_dl_sym(sqlite3_vfs *vfs, void *h, const char *sym))(void)
{
    struct walbuf *wb = (struct walbuf *)vfs;

    return wb->parent->xDlSym(wb->parent, h, sym);
}

static void
v_dl_close(sqlite3_vfs *vfs, void *h)
{
    struct walbuf *wb = (struct walbuf *)vfs;

    wb->parent->xDlClose(wb->parent, h);
}

static int
v_randomness(sqlite3_vfs *vfs, int n, char *out)
{
    struct walbuf *wb = (struct walbuf *)vfs;

    return wb->parent->xRandomness(wb->parent, n, out);
}

static int
v_sleep(sqlite3_vfs *vfs, int us)
{
    struct walbuf *wb = (struct walbuf *)vfs;

    return wb->parent->xSleep(wb->parent, us);
}

static int
v_current_time(sqlite3_vfs *vfs, double *out)
{
    struct walbuf *wb = (struct walbuf *)vfs;

    return wb->parent->xCurrentTime(wb->parent, out);
}

static int
v_get_last_error(sqlite3_vfs *vfs, int n, char *out)
{
    struct walbuf *wb = (struct walbuf *)vfs;

    return wb->parent->xGetLastError(wb->parent, n, out);
}

static int
v_current_time_int64(sqlite3_vfs *vfs, sqlite3_int64 *out)
{
    struct walbuf *wb = (struct walbuf *)vfs;

    return wb->parent->xCurrentTimeInt64(wb->parent, out);
}

struct walbuf *
walbuf_new(const char *parent, size_t cap)
{
    struct walbuf *wb;
    sqlite3_vfs *p;

    if (sqlite3_initialize() != SQLITE_OK)
        return NULL;
    p = sqlite3_vfs_find(parent);
    /* Version 2 is what is forwarded (the system-call overrides of
     * version 3 are SQLite's own test harness's). */
    if (p == NULL || p->iVersion < 2)
        return NULL;
    wb = calloc(1, sizeof(*wb));
    if (wb == NULL)
        return NULL;
    wb->parent = p;
    wb->cap = cap > 0 ? cap : WALBUF_CAP;
    snprintf(wb->name, sizeof(wb->name), "walbuf-%p", (void *)wb);
    wb->vfs.iVersion = 2;
    /* Room for ours and the parent's; an unwrapped file uses the
     * parent's part of it. */
    wb->vfs.szOsFile = (int)REAL_OFFSET + p->szOsFile;
    wb->vfs.mxPathname = p->mxPathname;
    wb->vfs.zName = wb->name;
    wb->vfs.xOpen = v_open;
    wb->vfs.xDelete = v_delete;
    wb->vfs.xAccess = v_access;
    wb->vfs.xFullPathname = v_full_pathname;
    wb->vfs.xDlOpen = v_dl_open;
    wb->vfs.xDlError = v_dl_error;
    wb->vfs.xDlSym = v_dl_sym;
    wb->vfs.xDlClose = v_dl_close;
    wb->vfs.xRandomness = v_randomness;
    wb->vfs.xSleep = v_sleep;
    wb->vfs.xCurrentTime = v_current_time;
    wb->vfs.xGetLastError = v_get_last_error;
    wb->vfs.xCurrentTimeInt64 = v_current_time_int64;
    if (sqlite3_vfs_register(&wb->vfs, 0) != SQLITE_OK) {
        free(wb);
        return NULL;
    }
    wb->registered = true;
    return wb;
}

void
walbuf_free(struct walbuf *wb)
{
    if (wb == NULL)
        return;
    if (wb->registered)
        sqlite3_vfs_unregister(&wb->vfs);
    free(wb);
}

const char *
walbuf_name(const struct walbuf *wb)
{
    return wb->name;
}

void
walbuf_stats(const struct walbuf *wb, struct walbuf_stats *out)
{
    /* Counters only: relaxed loads of fields the writer adds to. */
    struct walbuf *w = (struct walbuf *)wb;

    out->writes = atomic_load_explicit(&w->writes, memory_order_relaxed);
    out->flushes = atomic_load_explicit(&w->flushes, memory_order_relaxed);
    out->commit_flushes =
        atomic_load_explicit(&w->commit_flushes, memory_order_relaxed);
}
