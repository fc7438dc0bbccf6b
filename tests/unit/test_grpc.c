/*
 * test_grpc — gRPC framing and status in agent/grpc.c.
 *
 * The reader sees whatever chunks libcurl hands over, so every multi-frame
 * input is fed in every chunk size from 1 to its whole length and must
 * give the same messages each time. Each input sits in a buffer of
 * exactly its length, so an over-read shows under ASan and valgrind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc.h"
#include "testutil.h"

/* ---- helpers ---------------------------------------------------------- */

/* What a reader delivered: all messages back to back, and their sizes. */
struct seen {
    uint8_t *bytes;
    size_t len, cap;
    size_t sizes[64];
    size_t n;
    size_t stop_after; /* 0: never ask to stop */
};

static int
collect(const uint8_t *msg, size_t len, void *arg)
{
    struct seen *s = arg;

    assert_non_null(msg); /* even for an empty message */
    assert_true(s->n < 64);
    if (s->len + len > s->cap) {
        s->cap = (s->len + len) * 2 + 16;
        s->bytes = realloc(s->bytes, s->cap);
        assert_non_null(s->bytes);
    }
    if (len > 0)
        memcpy(s->bytes + s->len, msg, len);
    s->len += len;
    s->sizes[s->n++] = len;
    return s->stop_after != 0 && s->n >= s->stop_after;
}

static void
seen_reset(struct seen *s)
{
    free(s->bytes);
    memset(s, 0, sizeof(*s));
}

/* A stream of frames holding messages of `sizes`; message i is filled
 * with bytes (i * 31 + j) so a mix-up of any two shows. */
static uint8_t *
make_stream(const size_t *sizes, size_t n, size_t *len, uint8_t **payload,
            size_t *payload_len)
{
    uint8_t *out = NULL, *pl = NULL;
    size_t i, j, total = 0, ptotal = 0;

    for (i = 0; i < n; i++) {
        uint8_t *m = malloc(sizes[i] ? sizes[i] : 1), *f;
        size_t flen;

        assert_non_null(m);
        for (j = 0; j < sizes[i]; j++)
            m[j] = (uint8_t)(i * 31 + j);
        f = grpc_frame(m, sizes[i], &flen);
        assert_non_null(f);
        assert_int_equal(flen, sizes[i] + 5);
        out = realloc(out, total + flen);
        pl = realloc(pl, ptotal + sizes[i] + 1);
        assert_non_null(out);
        assert_non_null(pl);
        memcpy(out + total, f, flen);
        memcpy(pl + ptotal, m, sizes[i]);
        total += flen;
        ptotal += sizes[i];
        free(f);
        free(m);
    }
    *len = total;
    *payload = pl;
    *payload_len = ptotal;
    return out;
}

/* Feeds `buf` in chunks of `step` bytes, each chunk in its own exact
 * allocation. Returns the last feed result. */
static int
feed_in_steps(struct grpc_reader *r, const uint8_t *buf, size_t len,
              size_t step)
{
    size_t off;
    int rc = 0;

    for (off = 0; off < len && rc == 0; off += step) {
        size_t n = len - off < step ? len - off : step;
        uint8_t *chunk = malloc(n);

        assert_non_null(chunk);
        memcpy(chunk, buf + off, n);
        rc = grpc_reader_feed(r, chunk, n);
        free(chunk);
    }
    return rc;
}

/* ---- framing ---------------------------------------------------------- */

static void
test_frame_round_trip(void **state)
{
    const uint8_t msg[] = {0x0a, 0x03, 'a', 'b', 'c'};
    const uint8_t *m;
    size_t flen, mlen;
    uint8_t *f;

    (void)state;
    f = grpc_frame(msg, sizeof(msg), &flen);
    assert_non_null(f);
    assert_int_equal(flen, sizeof(msg) + 5);
    assert_int_equal(f[0], 0);
    assert_int_equal(f[1], 0);
    assert_int_equal(f[2], 0);
    assert_int_equal(f[3], 0);
    assert_int_equal(f[4], sizeof(msg));
    assert_memory_equal(f + 5, msg, sizeof(msg));
    assert_int_equal(grpc_unframe(f, flen, 0, &m, &mlen), 0);
    assert_ptr_equal(m, f + 5);
    assert_int_equal(mlen, sizeof(msg));
    free(f);

    /* An empty message (what google.protobuf.Empty packs to). */
    f = grpc_frame(NULL, 0, &flen);
    assert_non_null(f);
    assert_int_equal(flen, 5);
    assert_memory_equal(f, "\0\0\0\0\0", 5);
    assert_int_equal(grpc_unframe(f, flen, 0, &m, &mlen), 0);
    assert_int_equal(mlen, 0);
    free(f);
}

