/*
 * log — leveled, one-line log records on stderr, as text or JSON.
 *
 * Every record is one line, written with a single write(2) so lines from a
 * crash are never interleaved. Records about a container carry its id as a
 * field, and state changes say from, to and why, so an operator can follow
 * one container through its whole life with grep or jq.
 */
#ifndef REAPD_LOG_H
#define REAPD_LOG_H

#include <stdbool.h>

enum log_level {
    LOG_LEVEL_DEBUG,
    LOG_LEVEL_INFO,
    LOG_LEVEL_WARN,
    LOG_LEVEL_ERROR
};
enum log_format { LOG_FORMAT_TEXT, LOG_FORMAT_JSON };

void log_setup(enum log_level level, enum log_format format);
enum log_level log_get_level(void);

/* "debug" | "info" | "warn" | "error" -> 0 and *out; else -1. */
int log_level_parse(const char *s, enum log_level *out);
/* "text" | "json" -> 0 and *out; else -1. */
int log_format_parse(const char *s, enum log_format *out);

/* A message, optionally about one container (`cid` may be NULL). */
void log_msg(enum log_level level, const char *cid, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Facts a JSON record carries as keys of their own, so that a log
 * pipeline can select on them without parsing messages (text records
 * have them in the message). Any may be NULL, http_status 0: absent.
 * `url` must be one fit for a log (upstream's redacted form).
 */
struct log_fields {
    const char *report_id;
    const char *state; /* a container's lifecycle state */
    int http_status;
    const char *url;
};

/* log_msg with `f`'s keys in JSON records (`f` may be NULL). */
void log_fields(enum log_level level, const char *cid,
                const struct log_fields *f, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A container's state transition: from -> to, because of `reason`; at
 * debug level (an exit takes eight). */
void log_transition(const char *cid, const char *from, const char *to,
                    const char *reason);

/* Redirects output (tests); fd -1 restores stderr. */
void log_set_fd(int fd);

/*
 * Under journald (stderr is the stream JOURNAL_STREAM names, "DEV:INODE"
 * as systemd sets it), each record starts with its syslog priority,
 * "<7>" debug, "<6>" info, "<4>" warn, "<3>" error, which journald takes
 * for the entry's priority and strips; text records then drop their own
 * timestamp (journald stamps every entry). JSON records keep their "ts"
 * key, which readers of the JSON rely on. Returns whether it is on.
 */
bool log_detect_journal(void);
/* The same, set by hand (tests). */
void log_set_journal(bool on);

#define log_debug(cid, ...) log_msg(LOG_LEVEL_DEBUG, cid, __VA_ARGS__)
#define log_info(cid, ...)  log_msg(LOG_LEVEL_INFO, cid, __VA_ARGS__)
#define log_warn(cid, ...)  log_msg(LOG_LEVEL_WARN, cid, __VA_ARGS__)
#define log_error(cid, ...) log_msg(LOG_LEVEL_ERROR, cid, __VA_ARGS__)

#endif
