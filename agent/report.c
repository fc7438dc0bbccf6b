/*
 * report — report JSON (with yajl_gen, so escaping is never ours to get
 * wrong), the bounds every writer of reapd's files holds to, the state
 * directory's check and the reports.jsonl appender; see report.h.
 */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <yajl/yajl_gen.h>

#include "json.h"
#include "jsonw.h"
#include "log.h"

/* What a report writes besides its labels, name and image must fit the
 * room bounds.h leaves for it in LIMIT_RECORD_BYTES, every byte escaped
 * as \u00XX (six): ten texts, the anomalies, and per label and anomaly
 * its quotes, colon and comma; 4 KiB for the keys, numbers and
 * punctuation of the rest. */
#define REPORT_TEXTS 10
_Static_assert(6 * (REPORT_TEXTS * REPORT_TEXT_MAX +
                    REPORT_ANOMALIES_MAX * REPORT_ANOMALY_MAX) +
                       6 * (LIMIT_LABELS_STORED + REPORT_ANOMALIES_MAX) +
                       4096 <=
                   LIMIT_RECORD_BYTES -
                       6 * (LIMIT_LABELS_STORED_BYTES + LIMIT_NAME_BYTES +
                            LIMIT_IMAGE_BYTES),
               "a report at its bounds fits LIMIT_RECORD_BYTES");

/* What the reader of report lines accepts: at least the bounds above,
 * and never less than earlier versions wrote (4096 labels, 64 KiB
 * strings), so a journal from before them stays readable. */
#define READ_ITEMS  LIMIT_READ_ITEMS
#define READ_STRING LIMIT_READ_STRING
_Static_assert(READ_STRING >= REPORT_TEXT_MAX,
               "the reader takes every string a writer writes");

struct report_log {
    int fd;
    char *dir; /* the state directory, without trailing slashes */
    char *path;
    int64_t end; /* size after the last whole line */
};

#define LOG_NAME "reports.jsonl"
/* How reports.jsonl is opened: appended to, never through a symlink,
 * never inherited by a child. */
#define LOG_FLAGS (O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY)
#define LOG_MODE  0640

/* FNV-1a, 64 bit, continued from `h`. */
static uint64_t
fnv64(uint64_t h, const char *s)
{
    for (; s != NULL && *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    h ^= 0xff; /* field separator, so ("ab","c") != ("a","bc") */
    h *= 0x100000001b3ull;
    return h;
}

void
report_make_id(struct report *r, const char *exit_key)
{
    /* Two independent 64-bit hashes: 128 bits, enough for a fleet. */
    uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;

    a = fnv64(fnv64(fnv64(a, r->node), r->container_id), exit_key);
    b = fnv64(fnv64(fnv64(b, exit_key), r->container_id), r->node);
    snprintf(r->report_id, sizeof(r->report_id), "%016llx%016llx",
             (unsigned long long)a, (unsigned long long)b);
}

int
report_parse_time(const char *s, int64_t *ms)
{
    struct tm tm;
    int n = 0, sign = 1, oh = 0, om = 0;
    int64_t frac_ms = 0, scale = 100;
    time_t t;
    const char *p;

    if (s == NULL)
        return -1;
    memset(&tm, 0, sizeof(tm));
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon,
               &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 ||
        n != 19)
        return -1;
    p = s + n;
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++) {
            frac_ms += (*p - '0') * scale;
            scale /= 10;
        }
    }
    if (*p == 'Z' && p[1] == '\0') {
        /* UTC */
    } else if ((*p == '+' || *p == '-') &&
               sscanf(p + 1, "%2d:%2d", &oh, &om) == 2 && strlen(p) == 6) {
        sign = *p == '-' ? -1 : 1;
    } else {
        return -1;
    }
    if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
        tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60 || oh > 23 ||
        om > 59)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    t = timegm(&tm);
    if (t == (time_t)-1)
        return -1;
    *ms = (int64_t)t * 1000 + frac_ms - sign * (oh * 3600 + om * 60) * 1000;
    return 0;
}

int64_t
report_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
report_now_rfc3339(char *buf, size_t len)
{
    struct timespec ts;
    struct tm tm;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
}

/* ---- bounds ------------------------------------------------------------- */

