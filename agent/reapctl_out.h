/*
 * reapctl_out — what reapctl writes, and reapd's answers read for it.
 *
 * stdout gets only well-formed JSON, one document per line: an answer is
 * parsed (json.h, under bounds) before any of it is printed, whatever
 * reapd sent. stderr gets one line per failure, "reapctl: " first, with
 * the strings reapd sent made fit for a terminal. Part of reapctl only;
 * reapd does not link it.
 *
 * Ownership: a tree out_parse or out_answer_json returns is the caller's
 * (json_free); nothing else here keeps or hands out memory.
 */
#ifndef REAPD_REAPCTL_OUT_H
#define REAPD_REAPCTL_OUT_H

#include <stdbool.h>
#include <stddef.h>

#include "json.h"
#include "reapctl_http.h"

/* reapctl's exit status when it fails: bad usage, reapd cannot be
 * reached, an error from reapd, a malformed answer... */
#define CTL_EXIT_FAIL 125

/* Where reapd's admin socket is unless said otherwise. */
#define CTL_DEFAULT_SOCKET "/run/reapd/admin.sock"

/* The longest message of reapd's kept for a line on stderr. */
#define OUT_MESSAGE_MAX 300

/* "reapctl: ", the message, a newline, on stderr. */
void out_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* `len` bytes of `s`, a string reapd sent, fit for a terminal (control
 * bytes become '?') and cut to fit `out`. */
void out_tame(const char *s, size_t len, char *out, size_t outlen);

/* `n` as one line of JSON on stdout (flushed if `flush`). 0, or -1 with
 * why in `err`. */
int out_json(const struct json_node *n, bool flush, char *err, size_t errlen);
/* out_json for command `cmd`: 0, or CTL_EXIT_FAIL having said why. */
int out_doc(const char *cmd, const struct json_node *n, bool flush);

/* `len` bytes of reapd's as JSON under reapctl's bounds (CTL_BODY_MAX
 * and the like): the tree, or NULL with why in `err` (may be NULL). */
struct json_node *out_parse(const char *s, size_t len, char *err,
                            size_t errlen);

/* The last answer on `c` as a JSON object, or NULL having said why. */
struct json_node *out_answer_json(const struct ctl *c, const char *cmd);
/* reapd's {"error": ...} of the last answer, tamed, into `out`; "no
 * message" when there is none. */
void out_answer_message(const struct ctl *c, char *out, size_t outlen);
/* Says what reapd's unexpected answer means for command `cmd` (a
 * read-only listener, a refused or missing token, an error); returns
 * CTL_EXIT_FAIL. */
int out_answer_error(const struct ctl *c, const char *cmd);
/* Prints the JSON object of a 200 answer to the request that came to
 * `x`; anything else is an error, said. 0 or CTL_EXIT_FAIL. */
int out_answer(const struct ctl *c, const char *cmd, enum ctl_xfer x);

#endif