static void
test_frame_length_big_endian(void **state)
{
    size_t n = 0x012345, flen, i;
    uint8_t *msg = calloc(1, n), *f;

    (void)state;
    assert_non_null(msg);
    for (i = 0; i < n; i++)
        msg[i] = (uint8_t)i;
    f = grpc_frame(msg, n, &flen);
    assert_non_null(f);
    assert_int_equal(f[1], 0x00);
    assert_int_equal(f[2], 0x01);
    assert_int_equal(f[3], 0x23);
    assert_int_equal(f[4], 0x45);
    assert_memory_equal(f + 5, msg, n);
    free(f);
    free(msg);
}

static void
test_unframe_rejects(void **state)
{
    const uint8_t two[] = {0, 0, 0, 0, 1, 'x', 0, 0, 0, 0, 0};
    const uint8_t cut[] = {0, 0, 0, 0, 3, 'x', 'y'};
    const uint8_t comp[] = {1, 0, 0, 0, 1, 'x'};
    const uint8_t flag[] = {0x48, 0, 0, 0, 1, 'x'};
    const uint8_t big[] = {0, 0, 0, 0, 4, 'a', 'b', 'c', 'd'};
    const uint8_t *m;
    size_t mlen;

    (void)state;
    assert_int_equal(grpc_unframe(NULL, 0, 0, &m, &mlen), -1);
    assert_int_equal(grpc_unframe(two, 4, 0, &m, &mlen), -1);
    assert_int_equal(grpc_unframe(two, sizeof(two), 0, &m, &mlen), -1);
    assert_int_equal(grpc_unframe(cut, sizeof(cut), 0, &m, &mlen), -1);
    assert_int_equal(grpc_unframe(comp, sizeof(comp), 0, &m, &mlen), -1);
    assert_int_equal(grpc_unframe(flag, sizeof(flag), 0, &m, &mlen), -1);
    assert_int_equal(grpc_unframe(big, sizeof(big), 3, &m, &mlen), -1);
    assert_int_equal(grpc_unframe(big, sizeof(big), 4, &m, &mlen), 0);
    assert_int_equal(mlen, 4);
}

/* ---- the reader --------------------------------------------------------- */

static void
test_every_chunk_size(void **state)
{
    const size_t sizes[] = {0, 1, 7, 0, 300, 2, 0, 129, 5, 1000, 0};
    const size_t n = sizeof(sizes) / sizeof(sizes[0]);
    uint8_t *stream, *payload;
    size_t len, plen, step, i;

    (void)state;
    stream = make_stream(sizes, n, &len, &payload, &plen);
    for (step = 1; step <= len; step++) {
        struct seen s = {0};
        struct grpc_reader *r = grpc_reader_new(1000, collect, &s);

        assert_non_null(r);
        assert_int_equal(feed_in_steps(r, stream, len, step), 0);
        assert_null(grpc_reader_error(r));
        assert_int_equal(grpc_reader_pending(r), 0);
        assert_int_equal(s.n, n);
        for (i = 0; i < n; i++)
            assert_int_equal(s.sizes[i], sizes[i]);
        assert_int_equal(s.len, plen);
        assert_memory_equal(s.bytes, payload, plen);
        grpc_reader_free(r);
        seen_reset(&s);
    }
    free(stream);
    free(payload);
}

