/*
 * record — a tracked container's durable form; see record.h.
 *
 * The format is flat and explicit (one key per field, integers as
 * integers) so an operator can read it in the database, and so a field
 * added later is simply absent from older records (it keeps its zero).
 */
#include "record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>

#include "bounds.h"
#include "json.h"
#include "jsonw.h"
#include "report.h"

/* What the reader accepts: whatever record_to_json writes (bounds.h),
 * and never less than earlier versions wrote (4096 labels, 64 KiB
 * strings), so records from before these bounds stay readable. */
#define READ_BYTES  LIMIT_RECORD_BYTES
#define READ_ITEMS  LIMIT_READ_ITEMS
#define READ_STRING LIMIT_READ_STRING
_Static_assert(READ_STRING >= REPORT_TEXT_MAX,
               "the reader takes every string the writer writes");

struct record {
    struct json_node *root; /* the strings of meta point into it */
    struct lc lc;
    struct record_meta meta;
    struct policy_label *labels;
};

/*
 * A field at its zero (false, 0, no text) is not written: the reader takes
 * an absent field as its zero, as it always has for fields older records
 * lack. Most of a record is zeros until its container exits, and writing
 * them would make the database much larger. The fields with no zero are
 * always written.
 */
static void
put_int(yajl_gen g, const char *k, long long v)
{
    if (v != 0)
        jw_key_int(g, k, v);
}

static void
put_bool(yajl_gen g, const char *k, bool v)
{
    if (v)
        jw_key_bool(g, k, v);
}

static void
put_text(yajl_gen g, const char *k, const char *v, size_t max)
{
    if (v != NULL)
        report_gen_text(g, k, v, max);
}

char *
record_to_json(const struct lc *c, const struct record_meta *m, size_t *len)
{
    yajl_gen g = yajl_gen_alloc(NULL);

    if (g == NULL)
        return NULL;
    yajl_gen_map_open(g);
    jw_key_int(g, "v", RECORD_VERSION);
    report_gen_text(g, "state", lc_state_name(c->state), REPORT_TEXT_MAX);
    put_int(g, "action", c->p.action);
    put_int(g, "delay_ms", c->p.delay_ms);
    jw_key_int(g, "poll_interval_ms", c->p.poll_interval_ms);
    put_int(g, "warn_after_ms", c->p.warn_after_ms);
    put_int(g, "give_up_after_ms", c->p.give_up_after_ms);
    jw_key_int(g, "retry_base_ms", c->p.retry_base_ms);
    jw_key_int(g, "retry_max_ms", c->p.retry_max_ms);
    put_bool(g, "containerd", c->p.containerd);
    put_bool(g, "reap_leaked_tasks", c->p.reap_leaked_tasks);
    put_bool(g, "ran", c->ran);
    put_bool(g, "exited", c->exited);
    put_bool(g, "die_seen", c->die_seen);
    put_bool(g, "die_has_code", c->die_has_code);
    put_bool(g, "die_after_outage", c->die_after_outage);
    put_int(g, "die_code", c->die_code);
    put_bool(g, "exit_known", c->exit_known);
    put_int(g, "exit_code", c->exit_code);
    put_int(g, "source", c->source);
    put_bool(g, "oom_killed", c->oom_killed);
    put_bool(g, "destroy_seen", c->destroy_seen);
    put_bool(g, "gone_polled", c->gone_polled);
    put_bool(g, "removed_by_us", c->removed_by_us);
    put_int(g, "delete_attempts", c->delete_attempts);
    put_int(g, "anomalies", c->anomalies);
    put_bool(g, "removed", c->removed);
    put_int(g, "cleanup_ms", (long long)c->cleanup_ms);
    put_bool(g, "task_exit_seen", c->task_exit_seen);
    put_int(g, "task_exit_code", c->task_exit_code);
    put_bool(g, "task_delete_seen", c->task_delete_seen);
    put_bool(g, "task_gone_polled", c->task_gone_polled);
    put_bool(g, "task_reaped_done", c->task_reaped_done);
    put_int(g, "task_deleted", c->task_deleted);

    put_text(g, "name", m->name, LIMIT_NAME_BYTES);
    put_text(g, "image", m->image, LIMIT_IMAGE_BYTES);
    jw_str(g, "labels");
    report_gen_labels(g, m->labels, m->nlabels);
    put_text(g, "policy", m->policy, REPORT_TEXT_MAX);
    put_bool(g, "force", m->force);
    put_bool(g, "volumes", m->volumes);
    put_bool(g, "report_on", m->report_on);
    put_text(g, "started_at", m->started_at, REPORT_TEXT_MAX);
    put_text(g, "finished_at", m->finished_at, REPORT_TEXT_MAX);
    put_int(g, "die_nano", m->die_nano);
    put_int(g, "exited_wall_ms", m->exited_wall_ms);
    yajl_gen_map_close(g);
    return jw_finish(g, len);
}