/* Bytes of the whole, valid UTF-8 character at `s` (`n` bytes there), or
 * 0 if none starts there. Strict (no overlong forms, surrogates or code
 * points past U+10FFFF): stricter than any JSON reader. */
static size_t
utf8_char(const unsigned char *s, size_t n)
{
    size_t len, i;
    uint32_t cp;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        len = 2;
        cp = s[0] & 0x1fu;
    } else if ((s[0] & 0xf0) == 0xe0) {
        len = 3;
        cp = s[0] & 0x0fu;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        len = 4;
        cp = s[0] & 0x07u;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if (len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff)))
        return 0;
    if (len == 4 && (cp < 0x10000 || cp > 0x10ffff))
        return 0;
    return len;
}

size_t
report_text_len(const char *s, size_t max)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = 0, avail, c;

    if (s == NULL)
        return 0;
    avail = strnlen(s, max);
    while (n < avail) {
        c = utf8_char(u + n, avail - n);
        if (c == 0)
            break;
        n += c;
    }
    return n;
}

void
report_gen_text(struct yajl_gen_t *g, const char *k, const char *v, size_t max)
{
    jw_str(g, k);
    jw_strn(g, v, v != NULL ? report_text_len(v, max) : 0);
}

static void
gen_key_str(yajl_gen g, const char *k, const char *v)
{
    report_gen_text(g, k, v, REPORT_TEXT_MAX);
}

size_t
report_gen_labels(struct yajl_gen_t *g, const struct policy_label *labels,
                  size_t n)
{
    size_t budget = LIMIT_LABELS_STORED_BYTES, kept = 0, i, klen, vlen;

    yajl_gen_map_open(g);
    for (i = 0; i < n && kept < LIMIT_LABELS_STORED; i++) {
        const char *k = labels[i].key, *v = labels[i].value;

        if (k == NULL)
            continue;
        klen = strnlen(k, LIMIT_LABEL_KEY + 1);
        if (klen > LIMIT_LABEL_KEY || report_text_len(k, klen) != klen)
            continue;
        vlen = report_text_len(v, LIMIT_LABEL_VALUE);
        if (klen + vlen > budget)
            continue;
        budget -= klen + vlen;
        yajl_gen_string(g, (const unsigned char *)k, klen);
        if (v != NULL)
            yajl_gen_string(g, (const unsigned char *)v, vlen);
        else
            yajl_gen_null(g);
        kept++;
    }
    yajl_gen_map_close(g);
    return kept;
}

/* ---- the report --------------------------------------------------------- */

char *
report_to_json(const struct report *r, size_t *len)
{
    yajl_gen g;
    size_t i;

    g = yajl_gen_alloc(NULL);
    if (g == NULL)
        return NULL;
    yajl_gen_map_open(g);
    gen_key_str(g, "report_id", r->report_id);
    jw_key_int_or_null(g, "schema_version", true, REPORT_SCHEMA_VERSION);
    gen_key_str(g, "node", r->node);
    gen_key_str(g, "container_id", r->container_id);
    report_gen_text(g, "name", r->name, LIMIT_NAME_BYTES);
    report_gen_text(g, "image", r->image, LIMIT_IMAGE_BYTES);
    jw_str(g, "labels");
    report_gen_labels(g, r->labels, r->nlabels);
    gen_key_str(g, "policy", r->policy);
    gen_key_str(g, "action", r->action);
    jw_key_int_or_null(g, "exit_code", r->exit_known, r->exit_code);
    gen_key_str(g, "exit_code_source",
                r->exit_known ? r->exit_code_source : NULL);
    jw_key_int_or_null(g, "engine_exit_code", r->has_engine_exit_code,
                       r->engine_exit_code);
    jw_key_bool(g, "oom_killed", r->oom_killed);
    gen_key_str(g, "started_at", r->started_at);
    gen_key_str(g, "finished_at", r->finished_at);
    jw_key_bool(g, "removed", r->removed);
    jw_str(g, "task_deleted");
    if (r->task_deleted < 0)
        yajl_gen_null(g);
    else
        yajl_gen_bool(g, r->task_deleted != 0);
    jw_key_int_or_null(g, "cleanup_ms", true, (long long)r->cleanup_ms);
    jw_key_int_or_null(g, "delete_attempts", true, r->delete_attempts);
    jw_str(g, "anomalies");
    yajl_gen_array_open(g);
    for (i = 0; i < r->nanomalies && i < REPORT_ANOMALIES_MAX; i++)
        yajl_gen_string(g, (const unsigned char *)r->anomalies[i],
                        report_text_len(r->anomalies[i], REPORT_ANOMALY_MAX));
    yajl_gen_array_close(g);
    gen_key_str(g, "removed_by", r->removed_by);
    gen_key_str(g, "reported_at", r->reported_at);
    yajl_gen_map_close(g);
    return jw_finish(g, len);
}

