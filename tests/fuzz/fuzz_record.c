/*
 * fuzz_record — a tracked container's durable record as reapd reads it
 * back from the state database after a restart (agent/record.h), through
 * record_parse.
 *
 * Checked: a record is refused with a message, or accepted with a
 * lifecycle whose fields are in range; and an accepted record written
 * out again (record_to_json) is read back to the very same text, so a
 * record that survives one restart survives every later one unchanged.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "lifecycle.h"
#include "record.h"

static void
check_ranges(const struct lc *c, const struct record_meta *m)
{
    size_t i;

    FUZZ_CHECK((unsigned)c->state < LC_NSTATES);
    FUZZ_CHECK((unsigned)c->p.action <= POLICY_REMOVE);
    FUZZ_CHECK(c->p.delay_ms >= 0 && c->p.warn_after_ms >= 0 &&
               c->p.give_up_after_ms >= 0);
    /* A wait without a poll interval or backoff would spin. */
    FUZZ_CHECK(c->p.poll_interval_ms >= 1 && c->p.retry_base_ms >= 1 &&
               c->p.retry_max_ms >= 1);
    FUZZ_CHECK((unsigned)c->source <= LC_SRC_EVENT);
    FUZZ_CHECK(c->task_deleted >= -1 && c->task_deleted <= 1);
    FUZZ_CHECK(m->die_nano >= 0 && m->exited_wall_ms >= 0);
    FUZZ_CHECK(m->nlabels == 0 || m->labels != NULL);
    for (i = 0; i < m->nlabels; i++)
        FUZZ_CHECK(m->labels[i].key != NULL && m->labels[i].value != NULL);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct record *r, *r2;
    char err[256], *json, *json2;
    size_t len = 0, len2 = 0;

    fuzz_quiet_logs();
    memset(err, 'x', sizeof(err));
    r = record_parse((const char *)data, size, err, sizeof(err));
    if (r == NULL) {
        FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL);
        FUZZ_CHECK(err[0] != '\0');
        return 0;
    }
    check_ranges(record_lc(r), record_meta(r));
    json = record_to_json(record_lc(r), record_meta(r), &len);
    FUZZ_CHECK(json != NULL && strlen(json) == len);
    r2 = record_parse(json, len, err, sizeof(err));
    FUZZ_CHECK(r2 != NULL);
    json2 = record_to_json(record_lc(r2), record_meta(r2), &len2);
    FUZZ_CHECK(json2 != NULL);
    FUZZ_CHECK(len2 == len && memcmp(json, json2, len) == 0);
    free(json2);
    record_free(r2);
    free(json);
    record_free(r);
    return 0;
}
