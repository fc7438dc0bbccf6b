/*
 * log — see log.h.
 *
 * A record is built in a fixed, per-thread buffer and leaves in one
 * write(2): no allocation on the text path, no interleaving, and a bounded
 * cost even for a runaway message. JSON records go through yajl_gen so that
 * escaping is never hand-rolled.
 */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <yajl/yajl_gen.h>

/*
 * Caps per field, in bytes before escaping. JSON escaping can grow a byte
 * to six ("\u001f"), so the record buffer holds six times the sum plus the
 * fixed keys; a record can then never be cut in the middle.
 */
#define MSG_MAX    8192
#define CID_MAX    128
#define STATE_MAX  64
#define REASON_MAX 1024
#define URL_MAX    1024
#define RID_MAX    128
#define FIELDS_MAX                                                            \
    (MSG_MAX + CID_MAX + 3 * STATE_MAX + REASON_MAX + URL_MAX + RID_MAX + 128)
#define RECORD_MAX (6 * FIELDS_MAX + 256)

/* Appended to a message that was cut, so a reader knows it was. */
#define TRUNC_MARK "..."

static enum log_level cur_level = LOG_LEVEL_INFO;
static enum log_format cur_format = LOG_FORMAT_TEXT;
static int out_fd = 2;
static bool journal; /* stderr is journald's stream: log_detect_journal */

static _Thread_local char record[RECORD_MAX];

struct buf {
    char *p;
    size_t len;
    size_t cap; /* one byte is always kept back for the final '\n' */
    int full;
};

static const char *const level_json[] = {"debug", "info", "warn", "error"};
static const char *const level_text[] = {"DEBUG", "INFO ", "WARN ", "ERROR"};
/* syslog priorities (sd-daemon.h's SD_DEBUG, SD_INFO, SD_WARNING, SD_ERR) */
static const char *const level_prio[] = {"<7>", "<6>", "<4>", "<3>"};

void
log_setup(enum log_level level, enum log_format format)
{
    cur_level = level;
    cur_format = format;
}

enum log_level
log_get_level(void)
{
    return cur_level;
}

