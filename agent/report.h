/*
 * report — the account of one container exit, as the contract defines it,
 * and the append-only reports.jsonl file.
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

#include "policy.h"

struct report {
    char report_id[40];
    const char *node;
    const char *container_id;
    const char *name;
    const char *image;
    const struct label *labels;
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

/* One JSON object, no newline. Returns a malloc'd string the caller frees,
 * with its length in *len, or NULL on allocation failure. */
char *report_to_json(const struct report *r, size_t *len);

/* RFC 3339 ("2026-12-02T12:22:57.864550554Z", or with a +hh:mm offset)
 * to milliseconds since the epoch. 0, or -1 if malformed. */
int report_parse_time(const char *s, int64_t *ms);

/* Milliseconds since the epoch, now (CLOCK_REALTIME). */
int64_t report_now_ms(void);

/* Current UTC time as RFC 3339 with milliseconds into buf (>= 32). */
void report_now_rfc3339(char *buf, size_t len);

struct report_log;

/* Opens (creating) <dir>/reports.jsonl for appending. NULL with errno. */
struct report_log *report_log_open(const char *dir);
void report_log_close(struct report_log *rl);
/*
 * Appends one line: `json` plus "\n" in a single write, then fdatasync,
 * so a crash never leaves a torn line behind a complete one. This sync is
 * the one a report waits for. 0 or -1
 * (errno set; the line was not, or not wholly, written).
 */
int report_log_append(struct report_log *rl, const char *json, size_t len);
const char *report_log_path(const struct report_log *rl);
/* The file's size after the last append (or at open): the offset just past
 * the last whole line written. */
int64_t report_log_end(const struct report_log *rl);

/* One whole line (without its "\n") found by report_log_replay. */
typedef void (*report_line_cb)(const char *line, size_t len, void *arg);

/*
 * reports.jsonl is the journal of reports: a report is durable once its
 * line is (fdatasync), and the state database, which commits without a
 * sync of its own, is repaired from it at startup. This reads every whole
 * line from byte `from` to the end and hands it to `cb` (lines longer than
 * REPORT_LINE_MAX are skipped with a warning). A torn last line (a power
 * loss mid-write) is cut off, so the next append starts a line of its own.
 * Returns 0 with the end of the last whole line in `*end`, or -1 (errno).
 */
#define REPORT_LINE_MAX ((size_t)1 << 20)
int report_log_replay(struct report_log *rl, int64_t from, report_line_cb cb,
                      void *arg, int64_t *end);

/* The report_id (32 hex) and container_id (64 hex) of a report line.
 * 0, or -1 if the line is not a report. */
int report_line_ids(const char *line, size_t len, char id[33], char cid[65]);

#endif