/* Reading: every field optional (zero when absent), every present one
 * type- and range-checked. */
struct reader {
    const struct json_node *root;
    char *err;
    size_t errlen;
    bool bad;
};

static int64_t
record_get_int(struct reader *r, const char *k, int64_t min, int64_t max)
{
    const struct json_node *n = json_get(r->root, k);
    int64_t v = 0;

    if (n == NULL || r->bad)
        return 0;
    if (json_int64(n, &v) != 0 || v < min || v > max) {
        snprintf(r->err, r->errlen,
                 "record: \"%s\" is not an integer in "
                 "%lld..%lld",
                 k, (long long)min, (long long)max);
        r->bad = true;
        return 0;
    }
    return v;
}

/* As record_get_int, for a field every version has written and that has no
 * zero to fall back on (a poll interval, a backoff): absent, the record
 * is refused, since what would be read could not be written back. */
static int64_t
get_needed_int(struct reader *r, const char *k, int64_t min, int64_t max)
{
    if (json_get(r->root, k) == NULL && !r->bad) {
        snprintf(r->err, r->errlen, "record: \"%s\" missing", k);
        r->bad = true;
        return 0;
    }
    return record_get_int(r, k, min, max);
}

static bool
record_get_bool(struct reader *r, const char *k)
{
    const struct json_node *n = json_get(r->root, k);

    if (n == NULL || r->bad)
        return false;
    if (n->type != JSON_BOOL) {
        snprintf(r->err, r->errlen, "record: \"%s\" is not a boolean", k);
        r->bad = true;
        return false;
    }
    return n->boolean != 0;
}

static const char *
get_str(struct reader *r, const char *k)
{
    const struct json_node *n = json_get(r->root, k);

    if (n == NULL || n->type == JSON_NULL || r->bad)
        return NULL;
    if (n->type != JSON_STRING || strlen(n->str) != n->len) {
        snprintf(r->err, r->errlen, "record: \"%s\" is not a string", k);
        r->bad = true;
        return NULL;
    }
    return n->str;
}

/* The lifecycle's state: 0, or -1 with a message in r->err. */
static int
read_state(struct reader *r, struct lc *c)
{
    const char *state = get_str(r, "state");
    int s;

    for (s = 0; s < LC_NSTATES; s++)
        if (state != NULL && strcmp(state, lc_state_name(s)) == 0)
            break;
    if (s == LC_NSTATES) {
        snprintf(r->err, r->errlen, "record: unknown state");
        return -1;
    }
    c->state = (enum lc_state)s;
    return 0;
}

/* The policy's parameters and what is known of the exit and the joins;
 * r->bad says whether one was wrong. */
static void
read_lc(struct reader *r, struct lc *c)
{
    c->p.action =
        (enum policy_action)record_get_int(r, "action", 0, POLICY_REMOVE);
    c->p.delay_ms = record_get_int(r, "delay_ms", 0, INT64_MAX);
    c->p.poll_interval_ms =
        get_needed_int(r, "poll_interval_ms", 1, INT64_MAX);
    c->p.warn_after_ms = record_get_int(r, "warn_after_ms", 0, INT64_MAX);
    c->p.give_up_after_ms =
        record_get_int(r, "give_up_after_ms", 0, INT64_MAX);
    c->p.retry_base_ms = get_needed_int(r, "retry_base_ms", 1, INT64_MAX);
    c->p.retry_max_ms = get_needed_int(r, "retry_max_ms", 1, INT64_MAX);
    c->p.containerd = record_get_bool(r, "containerd");
    c->p.reap_leaked_tasks = record_get_bool(r, "reap_leaked_tasks");
    c->ran = record_get_bool(r, "ran");
    c->exited = record_get_bool(r, "exited");
    c->die_seen = record_get_bool(r, "die_seen");
    c->die_has_code = record_get_bool(r, "die_has_code");
    c->die_after_outage = record_get_bool(r, "die_after_outage");
    c->die_code = (int)record_get_int(r, "die_code", INT32_MIN, INT32_MAX);
    c->exit_known = record_get_bool(r, "exit_known");
    c->exit_code = (int)record_get_int(r, "exit_code", INT32_MIN, INT32_MAX);
    c->source = (enum lc_source)record_get_int(r, "source", 0, LC_SRC_EVENT);
    c->oom_killed = record_get_bool(r, "oom_killed");
    c->destroy_seen = record_get_bool(r, "destroy_seen");
    c->gone_polled = record_get_bool(r, "gone_polled");
    c->removed_by_us = record_get_bool(r, "removed_by_us");
    c->delete_attempts =
        (unsigned)record_get_int(r, "delete_attempts", 0, INT32_MAX);
    c->anomalies = (uint32_t)record_get_int(r, "anomalies", 0, UINT32_MAX);
    c->removed = record_get_bool(r, "removed");
    c->cleanup_ms = (uint64_t)record_get_int(r, "cleanup_ms", 0, INT64_MAX);
    c->task_exit_seen = record_get_bool(r, "task_exit_seen");
    c->task_exit_code =
        (int)record_get_int(r, "task_exit_code", INT32_MIN, INT32_MAX);
    c->task_delete_seen = record_get_bool(r, "task_delete_seen");
    c->task_gone_polled = record_get_bool(r, "task_gone_polled");
    c->task_reaped_done = record_get_bool(r, "task_reaped_done");
    c->task_deleted = (int)record_get_int(r, "task_deleted", -1, 1);
}