/* ---- the state directory ------------------------------------------------ */

/*
 * Opens `path` (`shown` in messages) as reapd's state directory: the
 * directory's fd, or -1 with errno and why in `err`. lstat says what the
 * name is; the open does not follow a symlink swapped in meanwhile, and
 * the checks are made on what was opened.
 */
static int
open_state_dir(const char *path, const char *shown, char *err, size_t errlen)
{
    struct stat lst, st;
    int fd = -1, e = 0;

    if (lstat(path, &lst) != 0) {
        e = errno;
        snprintf(err, errlen, "state_dir %s: %s", shown, strerror(e));
        goto out;
    }
    if (S_ISLNK(lst.st_mode)) {
        e = ELOOP;
        snprintf(err, errlen,
                 "state_dir %s is a symlink: refused (reapd's files could "
                 "be redirected through it); point state_dir at a real "
                 "directory",
                 shown);
        goto out;
    }
    if (!S_ISDIR(lst.st_mode)) {
        e = ENOTDIR;
        snprintf(err, errlen, "state_dir %s: not a directory", shown);
        goto out;
    }
    fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        e = errno;
        snprintf(err, errlen, "state_dir %s: %s", shown, strerror(e));
        goto out;
    }
    if (st.st_dev != lst.st_dev || st.st_ino != lst.st_ino) {
        e = EAGAIN;
        snprintf(err, errlen, "state_dir %s: replaced while being opened",
                 shown);
        goto out;
    }
    if (st.st_uid != geteuid()) {
        e = EPERM;
        snprintf(err, errlen,
                 "state_dir %s is owned by uid %lu, not by reapd's user "
                 "(uid %lu): refused; chown it to that user",
                 shown, (unsigned long)st.st_uid, (unsigned long)geteuid());
        goto out;
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        e = EPERM;
        snprintf(err, errlen,
                 "state_dir %s is writable by %s (mode %04o): refused; "
                 "chmod go-w it (0750 is what reapd creates)",
                 shown, (st.st_mode & S_IWOTH) != 0 ? "everyone" : "its group",
                 (unsigned)(st.st_mode & 07777));
        goto out;
    }
    return fd;
out:
    if (fd >= 0)
        close(fd);
    errno = e;
    return -1;
}

/* `dir` without trailing slashes (but "/" stays "/"), malloc'd. */
static char *
dir_name(const char *dir)
{
    size_t n = strlen(dir);
    char *d;

    while (n > 1 && dir[n - 1] == '/')
        n--;
    d = malloc(n + 1);
    if (d != NULL) {
        memcpy(d, dir, n);
        d[n] = '\0';
    }
    return d;
}