/* A message larger than any chunk libcurl hands over. */
static void
test_large_message_small_chunks(void **state)
{
    const size_t sizes[] = {70000, 3, 70000};
    uint8_t *stream, *payload;
    size_t len, plen;
    const size_t steps[] = {1, 2, 5, 16384, 16389, 70004, 70005, 70006};
    size_t k;

    (void)state;
    stream = make_stream(sizes, 3, &len, &payload, &plen);
    for (k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
        struct seen s = {0};
        struct grpc_reader *r = grpc_reader_new(70000, collect, &s);

        assert_int_equal(feed_in_steps(r, stream, len, steps[k]), 0);
        assert_int_equal(s.n, 3);
        assert_memory_equal(s.bytes, payload, plen);
        grpc_reader_free(r);
        seen_reset(&s);
    }
    free(stream);
    free(payload);
}

static void
test_truncated(void **state)
{
    const size_t sizes[] = {10, 0, 20};
    uint8_t *stream, *payload;
    size_t len, plen, cut;

    (void)state;
    stream = make_stream(sizes, 3, &len, &payload, &plen);
    assert_int_equal(len, 45);
    for (cut = 0; cut <= len; cut++) {
        struct seen s = {0};
        struct grpc_reader *r = grpc_reader_new(0, collect, &s);
        size_t want_n, want_pending;
        uint8_t *head = malloc(cut ? cut : 1);

        assert_non_null(head);
        memcpy(head, stream, cut);
        assert_int_equal(grpc_reader_feed(r, head, cut), 0);
        free(head);
        /* Frames end at 15, 20 and 45. */
        if (cut < 15) {
            want_n = 0;
            want_pending = cut;
        } else if (cut < 20) {
            want_n = 1;
            want_pending = cut - 15;
        } else {
            want_n = cut == 45 ? 3 : 2;
            want_pending = cut == 45 ? 0 : cut - 20;
        }
        assert_int_equal(s.n, want_n);
        assert_int_equal(grpc_reader_pending(r), want_pending);
        assert_null(grpc_reader_error(r));
        /* The rest completes it. */
        assert_int_equal(grpc_reader_feed(r, stream + cut, len - cut), 0);
        assert_int_equal(s.n, 3);
        assert_int_equal(grpc_reader_pending(r), 0);
        grpc_reader_free(r);
        seen_reset(&s);
    }
    free(stream);
    free(payload);
}

static void
test_oversized(void **state)
{
    const size_t ok[] = {100};
    const size_t over[] = {101};
    uint8_t *stream, *payload;
    size_t len, plen, step;
    struct seen s = {0};
    struct grpc_reader *r;

    (void)state;
    /* Exactly the bound is fine, in any chunking. */
    stream = make_stream(ok, 1, &len, &payload, &plen);
    for (step = 1; step <= len; step++) {
        r = grpc_reader_new(100, collect, &s);
        assert_int_equal(feed_in_steps(r, stream, len, step), 0);
        assert_int_equal(s.n, 1);
        grpc_reader_free(r);
        seen_reset(&s);
    }
    free(stream);
    free(payload);

    /* One more fails as soon as the prefix is complete: the body is never
     * waited for (nor allocated). */
    stream = make_stream(over, 1, &len, &payload, &plen);
    r = grpc_reader_new(100, collect, &s);
    assert_int_equal(grpc_reader_feed(r, stream, 4), 0);
    assert_int_equal(grpc_reader_feed(r, stream + 4, 1), -1);
    assert_non_null(grpc_reader_error(r));
    assert_non_null(strstr(grpc_reader_error(r), "101"));
    assert_int_equal(s.n, 0);
    /* Sticky: even a good frame is refused now. */
    assert_int_equal(grpc_reader_feed(r, (const uint8_t *)"\0\0\0\0\0", 5),
                     -1);
    assert_int_equal(s.n, 0);
    grpc_reader_free(r);
    free(stream);
    free(payload);
}

static void
test_default_bound(void **state)
{
    /* 0 means 4 MiB. */
    const uint8_t at[] = {0, 0x00, 0x40, 0x00, 0x00};
    const uint8_t over[] = {0, 0x00, 0x40, 0x00, 0x01};
    struct seen s = {0};
    struct grpc_reader *r;

    (void)state;
    r = grpc_reader_new(0, collect, &s);
    assert_int_equal(grpc_reader_feed(r, at, sizeof(at)), 0);
    assert_int_equal(grpc_reader_pending(r), 5);
    grpc_reader_free(r);
    r = grpc_reader_new(0, collect, &s);
    assert_int_equal(grpc_reader_feed(r, over, sizeof(over)), -1);
    grpc_reader_free(r);
}

