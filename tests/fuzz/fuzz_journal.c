/*
 * fuzz_journal — the reports journal as reapd reads it back at startup
 * (agent/report.h): reports.jsonl, written from the input into a private
 * directory, replayed with report_log_replay; and report_line_ids and
 * report_line_removed on the input and on every line replayed.
 *
 * Input: byte 0 holds flags (bit 0: replay from an offset, the next byte
 * choosing it, possibly past the end; bit 1: a run of 'x' is inserted, so
 * lines longer than the reader's first buffers (64 and 128 KiB) are
 * reached without such inputs: two bytes give its length in units of 2
 * bytes, the low 2 bits of a third are added to it and the rest of that
 * byte says where it goes), then the file.
 * Lines near REPORT_LINE_MAX (1 MiB) and the reader's largest buffer
 * (2 MiB) cost milliseconds each; tests/unit/test_report.c covers them.
 *
 * Checked against a model written here: replay hands over exactly the
 * non-empty whole lines from the offset on that are at most
 * REPORT_LINE_MAX bytes, in order and byte for byte; it ends just past
 * the last newline; a torn last line is cut off the file; an offset past
 * the end is refused. report_line_ids gives 32 and 64 lowercase hex
 * digits when it says 0.
 */
#define _GNU_SOURCE /* memmem */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "report.h"

#define F_FROM 0x01
#define F_RUN  0x02

struct expect {
    const uint8_t *file;
    size_t len;
    size_t pos; /* where the next expected line is looked for */
    size_t lines;
};

static void
check_ids(const char *line, size_t len)
{
    char id[33], cid[65];
    int removed = report_line_removed(line, len);

    FUZZ_CHECK(removed >= -1 && removed <= 1);
    /* Only a line that names the member can say it. */
    if (removed == 1)
        FUZZ_CHECK(memmem(line, len, "removed", 7) != NULL);
    memset(id, 'x', sizeof(id));
    memset(cid, 'x', sizeof(cid));
    if (report_line_ids(line, len, id, cid) == 0) {
        FUZZ_CHECK(fuzz_is_hex(id, 32));
        FUZZ_CHECK(fuzz_is_hex(cid, 64));
        /* A report is an object: whether it says removed is known. */
        FUZZ_CHECK(removed != -1);
    }
}

/* The next line the model expects from e->pos on: its start and length,
 * or false when no whole line is left. */
static bool
next_line(struct expect *e, size_t *start, size_t *len)
{
    const uint8_t *nl;

    while (e->pos < e->len) {
        nl = memchr(e->file + e->pos, '\n', e->len - e->pos);
        if (nl == NULL)
            return false;
        *start = e->pos;
        *len = (size_t)(nl - e->file) - e->pos;
        e->pos += *len + 1;
        if (*len > 0 && *len <= REPORT_LINE_MAX)
            return true;
    }
    return false;
}

static void
on_line(const char *line, size_t len, void *arg)
{
    struct expect *e = arg;
    size_t start = 0, want = 0;

    FUZZ_CHECK(next_line(e, &start, &want));
    FUZZ_CHECK(len == want);
    FUZZ_CHECK(memcmp(line, e->file + start, len) == 0);
    e->lines++;
    check_ids(line, len);
}

static void
write_file(const char *path, const uint8_t *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ssize_t w;

    FUZZ_CHECK(fd >= 0);
    while (n > 0) {
        w = write(fd, p, n);
        FUZZ_CHECK(w > 0);
        p += w;
        n -= (size_t)w;
    }
    close(fd);
}

/* The file's content: the input, with the run of 'x' if asked for. */
static uint8_t *
build(struct fuzz_in *in, uint8_t flags, size_t *len)
{
    size_t run = 0, at = 0;
    uint8_t *f;

    if (flags & F_RUN) {
        run = (size_t)fuzz_byte(in) << 8;
        run = (run | fuzz_byte(in)) * 2;
        at = fuzz_byte(in);
        run += at & 3;
        at >>= 2;
    }
    at = in->n > 0 ? at % (in->n + 1) : 0;
    *len = in->n + run;
    f = malloc(*len ? *len : 1);
    FUZZ_CHECK(f != NULL);
    if (at > 0)
        memcpy(f, in->p, at);
    memset(f + at, 'x', run);
    if (in->n > at)
        memcpy(f + at + run, in->p + at, in->n - at);
    return f;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_in in = {data, size};
    struct expect e = {0};
    struct report_log *rl;
    struct stat st;
    char path[512];
    const uint8_t *nl;
    size_t from_b = 0, end_want, i;
    int64_t from = 0, end = -1;
    uint8_t flags, *file;
    int rc;

    fuzz_quiet_logs();
    check_ids((const char *)data, size);
    flags = fuzz_byte(&in);
    if (flags & F_FROM)
        from_b = fuzz_byte(&in);
    file = build(&in, flags, &e.len);
    e.file = file;
    /* Up to one byte past the end: that must be refused. */
    if (flags & F_FROM)
        from = (int64_t)(from_b % (e.len + 2));
    snprintf(path, sizeof(path), "%s/reports.jsonl", fuzz_tmpdir());
    write_file(path, file, e.len);

    rl = report_log_open(fuzz_tmpdir());
    FUZZ_CHECK(rl != NULL);
    FUZZ_CHECK(report_log_end(rl) == (int64_t)e.len);
    e.pos = (size_t)from;
    rc = report_log_replay(rl, from, on_line, &e, &end);
    if (from > (int64_t)e.len) {
        FUZZ_CHECK(rc == -1);
        FUZZ_CHECK(e.lines == 0);
    } else {
        size_t s, l;

        FUZZ_CHECK(rc == 0);
        /* Nothing expected was left out. */
        FUZZ_CHECK(!next_line(&e, &s, &l));
        end_want = (size_t)from;
        for (i = (size_t)from; i < e.len; i = (size_t)(nl - file) + 1) {
            nl = memchr(file + i, '\n', e.len - i);
            if (nl == NULL)
                break;
            end_want = (size_t)(nl - file) + 1;
        }
        FUZZ_CHECK(end == (int64_t)end_want);
        FUZZ_CHECK(report_log_end(rl) == end);
        FUZZ_CHECK(stat(path, &st) == 0);
        FUZZ_CHECK(st.st_size == end);
    }
    report_log_close(rl);
    unlink(path);
    free(file);
    return 0;
}
