/*
 * json — bounded JSON documents built from yajl's streaming parser.
 *
 * Everything reapd reads from outside (engine responses, the events stream,
 * the config file) goes through here, so every document is limited in size,
 * depth, members per container and string length before it is believed.
 * A document lives in one arena: json_free() releases it in one step and
 * never recurses. Each node records the byte offset where its value (and
 * its member key) starts, so config errors can say FILE:LINE:COL; offsets
 * count from the first byte ever fed to the stream and are exact, also
 * for strings with escapes and whatever the chunking.
 *
 * Engine answers are not ours to refuse: a container may carry megabytes
 * of environment or a label value of hundreds of KB. With JSON_TRUNCATE a
 * stream degrades instead of failing: a string over max_string keeps a
 * prefix and is flagged (its rest is stepped over without ever reaching
 * yajl, so nothing buffers it), members over max_items are dropped and
 * counted, and a filter (json_stream_set_filter) leaves out whole subtrees
 * that the caller does not need, at the cost of lexing them only.
 */
#ifndef REAPD_JSON_H
#define REAPD_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum json_type {
    JSON_NULL,
    JSON_BOOL,
    JSON_NUMBER,
    JSON_STRING,
    JSON_OBJECT,
    JSON_ARRAY,
};

struct json_node {
    enum json_type type;
    const char *key; /* member name (NUL-terminated) in an object, or NULL */
    size_t key_len;
    /* STRING: the value; NUMBER: the literal text; both NUL-terminated. */
    const char *str;
    size_t len;
    int boolean;              /* BOOL */
    struct json_node **items; /* OBJECT members / ARRAY elements, in order */
    size_t count;
    size_t offset;     /* byte offset of the value's first character */
    size_t key_offset; /* byte offset of the member key's opening quote */
    /* JSON_TRUNCATE only. STRING: `str` is a prefix (at a UTF-8 and
     * escape boundary) of a value whose raw text was `raw_len` bytes.
     * OBJECT/ARRAY: `dropped` members or elements were left out over a
     * limit (not those a filter skipped as unwanted). */
    unsigned char truncated;
    unsigned char key_truncated; /* the member name is a prefix */
    size_t raw_len;
    size_t dropped;
};

struct json_limits {
    size_t max_bytes;   /* bytes in one document, from its first byte that
                           is not blank, comments included (0: 1 MiB) */
    unsigned max_depth; /* nesting of objects/arrays (0: 32) */
    size_t max_items;   /* members or elements in one container (0: 4096) */
    size_t max_string;  /* decoded bytes in one string or key
                           (0: 64 KiB); raw bytes with JSON_TRUNCATE */
};

enum json_flags {
    JSON_ALLOW_COMMENTS = 1 << 0, /* // and slash-star comments */
    JSON_MULTIPLE = 1 << 1,       /* a stream of concatenated documents */
    /* Degrade instead of failing on max_string and max_items (see the
     * top of this file). Not with JSON_ALLOW_COMMENTS. A bare token
     * (number, literal) longer than 1 KiB still fails. */
    JSON_TRUNCATE = 1 << 2,
};

/* What a filter returns besides a tag. */
#define JSON_SKIP (-1) /* not wanted: left out silently */
#define JSON_DROP (-2) /* wanted but over a limit: left out and counted */

/*
 * Decides, for each member of an object and each element of an array about
 * to be read, whether the document keeps it. `tag` is what the filter
 * returned for the enclosing object or array (0 for a document's root).
 * `key` is the member name (`key_len` bytes, not NUL-terminated; a prefix
 * when `key_truncated`), or NULL for the array element number `index`. Returns
 * a tag >= 0 to keep the value (the tag matters only for objects and
 * arrays, whose members it is then asked about), JSON_SKIP or JSON_DROP.
 * Values left out are still checked for syntax and depth, never built.
 */
typedef int (*json_filter_cb)(int tag, const char *key, size_t key_len,
                              int key_truncated, size_t index, void *arg);

/*
 * Called once per complete top-level value. The callee takes ownership of
 * `root` and must json_free() it. Return 0 to go on, non-zero to stop the
 * stream (json_stream_feed then returns -1 with error "stopped").
 * It must not feed, finish or free the stream that calls it.
 */
typedef int (*json_value_cb)(struct json_node *root, void *arg);

struct json_stream;

/* Returns NULL on allocation failure. `limits` may be NULL (defaults);
 * it is copied. `cb` may be NULL: documents are then only checked. */