static void
test_compressed_rejected(void **state)
{
    const uint8_t good[] = {0, 0, 0, 0, 1, 'a'};
    const uint8_t comp[] = {1, 0, 0, 0, 1, 'b'};
    struct seen s = {0};
    struct grpc_reader *r;

    (void)state;
    r = grpc_reader_new(0, collect, &s);
    assert_int_equal(grpc_reader_feed(r, good, sizeof(good)), 0);
    assert_int_equal(grpc_reader_feed(r, comp, sizeof(comp)), -1);
    assert_non_null(strstr(grpc_reader_error(r), "compressed"));
    assert_int_equal(s.n, 1);
    assert_int_equal(grpc_reader_feed(r, good, sizeof(good)), -1);
    assert_int_equal(s.n, 1);
    grpc_reader_free(r);
    seen_reset(&s);
}

static void
test_garbage(void **state)
{
    static const struct {
        const char *bytes;
        size_t len;
    } inputs[] = {
        {"HTTP/1.1 400 Bad Request\r\n\r\n", 28},
        {"{\"message\":\"page not found\"}", 28},
        {"\x02\x00\x00\x00\x00", 5},
        {"\xff\xff\xff\xff\xff\xff", 6},
    };
    size_t i, step;
    uint32_t x = 12345;

    (void)state;
    for (i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
        for (step = 1; step <= inputs[i].len; step++) {
            struct seen s = {0};
            struct grpc_reader *r = grpc_reader_new(1024, collect, &s);

            assert_int_equal(feed_in_steps(r, (const uint8_t *)inputs[i].bytes,
                                           inputs[i].len, step),
                             -1);
            assert_non_null(grpc_reader_error(r));
            assert_int_equal(s.n, 0);
            grpc_reader_free(r);
        }
    }
    /* Random bytes: any outcome but a crash or an over-read. */
    for (i = 0; i < 2000; i++) {
        uint8_t buf[64];
        size_t j, n = 1 + i % 64;
        struct seen s = {0};
        struct grpc_reader *r = grpc_reader_new(32, collect, &s);

        for (j = 0; j < n; j++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            /* Mostly small lengths and flag 0, so frames do complete. */
            buf[j] = (uint8_t)(j % 5 == 0 ? (x % 8 == 0) : x % 40);
        }
        (void)feed_in_steps(r, buf, n, 1 + i % 7);
        grpc_reader_free(r);
        seen_reset(&s);
    }
}

static void
test_zero_length_messages(void **state)
{
    const uint8_t zeros[15] = {0};
    struct seen s = {0};
    struct grpc_reader *r;
    size_t step;

    (void)state;
    for (step = 1; step <= sizeof(zeros); step++) {
        r = grpc_reader_new(0, collect, &s);
        assert_int_equal(feed_in_steps(r, zeros, sizeof(zeros), step), 0);
        assert_int_equal(s.n, 3);
        assert_int_equal(s.len, 0);
        assert_int_equal(grpc_reader_pending(r), 0);
        grpc_reader_free(r);
        seen_reset(&s);
    }
}

static void
test_callback_stop(void **state)
{
    const size_t sizes[] = {3, 4, 5, 6};
    uint8_t *stream, *payload;
    size_t len, plen, step;

    (void)state;
    stream = make_stream(sizes, 4, &len, &payload, &plen);
    for (step = 1; step <= len; step++) {
        struct seen s = {0};
        struct grpc_reader *r;

        s.stop_after = 2;
        r = grpc_reader_new(0, collect, &s);
        assert_int_equal(feed_in_steps(r, stream, len, step), -1);
        assert_int_equal(s.n, 2);
        assert_non_null(grpc_reader_error(r));
        assert_int_equal(grpc_reader_feed(r, stream, len), -1);
        assert_int_equal(s.n, 2);
        grpc_reader_free(r);
        seen_reset(&s);
    }
    free(stream);
    free(payload);
}

/* ---- status ------------------------------------------------------------ */