int
report_state_dir_check(const char *dir, char *err, size_t errlen)
{
    char *d = dir_name(dir);
    int fd;

    if (d == NULL) {
        snprintf(err, errlen, "state_dir %s: out of memory", dir);
        errno = ENOMEM;
        return -1;
    }
    fd = open_state_dir(d, dir, err, errlen);
    free(d);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

/* ---- reports.jsonl ------------------------------------------------------ */

struct report_log *
report_log_open(const char *dir)
{
    struct report_log *rl = NULL, *result = NULL;
    char why[512];
    size_t n;
    struct stat st;
    int dfd = -1, e = ENOMEM;

    rl = calloc(1, sizeof(*rl));
    if (rl == NULL)
        goto out;
    rl->fd = -1;
    rl->dir = dir_name(dir);
    if (rl->dir == NULL)
        goto out;
    n = strlen(rl->dir) + sizeof("/" LOG_NAME);
    rl->path = malloc(n);
    if (rl->path == NULL)
        goto out;
    snprintf(rl->path, n, "%s/" LOG_NAME, strcmp(rl->dir, "/") ? rl->dir : "");
    dfd = open_state_dir(rl->dir, dir, why, sizeof(why));
    if (dfd < 0) {
        e = errno;
        log_error(NULL, "%s", why);
        goto out;
    }
    /* Opened through the directory we checked, and never through a
     * symlink: nothing can make reapd append to another file. */
    rl->fd = openat(dfd, LOG_NAME, LOG_FLAGS | O_CREAT, LOG_MODE);
    if (rl->fd < 0 || fstat(rl->fd, &st) != 0) {
        e = errno;
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        e = EINVAL;
        log_error(NULL, "%s: not a regular file", rl->path);
        goto out;
    }
    /* Made just now (or by a rotation a crash cut short): its name is
     * made durable before any line is trusted to it. */
    if (st.st_size == 0 && fsync(dfd) != 0) {
        e = errno;
        goto out;
    }
    rl->end = (int64_t)st.st_size;
    result = rl;
    rl = NULL;
out:
    if (dfd >= 0)
        close(dfd);
    report_log_close(rl);
    if (result == NULL)
        errno = e;
    return result;
}

void
report_log_close(struct report_log *rl)
{
    if (rl == NULL)
        return;
    if (rl->fd >= 0)
        close(rl->fd);
    free(rl->dir);
    free(rl->path);
    free(rl);
}

const char *
report_log_path(const struct report_log *rl)
{
    return rl->path;
}

int
report_log_append_many(struct report_log *rl, const struct report_line *v,
                       size_t n)
{
    struct iovec iov[REPORT_LOG_LINES_MAX * 2];
    static const char nl = '\n';
    struct stat st;
    size_t i, total = 0, niov = 0;
    ssize_t w;
    int result = -1, e = 0;

    if (n == 0)
        return 0;
    if (n > REPORT_LOG_LINES_MAX) {
        errno = EINVAL;
        return -1;
    }
    for (i = 0; i < n; i++) {
        iov[niov].iov_base = (void *)v[i].json;
        iov[niov++].iov_len = v[i].len;
        iov[niov].iov_base = (void *)&nl;
        iov[niov++].iov_len = 1;
        total += v[i].len + 1;
    }
    if (fstat(rl->fd, &st) != 0) {
        e = errno;
        goto out;
    }
    do {
        w = writev(rl->fd, iov, (int)niov);
    } while (w < 0 && errno == EINTR);
    if (w != (ssize_t)total) {
        e = w < 0 ? errno : ENOSPC;
        /* Cut a partial line off, so the file holds whole lines only. */
        if (w > 0 && ftruncate(rl->fd, st.st_size) != 0)
            e = errno;
        goto out;
    }
    rl->end = (int64_t)st.st_size + (int64_t)total;
    if (fdatasync(rl->fd) != 0) {
        e = errno;
        goto out;
    }
    result = 0;
out:
    if (result != 0)
        errno = e;
    return result;
}

int
report_log_append(struct report_log *rl, const char *json, size_t len)
{
    struct report_line line = {.json = json, .len = len};

    return report_log_append_many(rl, &line, 1);
}

int64_t
report_log_end(const struct report_log *rl)
{
    return rl->end;
}

/* ---- rotation ----------------------------------------------------------- */

static report_rotate_hook rotate_hook;
static void *rotate_hook_arg;

void
report_log_set_rotate_hook(report_rotate_hook hook, void *arg)
{
    rotate_hook = hook;
    rotate_hook_arg = arg;
}

static void
rotate_step(enum report_rotate_step step)
{
    if (rotate_hook != NULL)
        rotate_hook(step, rotate_hook_arg);
}

/* reports.jsonl.<n>, or reports.jsonl for n 0, into buf. */
static void
kept_name(char *buf, size_t len, unsigned n)
{
    if (n == 0)
        snprintf(buf, len, LOG_NAME);
    else
        snprintf(buf, len, LOG_NAME ".%u", n);
}

/* Whether the name reports.jsonl in `dfd` still is the file appended to:
 * one moved away by hand (and maybe replaced) is not renamed again. */
static bool
still_ours(const struct report_log *rl, int dfd)
{
    struct stat mine, named;

    if (fstat(rl->fd, &mine) != 0 ||
        fstatat(dfd, LOG_NAME, &named, AT_SYMLINK_NOFOLLOW) != 0)
        return false;
    return mine.st_dev == named.st_dev && mine.st_ino == named.st_ino;
}

/*
 * Each step leaves a directory that a start handles as it is, whatever
 * the next step would have been (docs/state.md, "Rotation"): before the
 * rename, reports.jsonl is whole, and only older files are shifted (a
 * gap the next rotation steps over) or deleted (beyond keep); after it,
 * reports.jsonl is missing or empty, which a start takes as a new file,
 * since the caller rotates only what the state database already holds.
 */
int
report_log_rotate(struct report_log *rl, unsigned keep)
{
    char from[32], to[32] = "", why[512];
    unsigned i;
    int dfd = -1, fd = -1, e = 0, result = -1;
    bool renamed = false;

    if (keep > REPORT_LOG_KEEP_MAX) {
        errno = EINVAL;
        return -1;
    }
    dfd = open_state_dir(rl->dir, rl->dir, why, sizeof(why));
    if (dfd < 0) {
        e = errno;
        log_error(NULL, "%s", why);
        goto out;
    }
    if (!still_ours(rl, dfd)) {
        e = ESTALE;
        goto out;
    }
    rotate_step(REPORT_ROTATE_BEGIN);
    /* Whatever would fall beyond `keep` goes first: a crash after any of
     * these deletions leaves fewer old files, nothing else changed. */
    for (i = keep > 0 ? keep : 1; i <= REPORT_LOG_KEEP_MAX; i++) {
        kept_name(from, sizeof(from), i);
        if (unlinkat(dfd, from, 0) == 0) {
            rotate_step(REPORT_ROTATE_DROPPED);
        } else if (errno != ENOENT) {
            e = errno;
            goto out;
        }
    }
    /* Oldest first, so that no rename replaces a file still to move. */
    for (i = keep; i > 1; i--) {
        kept_name(from, sizeof(from), i - 1);
        kept_name(to, sizeof(to), i);
        if (renameat(dfd, from, dfd, to) == 0) {
            rotate_step(REPORT_ROTATE_SHIFTED);
        } else if (errno != ENOENT) {
            e = errno;
            goto out;
        }
    }
    /* Renamed even when none is kept: the old file stays whole until the
     * new one is in place, so that a failure can still put it back. */
    kept_name(to, sizeof(to), 1);
    if (renameat(dfd, LOG_NAME, dfd, to) != 0) {
        e = errno;
        goto out;
    }
    renamed = true;
    rotate_step(REPORT_ROTATE_RENAMED);
    fd = openat(dfd, LOG_NAME, LOG_FLAGS | O_CREAT | O_EXCL, LOG_MODE);
    if (fd < 0) {
        e = errno;
        goto out;
    }
    rotate_step(REPORT_ROTATE_CREATED);
    /* One sync for every change above: the new name holds before any
     * line is appended under it. */
    if (fsync(dfd) != 0) {
        e = errno;
        goto out;
    }
    rotate_step(REPORT_ROTATE_SYNCED);
    close(rl->fd);
    rl->fd = fd;
    fd = -1;
    rl->end = 0;
    if (keep == 0 && unlinkat(dfd, to, 0) == 0)
        rotate_step(REPORT_ROTATE_DROPPED);
    result = 0;
out:
    /* Not rotated after all: reports.jsonl goes back under its name,
     * over the new file if one was made. */
    if (result != 0 && renamed && renameat(dfd, to, dfd, LOG_NAME) != 0) {
        log_error(NULL,
                  "%s: a failed rotation could not rename it back (%s); "
                  "reports go to the state database only until reapd "
                  "restarts",
                  rl->path, strerror(errno));
        close(rl->fd);
        rl->fd = -1;
    }
    if (fd >= 0)
        close(fd);
    if (dfd >= 0)
        close(dfd);
    if (result != 0)
        errno = e;
    return result;
}

int
report_log_replay(struct report_log *rl, int64_t from, report_line_cb cb,
                  void *arg, int64_t *end)
{
    struct stat st;
    char *buf = NULL;
    size_t cap = 64 * 1024, have = 0, start, i;
    int64_t buf_at = from;  /* file offset of buf[0] */
    int64_t line_at = from; /* file offset of the line being read */
    bool skipping = false;  /* inside an over-long line */
    int result = -1, e = 0;
    ssize_t n;

    if (fstat(rl->fd, &st) != 0 || from < 0 || from > (int64_t)st.st_size) {
        e = errno ? errno : EINVAL;
        goto out;
    }
    buf = malloc(cap);
    if (buf == NULL) {
        e = ENOMEM;
        goto out;
    }
    while (buf_at + (int64_t)have < (int64_t)st.st_size) {
        if (have == cap) {
            /* A line longer than the buffer: grow up to the bound, then
             * drop what was read of it and skip to its end. */
            char *nb = cap <= REPORT_LINE_MAX ? realloc(buf, cap * 2) : NULL;

            if (nb != NULL) {
                buf = nb;
                cap *= 2;
            } else {
                skipping = true;
                buf_at += (int64_t)have;
                have = 0;
            }
        }
        do {
            n = pread(rl->fd, buf + have, cap - have,
                      (off_t)(buf_at + (int64_t)have));
        } while (n < 0 && errno == EINTR);
        if (n < 0) {
            e = errno;
            goto out;
        }
        if (n == 0)
            break; /* shrank under us */
        start = 0;
        for (i = have; i < have + (size_t)n; i++) {
            if (buf[i] != '\n')
                continue;
            if (skipping || i - start > REPORT_LINE_MAX)
                log_warn(NULL,
                         "%s: the line at byte %lld is longer than %zu "
                         "bytes; skipped",
                         rl->path, (long long)line_at, REPORT_LINE_MAX);
            else if (i > start)
                cb(buf + start, i - start, arg);
            skipping = false;
            start = i + 1;
            line_at = buf_at + (int64_t)start;
        }
        have += (size_t)n;
        memmove(buf, buf + start, have - start);
        have -= start;
        buf_at += (int64_t)start;
    }
    if (line_at < (int64_t)st.st_size) {
        log_warn(NULL,
                 "%s: a torn last line (%lld bytes, a write cut short) is "
                 "cut off",
                 rl->path, (long long)((int64_t)st.st_size - line_at));
        if (ftruncate(rl->fd, (off_t)line_at) != 0 || fdatasync(rl->fd) != 0) {
            e = errno;
            goto out;
        }
    }
    rl->end = line_at;
    *end = line_at;
    result = 0;
out:
    free(buf);
    if (result != 0)
        errno = e;
    return result;
}

/* The string member `key` of `root` if it has `len` lowercase hex digits. */
static int
hex_member(const struct json_node *root, const char *key, size_t len,
           char *out)
{
    const char *s = json_string(json_get(root, key));
    size_t i;

    if (s == NULL || strlen(s) != len)
        return -1;
    for (i = 0; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return -1;
    memcpy(out, s, len + 1);
    return 0;
}

static const struct json_limits line_limits = {.max_bytes = REPORT_LINE_MAX,
                                               .max_depth = 8,
                                               .max_items = READ_ITEMS,
                                               .max_string = READ_STRING};

int
report_line_ids(const char *line, size_t len, char id[33],
                char cid[CTR_ID_SIZE])
{
    char err[64] = "";
    struct json_node *root =
        json_parse(line, len, &line_limits, 0, err, sizeof(err), NULL);
    int rc = -1;

    if (root == NULL && strcmp(err, JSON_ERR_OOM) == 0)
        return -2;
    if (root != NULL && hex_member(root, "report_id", 32, id) == 0 &&
        hex_member(root, "container_id", 64, cid) == 0)
        rc = 0;
    json_free(root);
    return rc;
}

int
report_line_removed(const char *line, size_t len)
{
    struct json_node *root =
        json_parse(line, len, &line_limits, 0, NULL, 0, NULL);
    const struct json_node *n;
    int rc = -1;

    if (root == NULL || root->type != JSON_OBJECT)
        goto out;
    n = json_get(root, "removed");
    rc = n != NULL && n->type == JSON_BOOL && n->boolean;
out:
    json_free(root);
    return rc;
}
