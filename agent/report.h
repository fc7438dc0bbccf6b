/*
 * report — the account of one container exit, as the contract defines it,
 * and the append-only reports.jsonl file; with them, the bounds every
 * writer of reapd's files holds to, and the check of the state directory
 * those files live in.
 *
 * A report is made once a container's fate is settled. Its report_id is a
 * hash of facts the engine keeps (node, container id, FinishedAt), not of
 * anything reapd invents, so the same exit yields the same id after a
 * retry or a restart, and duplicates can be recognised downstream.
 */
#ifndef REAPD_REPORT_H
#define REAPD_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bounds.h"
#include "policy.h"

struct report {
    char report_id[40];
    const char *node;
    const char *container_id;
    const char *name;
    const char *image;
    const struct policy_label *labels;
    size_t nlabels;
    const char *policy;
    const char *action; /* "remove" | "keep" (extension) */
    bool exit_known;
    int exit_code;
    const char *exit_code_source; /* NULL when exit_known is false */
    bool has_engine_exit_code;
    int engine_exit_code;
    bool oom_killed;
    const char *started_at; /* RFC 3339 or NULL */
    const char *finished_at;
    bool removed;
    int task_deleted; /* 1, 0, or -1 for null (containerd off) */
    uint64_t cleanup_ms;
    unsigned delete_attempts;
    const char *const *anomalies; /* names */
    size_t nanomalies;
    const char *removed_by;  /* "reapd" | "other" | NULL (extension) */
    const char *reported_at; /* RFC 3339 (extension) */
};

/*
 * Fills r->report_id from node, container id and `exit_key` (FinishedAt,
 * or another engine-kept fact that names this exit).
 */
void report_make_id(struct report *r, const char *exit_key);

/* One JSON object, no newline, at most LIMIT_RECORD_BYTES: what does not
 * fit the bounds below is cut or dropped, so that report_line_ids can
 * always read the line back. Returns a malloc'd string the caller frees,
 * with its length in *len, or NULL on allocation failure. */
char *report_to_json(const struct report *r, size_t *len);

/*
 * The bounds every writer of reapd's files (reports here, container
 * records in record.c) holds what it is handed to, whoever the caller:
 * whatever is written must be readable after a restart, and the readers'
 * limits come from bounds.h. Texts that are neither a label, a name nor
 * an image (node, policy, times, ...) are cut to REPORT_TEXT_MAX bytes;
 * a report names at most REPORT_ANOMALIES_MAX anomalies of at most
 * REPORT_ANOMALY_MAX bytes each.
 */
/* The version of docs/report.schema.json every report follows
 * ("schema_version"); raised only by a change that breaks a reader. */
#define REPORT_SCHEMA_VERSION 1
/* That schema's text, compiled in (scripts/embed.cmake): NUL-terminated,
 * `report_schema_json_len` bytes without the NUL. */
extern const char report_schema_json[];
extern const size_t report_schema_json_len;

#define REPORT_TEXT_MAX      ((size_t)512)
#define REPORT_ANOMALIES_MAX ((size_t)32)
#define REPORT_ANOMALY_MAX   ((size_t)64)

/*
 * The length of the longest prefix of `s` (NULL: 0) that is at most `max`
 * bytes of whole, valid UTF-8 characters: a text is cut at a character
 * boundary, and before the first byte that is not UTF-8, which no JSON
 * reader would take.
 */
size_t report_text_len(const char *s, size_t max);

/*
 * Writes `labels` as one JSON object through `g` (a yajl_gen), as
 * bounds.h bounds them: a key longer than LIMIT_LABEL_KEY bytes or not
 * UTF-8 is dropped; a value is cut as report_text_len(value,
 * LIMIT_LABEL_VALUE) says (a NULL value is written as null); a label that
 * would take the keys and values written beyond LIMIT_LABELS_STORED_BYTES
 * is dropped; at most LIMIT_LABELS_STORED are written, the first ones.
 * Returns how many were written.
 */
struct yajl_gen_t;
size_t report_gen_labels(struct yajl_gen_t *g,
                         const struct policy_label *labels, size_t n);
/* Key `k` (reapd's own) and `v` cut to at most `max` bytes
 * (report_text_len), or null: how reports and records write the engine's
 * strings. */
void report_gen_text(struct yajl_gen_t *g, const char *k, const char *v,
                     size_t max);

/*
 * Whether `dir` may hold reapd's state: an existing directory, not a
 * symlink, owned by the effective user and writable by nobody else. 0, or
 * -1 with errno (ELOOP: a symlink; ENOTDIR; EPERM: owner or mode; what
 * lstat said) and a one-line message naming the directory, what is wrong
 * and what to do in `err`.
 */
int report_state_dir_check(const char *dir, char *err, size_t errlen);

/* RFC 3339 ("2026-12-02T12:22:57.864550554Z", or with a +hh:mm offset)
 * to milliseconds since the epoch. 0, or -1 if malformed. */
int report_parse_time(const char *s, int64_t *ms);

/* Milliseconds since the epoch, now (CLOCK_REALTIME). */
int64_t report_now_ms(void);

/* Current UTC time as RFC 3339 with milliseconds into buf (>= 32). */
void report_now_rfc3339(char *buf, size_t len);

struct report_log;