static void
test_status_codes(void **state)
{
    char msg[64];

    (void)state;
    assert_int_equal(grpc_status(NULL, NULL, msg, sizeof(msg)), -1);
    assert_string_equal(msg, "");
    assert_int_equal(grpc_status(NULL, "late", msg, sizeof(msg)), -1);
    assert_int_equal(grpc_status("0", NULL, msg, sizeof(msg)), GRPC_OK);
    assert_string_equal(msg, "");
    assert_int_equal(grpc_status("5", NULL, NULL, 0), GRPC_NOT_FOUND);
    assert_int_equal(grpc_status("05", NULL, NULL, 0), GRPC_NOT_FOUND);
    assert_int_equal(grpc_status("14", NULL, NULL, 0), GRPC_UNAVAILABLE);
    assert_int_equal(grpc_status("16", NULL, NULL, 0), 16);
    assert_int_equal(grpc_status("9 ", NULL, NULL, 0),
                     GRPC_FAILED_PRECONDITION);
    /* Out of range or not a number: UNKNOWN. */
    assert_int_equal(grpc_status("17", NULL, NULL, 0), GRPC_UNKNOWN);
    assert_int_equal(grpc_status("99", NULL, NULL, 0), GRPC_UNKNOWN);
    assert_int_equal(grpc_status("005", NULL, NULL, 0), GRPC_UNKNOWN);
    assert_int_equal(grpc_status("-1", NULL, NULL, 0), GRPC_UNKNOWN);
    assert_int_equal(grpc_status("", NULL, NULL, 0), GRPC_UNKNOWN);
    assert_int_equal(grpc_status("ok", NULL, NULL, 0), GRPC_UNKNOWN);
    assert_int_equal(grpc_status("5x", NULL, NULL, 0), GRPC_UNKNOWN);
    assert_int_equal(grpc_status("+5", NULL, NULL, 0), GRPC_UNKNOWN);
    assert_int_equal(grpc_status("4294967301", NULL, NULL, 0), GRPC_UNKNOWN);
}

static void
test_status_message(void **state)
{
    char msg[64], small[6];

    (void)state;
    assert_int_equal(
        grpc_status("5", "task a1: not%20found", msg, sizeof(msg)),
        GRPC_NOT_FOUND);
    assert_string_equal(msg, "task a1: not found");
    /* UTF-8 passes through; control bytes, NUL and DEL do not. */
    grpc_status("2", "%E2%82%ac %0Aline%00end%7f", msg, sizeof(msg));
    assert_string_equal(msg, "\xe2\x82\xac ?line?end?");
    grpc_status("2", "raw\ttab", msg, sizeof(msg));
    assert_string_equal(msg, "raw?tab");
    /* A '%' without two hex digits stays. */
    grpc_status("2", "100% sure %zz %4", msg, sizeof(msg));
    assert_string_equal(msg, "100% sure %zz %4");
    grpc_status("2", "%", msg, sizeof(msg));
    assert_string_equal(msg, "%");
    grpc_status("2", "%4", msg, sizeof(msg));
    assert_string_equal(msg, "%4");
    /* Bounded: truncated, always terminated. */
    grpc_status("2", "abcdefghij", small, sizeof(small));
    assert_string_equal(small, "abcde");
    grpc_status("2", "%41%42%43%44%45%46", small, sizeof(small));
    assert_string_equal(small, "ABCDE");
    grpc_status("2", "x", small, 1);
    assert_string_equal(small, "");
    /* No room at all is fine too. */
    assert_int_equal(grpc_status("2", "x", NULL, 10), GRPC_UNKNOWN);
    assert_int_equal(grpc_status("2", "x", small, 0), GRPC_UNKNOWN);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_round_trip),
        cmocka_unit_test(test_frame_length_big_endian),
        cmocka_unit_test(test_unframe_rejects),
        cmocka_unit_test(test_every_chunk_size),
        cmocka_unit_test(test_large_message_small_chunks),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_oversized),
        cmocka_unit_test(test_default_bound),
        cmocka_unit_test(test_compressed_rejected),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_zero_length_messages),
        cmocka_unit_test(test_callback_stop),
        cmocka_unit_test(test_status_codes),
        cmocka_unit_test(test_status_message),
    };

    tu_test_filters(); /* REAPD_TEST_ONLY, TEST_FILTER */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
