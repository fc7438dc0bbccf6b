/*
 * record — a tracked container's durable form.
 *
 * What reapd must not forget about a container it is cleaning up, so that
 * a restart (or a kill -9) resumes the wait where it stood and the report
 * it finally makes is the one it would have made: the lifecycle record
 * (state, what is already known of the exit and of the joins) and what
 * the report needs (name, image, labels, policy, times). One versioned
 * JSON object, written with yajl_gen and read back through json.c's
 * bounded parser; a record that does not parse is refused, not guessed.
 */
#ifndef REAPD_RECORD_H
#define REAPD_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lifecycle.h"
#include "policy.h"

#define RECORD_VERSION 1

struct record_meta {
    const char *name;  /* may be NULL */
    const char *image; /* may be NULL */
    const struct policy_label *labels;
    size_t nlabels;
    const char *policy; /* the policy's name */
    bool force, volumes, report_on;
    const char *started_at;  /* RFC 3339 or NULL */
    const char *finished_at; /* RFC 3339 or NULL */
    int64_t die_nano;        /* the die event's time, 0 if none */
    int64_t exited_wall_ms;  /* wall clock when the exit was seen, or 0 */
};

/* The JSON text (malloc'd, caller frees; length in *len), or NULL when
 * out of memory. Monotonic times in `lc` are not written (they mean
 * nothing after a restart); exited_wall_ms stands for them. What `m`
 * holds is bounded as report.h says (report_gen_labels, report_text_len:
 * the name to LIMIT_NAME_BYTES, the image to LIMIT_IMAGE_BYTES, other
 * texts to REPORT_TEXT_MAX), so the text is at most LIMIT_RECORD_BYTES
 * and record_parse always reads it back. */
char *record_to_json(const struct lc *lc, const struct record_meta *m,
                     size_t *len);

struct record;

/* Parses a record: any record_to_json writes (and any an earlier
 * version wrote: up to 4096 labels, 64 KiB strings). NULL with a message
 * in `err` when it is malformed, of another version, or out of range.
 * The caller frees with record_free. */
struct record *record_parse(const char *json, size_t len, char *err,
                            size_t errlen);
void record_free(struct record *r);

/* Valid until record_free. In the lc, in-flight flags and monotonic
 * times are zero: lc_resume sets them. */
const struct lc *record_lc(const struct record *r);
const struct record_meta *record_meta(const struct record *r);

#endif
