/*
 * fuzz_events — the Docker events stream (agent/events.h), fed as the
 * docker client feeds it: in chunks cut wherever the input says, with
 * labels a policy names kept whatever the limits.
 *
 * Input: byte 0 holds flags (bits 0-3: how many chunk-size bytes follow;
 * bit 4: small limits, so the size, depth and label limits are reached;
 * bit 5: labels under "reapd." are wanted), then the chunk sizes
 * (fuzz.h), then the stream.
 *
 * Checked: no feed fails (only running out of memory may stop the
 * parser); no bytes are held across a newline (a line is the unit of
 * recovery); every event is a container event with a 64-hex id, an action
 * that matches its text, a believable time, labels within bounds.h, and
 * name/image taken from its attributes; and the same stream fed in one
 * piece gives the same events and counters — chunk boundaries must not
 * change what the daemon sees.
 */
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "events.h"
#include "fuzz.h"

#define F_CHUNKS 0x0f
#define F_SMALL  0x10
#define F_WANTED 0x20

struct seen {
    uint64_t hash; /* of every event's content, in order */
    uint64_t n;
    size_t max_attrs; /* the limit in force */
    bool wanted_on;   /* labels under "reapd." are kept beyond it */
};

static bool
wanted(const char *key, size_t len, void *arg)
{
    (void)arg;
    return len >= 6 && memcmp(key, "reapd.", 6) == 0;
}

static bool
is_meta(const char *key)
{
    return strcmp(key, "name") == 0 || strcmp(key, "image") == 0 ||
           strcmp(key, "exitCode") == 0;
}

/* ev->name or ev->image must be the value of an attribute of that key. */
static void
check_from_attrs(const struct docker_event *ev, const char *key, const char *v)
{
    size_t i;

    if (v == NULL)
        return;
    for (i = 0; i < ev->nattrs; i++)
        if (strcmp(ev->attrs[i].key, key) == 0 && ev->attrs[i].value == v)
            return;
    FUZZ_CHECK(!"name/image not among the attributes");
}

static uint64_t
hash_str(uint64_t h, const char *s)
{
    return s != NULL ? fuzz_hash(h, s, strlen(s) + 1) : fuzz_hash(h, "", 0);
}

static void
on_event(const struct docker_event *ev, void *arg)
{
    struct seen *s = arg;
    size_t i, others = 0, bytes = 0;
    uint64_t h = s->hash;
    int64_t nums[4];

    FUZZ_CHECK(ev->id != NULL && fuzz_is_hex(ev->id, 64));
    FUZZ_CHECK(ev->action_text != NULL && ev->action_text[0] != '\0');
    FUZZ_CHECK(ev->action == events_action_from_string(ev->action_text));
    FUZZ_CHECK(ev->time_nano >= 0 && ev->time_nano < INT64_MAX);
    FUZZ_CHECK(!ev->has_exit_code || ev->action == DOCKER_EV_DIE);
    FUZZ_CHECK(ev->nattrs == 0 || ev->attrs != NULL);
    for (i = 0; i < ev->nattrs; i++) {
        const struct event_attr *a = &ev->attrs[i];

        FUZZ_CHECK(a->key != NULL && a->value != NULL);
        FUZZ_CHECK(strlen(a->key) <= LIMIT_LABEL_KEY);
        FUZZ_CHECK(strlen(a->value) <= LIMIT_LABEL_VALUE);
        if (!is_meta(a->key) &&
            !(s->wanted_on && wanted(a->key, strlen(a->key), NULL))) {
            others++;
            bytes += strlen(a->key) + strlen(a->value);
        }
        h = hash_str(h, a->key);
        h = hash_str(h, a->value);
        h = fuzz_hash(h, &a->truncated, sizeof(a->truncated));
    }
    FUZZ_CHECK(others <= s->max_attrs);
    FUZZ_CHECK(bytes <= LIMIT_LABEL_BYTES);
    check_from_attrs(ev, "name", ev->name);
    check_from_attrs(ev, "image", ev->image);

    h = hash_str(h, ev->action_text);
    h = hash_str(h, ev->id);
    nums[0] = ev->time_nano;
    nums[1] = ev->has_exit_code ? ev->exit_code : -1000;
    nums[2] = (int64_t)ev->nattrs;
    nums[3] = (int64_t)ev->attrs_dropped;
    h = fuzz_hash(h, nums, sizeof(nums));
    s->hash = h;
    s->n++;
}

struct run {
    struct seen seen;
    uint64_t count, skipped, rejected;
    int64_t last_time;
    size_t pending;
};

/* Feeds `stream` through a new parser in the chunks `ch` gives (NULL:
 * in one piece) and records what came out. */
static void
run_parser(const uint8_t *stream, size_t len, uint8_t flags,
           struct fuzz_chunks *ch, struct run *out)
{
    struct events_limits lim = {0};
    struct events_parser *p;
    size_t off = 0, k, i, line = 0;

    memset(out, 0, sizeof(*out));
    out->seen.hash = FUZZ_HASH_INIT;
    if (flags & F_SMALL) {
        lim.max_event_bytes = 600;
        lim.max_depth = 3;
        lim.max_attrs = 3;
    }
    out->seen.max_attrs = lim.max_attrs ? lim.max_attrs : LIMIT_LABELS;
    out->seen.wanted_on = (flags & F_WANTED) != 0;
    p = events_parser_new(&lim, on_event, &out->seen);
    FUZZ_CHECK(p != NULL);
    if (flags & F_WANTED)
        events_parser_set_labels(p, wanted, NULL);
    while (off < len) {
        k = ch != NULL ? fuzz_chunks_next(ch, len - off) : len - off;
        FUZZ_CHECK(events_parser_feed(p, (const char *)stream + off, k) == 0);
        for (i = off; i < off + k; i++)
            if (stream[i] == '\n')
                line = i + 1;
        off += k;
        /* A line is the unit of recovery: nothing is held across one. */
        FUZZ_CHECK(events_parser_pending(p) <= off - line);
    }
    FUZZ_CHECK(events_parser_error(p) == NULL);
    out->count = events_parser_count(p);
    out->skipped = events_parser_skipped(p);
    out->rejected = events_parser_rejected(p);
    out->last_time = events_parser_last_time(p);
    out->pending = events_parser_pending(p);
    FUZZ_CHECK(out->count == out->seen.n);
    FUZZ_CHECK((events_parser_last_rejection(p) != NULL) ==
               (out->rejected > 0));
    events_parser_free(p);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_in in = {data, size};
    struct fuzz_chunks ch;
    struct run cut, whole;
    uint8_t flags;

    fuzz_quiet_logs();
    flags = fuzz_byte(&in);
    fuzz_chunks_init(&ch, &in, flags & F_CHUNKS);
    run_parser(in.p, in.n, flags, &ch, &cut);
    run_parser(in.p, in.n, flags, NULL, &whole);
    FUZZ_CHECK(cut.seen.n == whole.seen.n);
    FUZZ_CHECK(cut.seen.hash == whole.seen.hash);
    FUZZ_CHECK(cut.skipped == whole.skipped);
    FUZZ_CHECK(cut.rejected == whole.rejected);
    FUZZ_CHECK(cut.last_time == whole.last_time);
    FUZZ_CHECK(cut.pending == whole.pending);
    return 0;
}