/* What the report needs but the labels; r->bad says whether one was
 * wrong. */
static void
read_meta(struct reader *r, struct record_meta *m)
{
    m->name = get_str(r, "name");
    m->image = get_str(r, "image");
    m->policy = get_str(r, "policy");
    m->force = record_get_bool(r, "force");
    m->volumes = record_get_bool(r, "volumes");
    m->report_on = record_get_bool(r, "report_on");
    m->started_at = get_str(r, "started_at");
    m->finished_at = get_str(r, "finished_at");
    m->die_nano = record_get_int(r, "die_nano", 0, INT64_MAX);
    m->exited_wall_ms = record_get_int(r, "exited_wall_ms", 0, INT64_MAX);
}

/* The labels that are strings without NUL bytes (others are left out):
 * 0, or -1 with a message in `err` when out of memory. */
static int
read_labels(struct record *rec, char *err, size_t errlen)
{
    const struct json_node *labels = json_get(rec->root, "labels");
    size_t i;

    if (labels != NULL && labels->type == JSON_OBJECT && labels->count > 0) {
        rec->labels = calloc(labels->count, sizeof(*rec->labels));
        if (rec->labels == NULL) {
            snprintf(err, errlen, "record: out of memory");
            return -1;
        }
        for (i = 0; i < labels->count; i++) {
            const struct json_node *m = labels->items[i];

            if (m->type != JSON_STRING || strlen(m->str) != m->len ||
                strlen(m->key) != m->key_len)
                continue;
            rec->labels[rec->meta.nlabels].key = (char *)m->key;
            rec->labels[rec->meta.nlabels].value = (char *)m->str;
            rec->meta.nlabels++;
        }
    }
    rec->meta.labels = rec->labels;
    return 0;
}

struct record *
record_parse(const char *json, size_t len, char *err, size_t errlen)
{
    struct json_limits lim = {.max_bytes = READ_BYTES,
                              .max_depth = 4,
                              .max_items = READ_ITEMS,
                              .max_string = READ_STRING};
    struct record *rec = NULL, *result = NULL;
    struct reader r = {.err = err, .errlen = errlen};

    rec = calloc(1, sizeof(*rec));
    if (rec == NULL) {
        snprintf(err, errlen, "record: out of memory");
        return NULL;
    }
    rec->root = json_parse(json, len, &lim, 0, err, errlen, NULL);
    if (rec->root == NULL || rec->root->type != JSON_OBJECT) {
        if (rec->root != NULL)
            snprintf(err, errlen, "record: not an object");
        goto out;
    }
    r.root = rec->root;
    if (record_get_int(&r, "v", 0, INT32_MAX) != RECORD_VERSION) {
        if (!r.bad)
            snprintf(err, errlen, "record: not version %d", RECORD_VERSION);
        goto out;
    }
    if (read_state(&r, &rec->lc) != 0)
        goto out;
    read_lc(&r, &rec->lc);
    read_meta(&r, &rec->meta);
    if (read_labels(rec, err, errlen) != 0 || r.bad)
        goto out;
    result = rec;
    rec = NULL;
out:
    record_free(rec);
    return result;
}

void
record_free(struct record *r)
{
    if (r == NULL)
        return;
    json_free(r->root);
    free(r->labels);
    free(r);
}

const struct lc *
record_lc(const struct record *r)
{
    return &r->lc;
}

const struct record_meta *
record_meta(const struct record *r)
{
    return &r->meta;
}