int
log_level_parse(const char *s, enum log_level *out)
{
    size_t i;

    if (!s)
        return -1;
    for (i = 0; i < sizeof(level_json) / sizeof(level_json[0]); i++) {
        if (strcmp(s, level_json[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -1;
}

int
log_format_parse(const char *s, enum log_format *out)
{
    if (!s)
        return -1;
    if (strcmp(s, "text") == 0)
        *out = LOG_FORMAT_TEXT;
    else if (strcmp(s, "json") == 0)
        *out = LOG_FORMAT_JSON;
    else
        return -1;
    return 0;
}

void
log_set_fd(int fd)
{
    out_fd = fd < 0 ? 2 : fd;
}

void
log_set_journal(bool on)
{
    journal = on;
}

bool
log_detect_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    char tail;

    journal = false;
    /* systemd's own check (sd_journal_stream_fd's peers do the same): the
     * variable is inherited by children whose stderr went elsewhere. */
    if (js != NULL && sscanf(js, "%llu:%llu%c", &dev, &ino, &tail) == 2 &&
        fstat(2, &st) == 0 && (unsigned long long)st.st_dev == dev &&
        (unsigned long long)st.st_ino == ino)
        journal = true;
    return journal;
}

static void
buf_add(struct buf *b, const char *s, size_t n)
{
    size_t room = b->cap - 1 - b->len;

    if (n > room) {
        n = room;
        b->full = 1;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void
buf_str(struct buf *b, const char *s)
{
    buf_add(b, s, strlen(s));
}

/* Text lines must stay lines: control bytes become visible escapes. */
static void
buf_text(struct buf *b, const char *s, size_t n)
{
    char esc[5];
    size_t i;

    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c >= 0x20 && c != 0x7f) {
            buf_add(b, (const char *)&s[i], 1);
        } else if (c == '\n') {
            buf_str(b, "\\n");
        } else if (c == '\r') {
            buf_str(b, "\\r");
        } else if (c == '\t') {
            buf_str(b, "\\t");
        } else {
            snprintf(esc, sizeof(esc), "\\x%02x", c);
            buf_str(b, esc);
        }
    }
}

/* Cutting a string must not leave half a UTF-8 character behind. */
static size_t
utf8_cut(const char *s, size_t len)
{
    while (len > 0 && ((unsigned char)s[len - 1] & 0xc0) == 0x80)
        len--;
    if (len > 0 && (unsigned char)s[len - 1] >= 0xc0)
        len--;
    return len;
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if none. */
static size_t
utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char lo = 0x80, hi = 0xbf;
    size_t need, i;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        need = 2;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        need = 3;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        need = 4;
    else
        return 0;
    /* Overlong forms, surrogates and code points past U+10FFFF. */
    if (s[0] == 0xe0)
        lo = 0xa0;
    else if (s[0] == 0xed)
        hi = 0x9f;
    else if (s[0] == 0xf0)
        lo = 0x90;
    else if (s[0] == 0xf4)
        hi = 0x8f;
    if (n < need || s[1] < lo || s[1] > hi)
        return 0;
    for (i = 2; i < need; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return need;
}

/*
 * Copies at most `max` bytes of `s` into `dst` (size max + sizeof
 * TRUNC_MARK), replacing invalid UTF-8 with '?' so that a JSON reader
 * never rejects a record. Returns the length.
 */
static size_t
field_copy(char *dst, const char *s, size_t max)
{
    size_t len = strlen(s), i, n;
    int cut = 0;

    if (len > max) {
        len = utf8_cut(s, max);
        cut = 1;
    }
    for (i = 0; i < len; i += n) {
        n = utf8_seq((const unsigned char *)s + i, len - i);
        if (n == 0) {
            dst[i] = '?';
            n = 1;
        } else {
            memcpy(dst + i, s + i, n);
        }
    }
    if (cut) {
        memcpy(dst + len, TRUNC_MARK, sizeof(TRUNC_MARK) - 1);
        len += sizeof(TRUNC_MARK) - 1;
    }
    dst[len] = '\0';
    return len;
}

static void
timestamp(char *out, size_t size)
{
    struct timespec ts;
    struct tm tm;
    char day[24];

    if (clock_gettime(CLOCK_REALTIME, &ts) != 0 ||
        !gmtime_r(&ts.tv_sec, &tm) ||
        strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
        snprintf(out, size, "1970-01-01T00:00:00.000Z");
        return;
    }
    snprintf(out, size, "%s.%03uZ", day,
             (unsigned)(ts.tv_nsec / 1000000) % 1000);
}

/* Loops over signals and short writes; any other failure drops the rest,
 * since there is nowhere left to report it. */
static void
write_all(const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(out_fd, p, len);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        p += n;
        len -= (size_t)n;
    }
}

static void
json_print(void *ctx, const char *s, size_t n)
{
    buf_add(ctx, s, n);
}

static int
gen_pair(yajl_gen g, const char *key, const char *val)
{
    if (yajl_gen_string(g, (const unsigned char *)key, strlen(key)) !=
        yajl_gen_status_ok)
        return -1;
    if (yajl_gen_string(g, (const unsigned char *)val, strlen(val)) !=
        yajl_gen_status_ok)
        return -1;
    return 0;
}

/*
 * One JSON object into `b`. Fields from..reason are only given for
 * transitions. Returns 0, or -1 (allocation failure) so the caller can
 * fall back to text rather than lose the record.
 */
static int
format_json(struct buf *b, const char *ts, enum log_level level,
            const char *cid, const char *msg, const char *from, const char *to,
            const char *reason, const struct log_fields *f)
{
    yajl_gen g;
    int rc = -1;

    g = yajl_gen_alloc(NULL);
    if (!g)
        return -1;
    if (!yajl_gen_config(g, yajl_gen_print_callback, json_print, b))
        goto out;
    if (yajl_gen_map_open(g) != yajl_gen_status_ok)
        goto out;
    if (gen_pair(g, "ts", ts) || gen_pair(g, "level", level_json[level]))
        goto out;
    if (cid && gen_pair(g, "container", cid))
        goto out;
    if (gen_pair(g, "msg", msg))
        goto out;
    if (f != NULL) {
        if (f->report_id != NULL && gen_pair(g, "report_id", f->report_id))
            goto out;
        if (f->state != NULL && gen_pair(g, "state", f->state))
            goto out;
        if (f->http_status > 0 &&
            (yajl_gen_string(g, (const unsigned char *)"http_status", 11) !=
                 yajl_gen_status_ok ||
             yajl_gen_integer(g, f->http_status) != yajl_gen_status_ok))
            goto out;
        if (f->url != NULL && gen_pair(g, "url", f->url))
            goto out;
    }
    if (from && (gen_pair(g, "from", from) || gen_pair(g, "to", to) ||
                 gen_pair(g, "reason", reason)))
        goto out;
    if (yajl_gen_map_close(g) != yajl_gen_status_ok)
        goto out;
    rc = b->full ? -1 : 0;
out:
    yajl_gen_free(g);
    return rc;
}

static void
format_text(struct buf *b, const char *ts, enum log_level level,
            const char *cid, const char *msg, const char *from, const char *to,
            const char *reason)
{
    if (ts != NULL) { /* NULL: journald stamps it */
        buf_str(b, ts);
        buf_str(b, " ");
    }
    buf_str(b, level_text[level]);
    buf_str(b, " ");
    if (cid) {
        /* Twelve characters, as `docker ps` shows them. */
        size_t n = strlen(cid);

        buf_str(b, "[");
        buf_text(b, cid, n < 12 ? n : 12);
        buf_str(b, "] ");
    }
    buf_text(b, msg, strlen(msg));
    if (from) {
        /* "transition a -> b: why" reads well and greps by either state. */
        buf_str(b, " ");
        buf_text(b, from, strlen(from));
        buf_str(b, " -> ");
        buf_text(b, to, strlen(to));
        buf_str(b, ": ");
        buf_text(b, reason, strlen(reason));
    }
}

static void
emit(enum log_level level, const char *cid, const char *msg, const char *from,
     const char *to, const char *reason, const struct log_fields *f)
{
    struct buf b = {record, 0, sizeof(record), 0};
    char ts[40];
    char cidbuf[CID_MAX + sizeof(TRUNC_MARK)];
    /* The fields are bounded like everything else in a record. */
    char rid[RID_MAX + sizeof(TRUNC_MARK)];
    char state[STATE_MAX + sizeof(TRUNC_MARK)];
    char url[URL_MAX + sizeof(TRUNC_MARK)];
    struct log_fields fb;

    if (f != NULL) {
        fb = *f;
        if (fb.report_id != NULL) {
            field_copy(rid, fb.report_id, RID_MAX);
            fb.report_id = rid;
        }
        if (fb.state != NULL) {
            field_copy(state, fb.state, STATE_MAX);
            fb.state = state;
        }
        if (fb.url != NULL) {
            field_copy(url, fb.url, URL_MAX);
            fb.url = url;
        }
        f = &fb;
    }

    if ((unsigned)level > LOG_LEVEL_ERROR)
        level = LOG_LEVEL_ERROR;
    timestamp(ts, sizeof(ts));
    if (journal)
        buf_str(&b, level_prio[level]);
    if (cid) {
        field_copy(cidbuf, cid, CID_MAX);
        cid = cidbuf;
    }
    if (cur_format == LOG_FORMAT_JSON &&
        format_json(&b, ts, level, cid, msg, from, to, reason, f) == 0)
        goto out;
    b.len = journal ? strlen(level_prio[level]) : 0;
    b.full = 0;
    format_text(&b, journal ? NULL : ts, level, cid, msg, from, to, reason);
out:
    record[b.len++] = '\n';
    write_all(record, b.len);
}

static void vlog(enum log_level level, const char *cid,
                 const struct log_fields *f, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

static void
vlog(enum log_level level, const char *cid, const struct log_fields *f,
     const char *fmt, va_list ap)
{
    /* One byte more than kept, so field_copy can see that it was cut. */
    char raw[MSG_MAX + 2];
    char msg[MSG_MAX + sizeof(TRUNC_MARK)];
    int n;

    n = vsnprintf(raw, sizeof(raw), fmt, ap);
    if (n < 0)
        snprintf(raw, sizeof(raw), "(unformattable message: %s)", fmt);
    field_copy(msg, raw, MSG_MAX);
    emit(level, cid, msg, NULL, NULL, NULL, f);
}

void
log_msg(enum log_level level, const char *cid, const char *fmt, ...)
{
    va_list ap;

    if (level < cur_level)
        return;
    va_start(ap, fmt);
    vlog(level, cid, NULL, fmt, ap);
    va_end(ap);
}

void
log_fields(enum log_level level, const char *cid, const struct log_fields *f,
           const char *fmt, ...)
{
    va_list ap;

    if (level < cur_level)
        return;
    va_start(ap, fmt);
    vlog(level, cid, f, fmt, ap);
    va_end(ap);
}

void
log_transition(const char *cid, const char *from, const char *to,
               const char *reason)
{
    char f[STATE_MAX + sizeof(TRUNC_MARK)];
    char t[STATE_MAX + sizeof(TRUNC_MARK)];
    char r[REASON_MAX + sizeof(TRUNC_MARK)];

    if (LOG_LEVEL_DEBUG < cur_level)
        return;
    field_copy(f, from ? from : "", STATE_MAX);
    field_copy(t, to ? to : "", STATE_MAX);
    field_copy(r, reason ? reason : "", REASON_MAX);
    emit(LOG_LEVEL_DEBUG, cid, "transition", f, t, r, NULL);
}