struct json_stream *json_stream_new(const struct json_limits *limits,
                                    int flags, json_value_cb cb, void *arg);
void json_stream_free(struct json_stream *s);

/* Documents begun from now on live in chunks of 1 MiB mapped from the
 * system instead of the heap: for a document that may be tens of
 * megabytes (every container), whose memory must all go back when it is
 * freed, without a heap trim. */
void json_stream_set_mapped(struct json_stream *s, bool on);

/* Sets (or with NULL clears) the filter; before the first feed. */
void json_stream_set_filter(struct json_stream *s, json_filter_cb cb,
                            void *arg);

/*
 * Feeds the next chunk; chunk boundaries may fall anywhere. Returns 0, or
 * -1 on a parse error or a broken limit. Errors are sticky: after -1 every
 * later call fails too; start a new stream.
 */
int json_stream_feed(struct json_stream *s, const char *buf, size_t len);

/* Ends the input. Returns -1 if a document is incomplete ("truncated
 * document", also for an unfinished last token) or malformed, or if there
 * was no document at all without JSON_MULTIPLE ("empty document"). With
 * JSON_MULTIPLE, zero documents are fine. Calling it again returns the same;
 * feeding after it fails. */
int json_stream_finish(struct json_stream *s);

/* The error as one line of text (valid until the stream is freed), or NULL
 * if there was none; and the byte offset in the whole input where it was
 * detected (for a broken max_bytes: the first byte beyond the limit). */
const char *json_stream_error(const struct json_stream *s);
size_t json_stream_error_offset(const struct json_stream *s);
/* Did the stream fail because memory ran out (not because of the
 * input)? Then the input may be fine, and worth reading again. */
int json_stream_oom(const struct json_stream *s);
/* JSON_TRUNCATE: the bytes its string scanner has looked at, which must
 * stay within a small multiple of the bytes fed whatever the input (the
 * tests check it: a scan that started over at each byte would hold the
 * loop for seconds on a megabyte without a quote). */
size_t json_stream_scanned(const struct json_stream *s);

/* Where the document that failed began (its first byte that is not
 * blank), so a caller can resynchronise a stream of lines after it. */
size_t json_stream_error_doc_start(const struct json_stream *s);

/* Bytes of the current, still incomplete document (0 between documents,
 * and after an error). */
size_t json_stream_pending(const struct json_stream *s);

/* The message of an allocation failure, in json_parse's `err` and from
 * json_stream_error: the input may be fine. */
#define JSON_ERR_OOM "out of memory"

/*
 * Parses exactly one document; anything but blanks (and, if allowed,
 * comments) after it is an error. JSON_MULTIPLE in `flags` is ignored.
 * Returns the root (caller frees with json_free), or NULL with a message in
 * `err` (may be NULL) and the byte offset of the problem in `*err_offset`
 * (may be NULL).
 */
struct json_node *json_parse(const char *buf, size_t len,
                             const struct json_limits *limits, int flags,
                             char *err, size_t errlen, size_t *err_offset);

/* Frees a whole document given its root (never an inner node); NULL is
 * fine. Never recurses. */
void json_free(struct json_node *root);

/* Frees up to `max` chunks of a document's arena, and the document
 * itself once only the chunk holding it is left: 1 then (`root` is
 * gone), 0 while some remain (`root` stays valid but its contents must
 * not be read). Lets the owner of a document of tens of megabytes give
 * it back over several loop turns; NULL is fine (1). */
int json_free_some(struct json_node *root, size_t max);

/* As json_free, for a document `s` handed to its callback: its first
 * arena chunk is kept for the stream's next document, so a stream of
 * small documents (the events stream) allocates nothing per document. The
 * callback may call it; `root` is gone either way. */
void json_stream_release(struct json_stream *s, struct json_node *root);

/* The member `key` of an object, or NULL (also when `obj` is not an
 * object or is NULL). The last duplicate wins. */
const struct json_node *json_get(const struct json_node *obj, const char *key);

/* The string value, or NULL if `n` is not a string (or NULL). A "\u0000"
 * escape puts a NUL inside: compare `len` when that matters. */
const char *json_string(const struct json_node *n);

/* Integer value of a NUMBER that is an integer in range: no fraction or
 * exponent ("1.0", "1e3" fail; "-0" is 0). 0, or -1 leaving *out alone. */
int json_int64(const struct json_node *n, int64_t *out);

/* 1-based line and column (in bytes) of `offset` within `text`. */
void json_linecol(const char *text, size_t len, size_t offset, unsigned *line,
                  unsigned *col);

#endif