/*
 * Opens (creating, mode 0640) <dir>/reports.jsonl for appending, never
 * through a symlink, close-on-exec, and only in a directory that passes
 * report_state_dir_check (why not is logged). An empty file (one just
 * made) has the directory synced, so that lines appended to it cannot be
 * lost with its name to a power loss. The caller owns the result
 * (report_log_close). NULL with errno: what report_state_dir_check says,
 * ELOOP for a symlink named reports.jsonl, EINVAL for one that is not a
 * regular file, else what open(2) said.
 */
struct report_log *report_log_open(const char *dir);
void report_log_close(struct report_log *rl);
/*
 * Appends one line: `json` plus "\n" in a single write, then fdatasync,
 * so a crash never leaves a torn line behind a complete one. This sync is
 * the one a report waits for. 0 or -1
 * (errno set; the line was not, or not wholly, written).
 */
int report_log_append(struct report_log *rl, const char *json, size_t len);

/* One line of report_log_append_many: `len` bytes of JSON, no newline. */
struct report_line {
    const char *json;
    size_t len;
};

/* Most lines report_log_append_many takes at once. */
#define REPORT_LOG_LINES_MAX 64

/*
 * report_log_append for `n` lines (at most REPORT_LOG_LINES_MAX) in one
 * write and one fdatasync: the reports of a loop turn share the sync. All
 * or none: 0, or -1 with errno (no line written, or a partial write cut
 * off again).
 */
int report_log_append_many(struct report_log *rl, const struct report_line *v,
                           size_t n);
const char *report_log_path(const struct report_log *rl);
/* The file's size after the last append (or at open): the offset just past
 * the last whole line written. */
int64_t report_log_end(const struct report_log *rl);

/*
 * Rotation. The rotated files are reports.jsonl.1 (the newest) to
 * reports.jsonl.<keep>; reapd never reads them again (the replay reads
 * reports.jsonl only), so the caller rotates only a file whose every line
 * the state database holds, durably (reportwrite.c).
 */
#define REPORT_LOG_KEEP_MAX 100

/*
 * Rotates: deletes reports.jsonl.<keep> and any file numbered up to
 * REPORT_LOG_KEEP_MAX beyond it (a lowered keep), renames .N to .N+1
 * from the oldest down (a number missing after a crash is stepped over),
 * reports.jsonl to reports.jsonl.1, creates a new empty reports.jsonl as
 * report_log_open does (0640, never through a symlink, close-on-exec;
 * never a file that already exists), syncs the directory, and appends to
 * the new file from then on (report_log_end 0). With keep 0, the old file
 * is deleted once the new one is in place. A few renames and one fsync of
 * the directory: short enough for the loop.
 *
 * 0, or -1 with errno (EINVAL: keep too large; ESTALE: reports.jsonl is
 * no longer the file appended to, moved by hand; EEXIST: something took
 * the name meanwhile; what the system call said) when the rotation did
 * not happen: appends go on to reports.jsonl as before, renamed back if it
 * had been moved (older files may have been shifted or deleted already:
 * harmless). Should even the renaming back fail, appends fail from then
 * on (logged), so that no line goes to a file the next start does not
 * read.
 */
int report_log_rotate(struct report_log *rl, unsigned keep);

/* The steps of a rotation, each once its change to the directory is made:
 * a test stops there (a kill -9) and checks what a restart finds. */
enum report_rotate_step {
    REPORT_ROTATE_BEGIN,   /* the directory opened; nothing changed yet */
    REPORT_ROTATE_DROPPED, /* a rotated file beyond `keep` deleted */
    REPORT_ROTATE_SHIFTED, /* reports.jsonl.N renamed to .N+1 */
    REPORT_ROTATE_RENAMED, /* reports.jsonl renamed to reports.jsonl.1 */
    REPORT_ROTATE_CREATED, /* the new reports.jsonl made */
    REPORT_ROTATE_SYNCED,  /* the directory synced: the rotation holds */
};

/* For tests only: `hook` is called at each step of every rotation, with
 * `arg`; NULL (the default) removes it. */
typedef void (*report_rotate_hook)(enum report_rotate_step step, void *arg);
void report_log_set_rotate_hook(report_rotate_hook hook, void *arg);

/* One whole line (without its "\n") found by report_log_replay. */
typedef void (*report_line_cb)(const char *line, size_t len, void *arg);

/*
 * reports.jsonl is the journal of reports: a report is durable once its
 * line is (fdatasync), and the state database, which commits without a
 * sync of its own, is repaired from it at startup. This reads every whole
 * line from byte `from` to the end and hands it to `cb` (lines longer than
 * REPORT_LINE_MAX, which no report is, are skipped with a warning). A torn
 * last line (a power loss mid-write) is cut off, so the next append starts
 * a line of its own. Returns 0 with the end of the last whole line in
 * `*end`, or -1 (errno).
 */
#define REPORT_LINE_MAX LIMIT_RECORD_BYTES
int report_log_replay(struct report_log *rl, int64_t from, report_line_cb cb,
                      void *arg, int64_t *end);

/* The report_id (32 hex) and container_id (64 hex) of a report line; it
 * reads any line report_to_json can make (the bounds of bounds.h, and
 * never less than what earlier versions wrote). 0, -1 if the line is
 * not a report, or -2 if memory ran out (the line may be fine). */
int report_line_ids(const char *line, size_t len, char id[33],
                    char cid[CTR_ID_SIZE]);

/* Whether a report line says its container was removed: 1 if its
 * `removed` is true, 0 if false, null or missing, -1 if the line is not
 * a JSON object (or memory ran out). Reads what report_line_ids reads. */
int report_line_removed(const char *line, size_t len);

#endif
