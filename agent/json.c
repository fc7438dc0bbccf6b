/*
 * json — bounded JSON trees built from yajl's event callbacks (json.h).
 *
 * yajl tokenises; the callbacks here check every limit the moment a token
 * arrives and append the value to a tree that lives in one arena per
 * document, so hostile input costs at most what the limits allow and a
 * document is freed by walking a list of chunks, never the tree.
 *
 * Offsets. yajl only says where a token ends (yajl_get_bytes_consumed), and
 * for strings it hands over the decoded text, whose length differs from the
 * raw one when there are escapes. So the bytes between tokens (blanks, ','
 * ':' and comments) are scanned here, resumably across chunks: the first
 * byte that is not part of such a gap is where the next token starts. This
 * gives exact offsets for every token, escaped strings included, whatever
 * the chunking, and only ever looks at gap bytes. Should the scan ever
 * disagree with yajl, the start is derived from the token length instead
 * (for an escaped string that lands inside it, still on the same line,
 * because JSON strings cannot hold a raw newline).
 */
#include "json.h"

#include <limits.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <yajl/yajl_parse.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define DEFAULT_MAX_BYTES  ((size_t)1024 * 1024)
#define DEFAULT_MAX_DEPTH  32u
#define DEFAULT_MAX_ITEMS  ((size_t)4096)
#define DEFAULT_MAX_STRING ((size_t)64 * 1024)

/* Arena chunks grow geometrically: small documents (one event) take one
 * small chunk, big ones a few dozen, never one malloc per node. */
#define CHUNK_FIRST ((size_t)4096)
#define CHUNK_MAX   ((size_t)64 * 1024)

/* A mapped arena's chunks (json_stream_set_mapped): each one a mapping of
 * its own, so a document of tens of megabytes leaves no hole in the heap
 * when it goes, and can go a few chunks at a time (json_free_some). */
#define CHUNK_MAPPED ((size_t)1024 * 1024)

struct chunk {
    struct chunk *next;
    size_t size; /* usable bytes in data[] */
    size_t used;
    size_t map_len; /* the whole mapping; 0: from malloc */
    unsigned char data[];
};

struct arena {
    struct chunk *head; /* small allocations are carved from here */
    size_t next_size;
    bool mapped;
};

/* What json_free() receives is &doc->root: the root must stay first. */
struct json_doc {
    struct json_node root;
    struct arena arena;
};

/* An open object or array. */
struct frame {
    struct json_node *node; /* NULL inside a value that is left out */
    size_t cap;             /* slots in node->items */
    const char *key;        /* objects: the key still waiting for its value */
    size_t key_len;
    size_t key_offset;
    int key_truncated;
    int tag;      /* the filter's tag for this container */
    int next_tag; /* objects: the filter's answer for the pending key */
    size_t seen;  /* arrays: elements so far, kept or not */
};

/* Where the string scanner in front of yajl is (JSON_TRUNCATE). */
enum scan {
    SCAN_OUT,  /* between strings */
    SCAN_IN,   /* inside a string that still fits */
    SCAN_SKIP, /* inside a string over max_string: stepping over it */
};

/* The longest number or literal yajl may have to buffer. */
#define BARE_MAX ((size_t)1024)

/* Where the gap scanner is, between two tokens. */
enum gap {
    GAP_BLANK,      /* blanks, ',' or ':' */
    GAP_SLASH,      /* a '/' that opens a comment */
    GAP_LINE,       /* inside a // comment */
    GAP_BLOCK,      /* inside a block comment */
    GAP_BLOCK_STAR, /* a '*' inside a block comment */
    GAP_DONE,       /* the next token starts at tok_start */
};

struct json_stream {
    yajl_handle h;
    struct json_limits lim;
    int flags;
    json_value_cb cb;
    void *arg;

    /* The chunk yajl is working on; callbacks read the gap bytes in it. */
    const unsigned char *chunk;
    size_t base;    /* offset of chunk[0] in the whole input */
    size_t total;   /* bytes fed so far */
    size_t scanned; /* bytes the string scanner looked at (see json.h) */

    enum gap gap;
    size_t gap_pos;   /* bytes before this are scanned */
    size_t tok_start; /* valid in GAP_DONE */

    struct json_doc *doc; /* document under construction, or NULL */
    struct chunk *spare;  /* a released document's first chunk */
    bool mapped;          /* new documents get mapped arenas */
    struct frame *stack;
    unsigned depth; /* open containers */
    unsigned stack_cap;

    int doc_open;     /* a document has begun and not ended */
    size_t doc_start; /* its first byte that is not blank */
    size_t ndocs;

    json_filter_cb filter;
    void *filter_arg;
    int value_tag; /* the tag new_value() decided for the value it made */

    /* The string scanner (JSON_TRUNCATE). Bytes reach yajl only up to a
     * point where a string can be cut (not inside an escape or a UTF-8
     * sequence); the few bytes after it wait in `carry`. */
    enum scan scan;
    unsigned esc;      /* 0; 1 after a backslash; 2..5: \u digits + 1 */
    unsigned utf_left; /* continuation bytes still due */
    size_t sraw;       /* raw bytes of the current string so far */
    size_t safe_at;    /* input offset just past the last safe cut */
    size_t bare;       /* bytes of the current number or literal */
    unsigned char carry[16];
    size_t carry_len;
    size_t carry_at;  /* input offset of carry[0] */
    int trunc_next;   /* the next string yajl reports was cut short */
    size_t trunc_raw; /* ... and this is its whole raw length */

    int failed;
    int oom; /* the failure was an allocation, not the input */
    int finished;
    size_t err_offset;
    size_t err_doc;
    char err[160];
};

/* What new_value() returns for a value that is left out. */
static struct json_node skipped_value;

/* ---- arena ---------------------------------------------------------- */

static size_t
align_pad(const void *p, size_t align)
{
    return (align - ((uintptr_t)p & (align - 1))) & (align - 1);
}

/* A chunk with `size` usable bytes (more when mapped: the mapping's
 * whole length); NULL if out of memory. */
static struct chunk *
chunk_new(const struct arena *a, size_t size)
{
    struct chunk *c;
    size_t len;

    if (!a->mapped) {
        c = malloc(sizeof *c + size);
        if (c == NULL)
            return NULL;
        c->size = size;
        c->map_len = 0;
        return c;
    }
    len = sizeof *c + size <= CHUNK_MAPPED
              ? CHUNK_MAPPED
              : (sizeof *c + size + CHUNK_MAPPED - 1) & ~(CHUNK_MAPPED - 1);
    c = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
             -1, 0);
    if (c == MAP_FAILED)
        return NULL;
    c->size = len - sizeof *c;
    c->map_len = len;
    return c;
}

static void
chunk_free(struct chunk *c)
{
    if (c->map_len != 0)
        munmap(c, c->map_len);
    else
        free(c);
}

/* Adds a chunk big enough for `size` bytes at `align`; NULL if out of
 * memory. A request too big for the regular chunk size gets a chunk of its
 * own, linked behind the head so the head's free space is not lost. */
static struct chunk *
arena_grow(struct arena *a, size_t size, size_t align)
{
    struct chunk *c;
    size_t want;

    if (size > SIZE_MAX / 2)
        return NULL;
    want = size + align - 1;
    if (a->next_size == 0)
        a->next_size = CHUNK_FIRST;
    if (want > SIZE_MAX - sizeof *c - CHUNK_MAPPED)
        return NULL;
    /* Mapped: any request a regular chunk takes makes a regular chunk. */
    if (want > (a->mapped ? CHUNK_MAPPED - sizeof *c : a->next_size)) {
        c = chunk_new(a, want);
        if (c == NULL)
            return NULL;
        c->used = 0;
        if (a->head != NULL) {
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = NULL;
            a->head = c;
        }
        return c;
    }
    c = chunk_new(a, a->next_size);
    if (c == NULL)
        return NULL;
    c->used = 0;
    c->next = a->head;
    a->head = c;
    if (a->next_size < CHUNK_MAX)
        a->next_size *= 2;
    return c;
}

/* `align` must be a power of two. The memory belongs to the arena. */
static void *
arena_alloc(struct arena *a, size_t size, size_t align)
{
    struct chunk *c = a->head;
    size_t pad;

    if (c != NULL) {
        pad = align_pad(c->data + c->used, align);
        if (pad <= c->size - c->used && size <= c->size - c->used - pad)
            goto found;
    }
    c = arena_grow(a, size, align);
    if (c == NULL)
        return NULL;
    pad = align_pad(c->data + c->used, align);
found:
    c->used += pad;
    c->used += size;
    return c->data + c->used - size;
}

/* A NUL-terminated copy of `len` bytes, owned by the arena. */
static char *
arena_strdup(struct arena *a, const void *src, size_t len)
{
    char *p = arena_alloc(a, len + 1, 1);

    if (p == NULL)
        return NULL;
    if (len > 0)
        memcpy(p, src, len);
    p[len] = '\0';
    return p;
}

void
json_free(struct json_node *root)
{
    struct chunk *c, *next;

    if (root == NULL)
        return;
    /* The document itself lives in one of the chunks: read the list head
     * before anything is released. */
    c = ((struct json_doc *)root)->arena.head;
    while (c != NULL) {
        next = c->next;
        chunk_free(c);
        c = next;
    }
}

static bool
chunk_holds(const struct chunk *c, const void *p)
{
    return (const unsigned char *)p >= c->data &&
           (const unsigned char *)p < c->data + c->size;
}

int
json_free_some(struct json_node *root, size_t max)
{
    struct json_doc *d = (struct json_doc *)root;
    struct chunk **pp, *c;

    if (root == NULL)
        return 1;
    /* Every chunk but the one holding the document itself (and with it
     * the list's head) goes first. */
    for (pp = &d->arena.head; (c = *pp) != NULL;) {
        if (chunk_holds(c, d)) {
            pp = &c->next;
            continue;
        }
        if (max == 0)
            return 0;
        *pp = c->next;
        chunk_free(c);
        max--;
    }
    json_free(root);
    return 1;
}

/* ---- errors and bookkeeping ------------------------------------------ */

/* Records the first error only; returns 0 so callbacks can hand the value
 * straight back to yajl, which then stops. */
__attribute__((format(printf, 3, 4))) static int
fail(struct json_stream *s, size_t offset, const char *fmt, ...)
{
    va_list ap;

    if (s->failed)
        return 0;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    s->failed = 1;
    s->err_offset = offset;
    s->err_doc = s->doc_open ? s->doc_start : offset;
    return 0;
}

/* As fail(), for an allocation that failed: the input may be fine. */
static int
fail_oom(struct json_stream *s, size_t offset)
{
    if (!s->failed)
        s->oom = 1;
    return fail(s, offset, "%s", JSON_ERR_OOM);
}

/* yajl's message, made one line: it ends in a newline and, verbose or not,
 * may hold more. */
static void
fail_yajl(struct json_stream *s, size_t offset)
{
    unsigned char *msg = yajl_get_error(s->h, 0, NULL, 0);
    char *p, *end;

    fail(s, offset, "%s", msg != NULL ? (const char *)msg : "parse error");
    if (msg != NULL)
        yajl_free_error(s->h, msg);
    for (p = s->err; *p != '\0'; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t')
            *p = ' ';
    end = s->err + strlen(s->err);
    while (end > s->err && end[-1] == ' ')
        *--end = '\0';
}

static void
drop_doc(struct json_stream *s)
{
    if (s->doc != NULL)
        json_free(&s->doc->root);
    s->doc = NULL;
    s->depth = 0;
}

static int
is_blank(unsigned char c)
{
    /* The set yajl's lexer skips. */
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
           c == '\f';
}

/*
 * Scans the gap in the current chunk up to index `upto` until the next
 * token's first byte. Between documents the first byte that is not blank
 * (a comment counts) opens the next document, so comments are bounded by
 * max_bytes like everything yajl may buffer.
 */
static void
gap_scan(struct json_stream *s, size_t upto)
{
    size_t i;
    unsigned char c;

    if (s->gap == GAP_DONE)
        return;
    if (s->gap_pos < s->base)
        s->gap_pos = s->base; /* bytes stepped over were no gap */
    for (i = s->gap_pos - s->base; i < upto && s->gap != GAP_DONE; i++) {
        c = s->chunk[i];
        switch (s->gap) {
        case GAP_BLANK:
            if (is_blank(c) || c == ',' || c == ':')
                break;
            if (s->depth == 0 && !s->doc_open) {
                s->doc_open = 1;
                s->doc_start = s->base + i;
            }
            if (c == '/' && (s->flags & JSON_ALLOW_COMMENTS)) {
                s->gap = GAP_SLASH;
                break;
            }
            s->gap = GAP_DONE;
            s->tok_start = s->base + i;
            break;
        case GAP_SLASH:
            /* Anything else is a lexical error yajl reports itself. */
            s->gap = c == '/' ? GAP_LINE : GAP_BLOCK;
            break;
        case GAP_LINE:
            if (c == '\n')
                s->gap = GAP_BLANK;
            break;
        case GAP_BLOCK:
            if (c == '*')
                s->gap = GAP_BLOCK_STAR;
            break;
        case GAP_BLOCK_STAR:
            if (c == '/')
                s->gap = GAP_BLANK;
            else if (c != '*')
                s->gap = GAP_BLOCK;
            break;
        case GAP_DONE:
            break;
        }
    }
    s->gap_pos = s->base + i;
}

static size_t
tok_end(const struct json_stream *s)
{
    return s->base + yajl_get_bytes_consumed(s->h);
}

/*
 * Every callback starts here: finds where the token starts (`rawlen` is its
 * length in the input, or a lower bound, for the fallback) and checks the
 * document's size. Returns 0 if a limit is broken.
 */
static int
token_begin(struct json_stream *s, size_t rawlen, size_t *start)
{
    size_t end = tok_end(s);

    gap_scan(s, end - s->base);
    if (s->gap == GAP_DONE)
        *start = s->tok_start;
    else
        *start = end >= rawlen ? end - rawlen : 0;
    if (s->depth == 0 && !s->doc_open) {
        s->doc_open = 1;
        s->doc_start = *start;
    }
    if (end - s->doc_start > s->lim.max_bytes)
        return fail(s, s->doc_start + s->lim.max_bytes,
                    "document exceeds %zu bytes", s->lim.max_bytes);
    return 1;
}

static void
token_end(struct json_stream *s)
{
    s->gap = GAP_BLANK;
    s->gap_pos = tok_end(s);
}

/* ---- tree building --------------------------------------------------- */

static int
new_doc(struct json_stream *s)
{
    struct arena a = {NULL, 0, s->mapped};
    struct json_doc *d;

    if (s->spare != NULL && !s->mapped) {
        a.head = s->spare;
        a.next_size = s->spare->size * 2;
        s->spare = NULL;
    }
    d = arena_alloc(&a, sizeof *d, alignof(struct json_doc));
    if (d == NULL)
        return -1;
    memset(d, 0, sizeof *d);
    d->arena = a;
    s->doc = d;
    return 0;
}

static int
add_child(struct json_stream *s, struct frame *f, struct json_node *n)
{
    struct json_node *parent = f->node;
    struct json_node **items;
    size_t cap;

    if (parent->count == f->cap) {
        /* The outgrown array stays in the arena: at most as much waste
         * as the final array, and nothing to free separately. */
        cap = f->cap ? f->cap * 2 : 4;
        if (cap > s->lim.max_items)
            cap = s->lim.max_items;
        if (cap > SIZE_MAX / sizeof *items)
            return -1;
        items = arena_alloc(&s->doc->arena, cap * sizeof *items,
                            alignof(struct json_node *));
        if (items == NULL)
            return -1;
        if (parent->count > 0)
            memcpy(items, parent->items, parent->count * sizeof *items);
        parent->items = items;
        f->cap = cap;
    }
    parent->items[parent->count++] = n;
    return 0;
}

/* A new node for a value starting at `start`, linked into its parent (or
 * the root of a new document); NULL after recording an error. */
static struct json_node *
new_value(struct json_stream *s, enum json_type type, size_t start)
{
    struct json_node *n;
    struct frame *f;

    s->value_tag = 0;
    if (s->depth == 0) {
        if (new_doc(s) != 0)
            goto oom;
        n = &s->doc->root;
    } else {
        f = &s->stack[s->depth - 1];
        if (f->node == NULL)
            return &skipped_value;
        if (f->node->type == JSON_ARRAY) {
            s->value_tag =
                s->filter == NULL
                    ? 0
                    : s->filter(f->tag, NULL, 0, 0, f->seen, s->filter_arg);
            f->seen++;
            if (s->value_tag >= 0 && f->node->count >= s->lim.max_items) {
                if (!(s->flags & JSON_TRUNCATE)) {
                    fail(s, start, "array has more than %zu elements",
                         s->lim.max_items);
                    return NULL;
                }
                s->value_tag = JSON_DROP;
            }
        } else {
            s->value_tag = f->next_tag;
        }
        if (s->value_tag == JSON_DROP) {
            f->node->dropped++;
            f->node->truncated = 1;
        }
        if (s->value_tag < 0) {
            f->key = NULL;
            return &skipped_value;
        }
        n = arena_alloc(&s->doc->arena, sizeof *n, alignof(struct json_node));
        if (n == NULL)
            goto oom;
        memset(n, 0, sizeof *n);
        if (add_child(s, f, n) != 0)
            goto oom;
        if (f->node->type == JSON_OBJECT) {
            n->key = f->key;
            n->key_len = f->key_len;
            n->key_offset = f->key_offset;
            n->key_truncated = (unsigned char)f->key_truncated;
            f->key = NULL;
        }
    }
    n->type = type;
    n->offset = start;
    return n;
oom:
    fail_oom(s, start);
    return NULL;
}

/* Hands a finished document to the callback, which now owns it. */
static int
end_doc(struct json_stream *s)
{
    struct json_doc *d = s->doc;
    size_t end = tok_end(s);

    s->doc = NULL;
    s->doc_open = 0;
    s->ndocs++;
    if (s->cb == NULL) {
        json_free(&d->root);
        return 1;
    }
    if (s->cb(&d->root, s->arg) != 0)
        return fail(s, end, "stopped");
    return 1;
}

static int
on_scalar(struct json_stream *s, enum json_type type, const void *text,
          size_t len, size_t rawlen)
{
    struct json_node *n;
    size_t start;

    int cut = 0;
    size_t raw = 0;

    if (type == JSON_STRING) {
        cut = s->trunc_next;
        raw = s->trunc_raw;
        s->trunc_next = 0;
        if (cut)
            rawlen = 1; /* the stepped-over text is no token length */
    }
    if (!token_begin(s, rawlen, &start))
        return 0;
    if (type == JSON_STRING && len > s->lim.max_string)
        return fail(s, start, "string longer than %zu bytes",
                    s->lim.max_string);
    n = new_value(s, type, start);
    if (n == NULL)
        return 0;
    if (n == &skipped_value) {
        token_end(s);
        return 1;
    }
    n->truncated = (unsigned char)cut;
    n->raw_len = cut ? raw : 0;
    if (text != NULL) {
        n->str = arena_strdup(&s->doc->arena, text, len);
        if (n->str == NULL)
            return fail_oom(s, start);
        n->len = len;
    }
    token_end(s);
    return s->depth == 0 ? end_doc(s) : 1;
}

static int
cb_null(void *ctx)
{
    return on_scalar(ctx, JSON_NULL, NULL, 0, 4);
}

static int
cb_boolean(void *ctx, int value)
{
    struct json_stream *s = ctx;
    size_t start;
    struct json_node *n;

    /* on_scalar() would hand a top-level value over before the flag is
     * set, so booleans take the long way. */
    if (!token_begin(s, value ? 4 : 5, &start))
        return 0;
    n = new_value(s, JSON_BOOL, start);
    if (n == NULL)
        return 0;
    if (n != &skipped_value)
        n->boolean = value != 0;
    token_end(s);
    return s->depth == 0 ? end_doc(s) : 1;
}

static int
cb_number(void *ctx, const char *text, size_t len)
{
    return on_scalar(ctx, JSON_NUMBER, text, len, len);
}

static int
cb_string(void *ctx, const unsigned char *text, size_t len)
{
    return on_scalar(ctx, JSON_STRING, text, len, len + 2);
}

static int
cb_key(void *ctx, const unsigned char *text, size_t len)
{
    struct json_stream *s = ctx;
    struct frame *f = &s->stack[s->depth - 1];
    int cut = s->trunc_next;
    size_t start;

    s->trunc_next = 0;
    if (!token_begin(s, cut ? 1 : len + 2, &start))
        return 0;
    if (len > s->lim.max_string)
        return fail(s, start, "key longer than %zu bytes", s->lim.max_string);
    if (f->node == NULL) {
        token_end(s);
        return 1;
    }
    f->next_tag = 0;
    if (s->filter != NULL)
        f->next_tag =
            s->filter(f->tag, (const char *)text, len, cut, 0, s->filter_arg);
    if (f->next_tag >= 0 && f->node->count >= s->lim.max_items) {
        if (!(s->flags & JSON_TRUNCATE))
            return fail(s, start, "object has more than %zu members",
                        s->lim.max_items);
        f->next_tag = JSON_DROP;
    }
    if (f->next_tag < 0) {
        token_end(s);
        return 1;
    }
    f->key_truncated = cut;
    f->key = arena_strdup(&s->doc->arena, text, len);
    if (f->key == NULL)
        return fail_oom(s, start);
    f->key_len = len;
    f->key_offset = start;
    token_end(s);
    return 1;
}

static int
on_open(struct json_stream *s, enum json_type type)
{
    struct json_node *n;
    struct frame *f;
    unsigned cap;
    size_t start;

    if (!token_begin(s, 1, &start))
        return 0;
    if (s->depth >= s->lim.max_depth)
        return fail(s, start, "nesting deeper than %u", s->lim.max_depth);
    if (s->depth == s->stack_cap) {
        cap = s->stack_cap ? s->stack_cap * 2 : 8;
        if (cap > s->lim.max_depth)
            cap = s->lim.max_depth;
        f = realloc(s->stack, cap * sizeof *f);
        if (f == NULL)
            return fail_oom(s, start);
        s->stack = f;
        s->stack_cap = cap;
    }
    n = new_value(s, type, start);
    if (n == NULL)
        return 0;
    f = &s->stack[s->depth++];
    memset(f, 0, sizeof *f);
    if (n != &skipped_value) {
        f->node = n;
        f->tag = s->value_tag;
    }
    token_end(s);
    return 1;
}

static int
cb_start_map(void *ctx)
{
    return on_open(ctx, JSON_OBJECT);
}

static int
cb_start_array(void *ctx)
{
    return on_open(ctx, JSON_ARRAY);
}

static int
cb_end(void *ctx)
{
    struct json_stream *s = ctx;
    size_t start;

    if (!token_begin(s, 1, &start))
        return 0;
    s->depth--;
    token_end(s);
    return s->depth == 0 ? end_doc(s) : 1;
}

static const yajl_callbacks callbacks = {
    .yajl_null = cb_null,
    .yajl_boolean = cb_boolean,
    .yajl_number = cb_number,
    .yajl_string = cb_string,
    .yajl_start_map = cb_start_map,
    .yajl_map_key = cb_key,
    .yajl_end_map = cb_end,
    .yajl_start_array = cb_start_array,
    .yajl_end_array = cb_end,
};

/* ---- streams --------------------------------------------------------- */

struct json_stream *
json_stream_new(const struct json_limits *limits, int flags, json_value_cb cb,
                void *arg)
{
    struct json_stream *s = calloc(1, sizeof *s);

    if (s == NULL)
        return NULL;
    if (limits != NULL)
        s->lim = *limits;
    if (s->lim.max_bytes == 0)
        s->lim.max_bytes = DEFAULT_MAX_BYTES;
    if (s->lim.max_depth == 0)
        s->lim.max_depth = DEFAULT_MAX_DEPTH;
    if (s->lim.max_items == 0)
        s->lim.max_items = DEFAULT_MAX_ITEMS;
    if (s->lim.max_string == 0)
        s->lim.max_string = DEFAULT_MAX_STRING;
    if (flags & JSON_TRUNCATE)
        flags &= ~JSON_ALLOW_COMMENTS; /* the scanner knows no comments */
    s->flags = flags;
    s->cb = cb;
    s->arg = arg;
    s->gap = GAP_BLANK;
    s->h = yajl_alloc(&callbacks, NULL, s);
    if (s->h == NULL) {
        free(s);
        return NULL;
    }
    if (flags & JSON_ALLOW_COMMENTS)
        yajl_config(s->h, yajl_allow_comments, 1);
    if (flags & JSON_MULTIPLE)
        yajl_config(s->h, yajl_allow_multiple_values, 1);
    return s;
}

void
json_stream_free(struct json_stream *s)
{
    if (s == NULL)
        return;
    drop_doc(s);
    free(s->spare);
    yajl_free(s->h);
    free(s->stack);
    free(s);
}

void
json_stream_release(struct json_stream *s, struct json_node *root)
{
    struct json_doc *d = (struct json_doc *)root;
    struct chunk *c, *next, *keep = NULL;

    if (root == NULL)
        return;
    /* The chunk holding the document itself is its first and smallest. */
    for (c = d->arena.head; c != NULL; c = next) {
        next = c->next;
        if (keep == NULL && s->spare == NULL && c->map_len == 0 &&
            chunk_holds(c, d)) {
            keep = c;
            continue;
        }
        chunk_free(c);
    }
    if (keep != NULL) {
        keep->used = 0;
        keep->next = NULL;
        s->spare = keep;
    }
}

void
json_stream_set_mapped(struct json_stream *s, bool on)
{
    s->mapped = on;
}

void
json_stream_set_filter(struct json_stream *s, json_filter_cb cb, void *arg)
{
    s->filter = cb;
    s->filter_arg = arg;
}

/* ---- the string scanner (JSON_TRUNCATE) ------------------------------ */

/* Hands `n` input bytes at input offset `at` to yajl. */
static int
piece(struct json_stream *s, const unsigned char *p, size_t n, size_t at)
{
    yajl_status st;

    if (n == 0)
        return 0;
    s->chunk = p;
    s->base = at;
    st = yajl_parse(s->h, p, n);
    if (st != yajl_status_ok && !s->failed)
        fail_yajl(s, tok_end(s));
    if (!s->failed)
        gap_scan(s, n);
    s->chunk = NULL;
    return s->failed ? -1 : 0;
}

/* Hands yajl the input up to offset `to`: the carry first, then buf[from..]
 * (buf[0] is at offset `at0`). What of the carry lies past `to` stays. */
static int
hand_upto(struct json_stream *s, const unsigned char *buf, size_t from,
          size_t at0, size_t to)
{
    size_t k;

    if (s->carry_len > 0) {
        k = to - s->carry_at;
        if (k > s->carry_len)
            k = s->carry_len;
        if (piece(s, s->carry, k, s->carry_at) != 0)
            return -1;
        s->carry_len -= k;
        s->carry_at += k;
        memmove(s->carry, s->carry + k, s->carry_len);
        if (s->carry_len > 0)
            return 0;
    }
    if (to > at0 + from)
        return piece(s, buf + from, to - at0 - from, at0 + from);
    return 0;
}

/*
 * The first quote, or (with `bs`) the first quote or backslash, in
 * [p, end); `end` if none. Sixteen bytes at a time with SSE2 (every
 * x86-64 has it), else eight as one word; strings and gaps in engine
 * answers are short, where memchr's setup costs more than it saves.
 */
#define ONES  UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)
#define HAS_BYTE(w, c)                                                        \
    ((((w) ^ (ONES * (c))) - ONES) & ~((w) ^ (ONES * (c))) & HIGHS)

static const unsigned char *
find_stop(const unsigned char *p, const unsigned char *end, int bs)
{
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i slash = _mm_set1_epi8(bs ? '\\' : '"');
    __m128i v;
    int m;

    while (end - p >= 16) {
        v = _mm_loadu_si128((const __m128i *)(const void *)p);
        m = _mm_movemask_epi8(
            _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, slash)));
        if (m != 0)
            return p + __builtin_ctz((unsigned)m);
        p += 16;
    }
#else
    uint64_t w;

    while (end - p >= 8) {
        memcpy(&w, p, 8);
        if (HAS_BYTE(w, '"') || (bs && HAS_BYTE(w, '\\')))
            break;
        p += 8;
    }
#endif
    while (p < end && *p != '"' && !(bs && *p == '\\'))
        p++;
    return p;
}

static int
structural(unsigned char c)
{
    return is_blank(c) || c == ',' || c == ':' || c == '{' || c == '}' ||
           c == '[' || c == ']';
}

/* Where feed_cutting is in its chunk. */
struct cut {
    const unsigned char *buf, *end;
    size_t len;
    size_t at0;  /* the input offset of buf[0] */
    size_t i;    /* the next byte to look at */
    size_t from; /* the first byte not yet handed to yajl or stepped over */
    /* What the last scans found: no stop byte in [out_from, out_at)
     * between strings, none in [in_from, in_at) inside one (a stop or
     * the chunk's end at the upper bound). Bytes there that must be
     * stepped one by one are not looked at again, or a long run of them
     * would be scanned once per byte. */
    size_t out_from, out_at, in_from, in_at;
};

/* A string opens; a cut may fall at `safe_at` at the earliest. */
static void
string_opens(struct json_stream *s, size_t safe_at)
{
    s->scan = SCAN_IN;
    s->sraw = 0;
    s->esc = 0;
    s->utf_left = 0;
    s->safe_at = safe_at;
    s->bare = 0;
}

/*
 * The common cases at memchr speed: the gap up to a string, and a string
 * without escapes that closes within the limit (where it could be cut is
 * then of no interest). 1 when k->i moved on past them (or is at the
 * end), 0 when the byte at k->i is to be stepped over one at a time;
 * both give the same state.
 */
static int
skim(struct json_stream *s, struct cut *k)
{
    const unsigned char *q;
    size_t run;

    if (s->scan == SCAN_OUT) {
        if (k->i >= k->out_from && k->i < k->out_at)
            return 0;
        /* Gaps and strings are short: a plain loop beats memchr. */
        q = find_stop(k->buf + k->i, k->end, 0);
        s->scanned += (size_t)(q - (k->buf + k->i));
        k->out_from = k->i;
        k->out_at = (size_t)(q - k->buf);
        if (q == k->end || s->bare + (size_t)(q - (k->buf + k->i)) > BARE_MAX)
            return 0;
        k->i = (size_t)(q - k->buf) + 1;
        string_opens(s, k->at0 + k->i);
    }
    if (s->scan == SCAN_IN && s->esc == 0 && s->utf_left == 0) {
        if (k->i >= k->in_from && k->i < k->in_at)
            return 0;
        q = find_stop(k->buf + k->i, k->end, 1);
        run = (size_t)(q - (k->buf + k->i));
        s->scanned += run;
        k->in_from = k->i;
        k->in_at = (size_t)(q - k->buf);
        if (q < k->end && *q == '"' && run <= s->lim.max_string - s->sraw) {
            k->i += run + 1;
            s->scan = SCAN_OUT;
            return 1;
        }
    }
    return k->i == k->len;
}

/* One byte `c` between strings: 0, or -1 on a bare token too long. */
static int
step_out(struct json_stream *s, struct cut *k, unsigned char c)
{
    if (c == '"') {
        string_opens(s, k->at0 + k->i + 1);
    } else if (structural(c)) {
        s->bare = 0;
    } else if (++s->bare > BARE_MAX) {
        /* Whatever came before it is read first, as it would be had the
         * input been cut just before this byte. */
        if (hand_upto(s, k->buf, k->from, k->at0, k->at0 + k->i) != 0)
            return -1;
        fail(s, k->at0 + k->i, "token longer than %zu bytes", BARE_MAX);
        return -1;
    }
    k->i++;
    return 0;
}

/* One byte `c` inside a string: where it could be cut follows it, and
 * past max_string what is safe goes to yajl and the rest is stepped
 * over. 0, or -1 when yajl fails. */
static int
step_in(struct json_stream *s, struct cut *k, unsigned char c)
{
    k->i++;
    /* A UTF-8 sequence ends at its last continuation byte or at the
     * first byte that cannot continue it. Such a string is not UTF-8
     * whatever follows (yajl refuses it once it sees the sequence), so a
     * cut may fall before that byte: the unsafe tail stays one sequence
     * or one escape, never an escape inside a sequence that never ends. */
    if (s->utf_left > 0 && (c & 0xC0) != 0x80) {
        s->utf_left = 0;
        s->safe_at = k->at0 + k->i - 1;
    }
    if (s->esc == 1)
        s->esc = c == 'u' ? 5 : 0;
    else if (s->esc > 1)
        s->esc = s->esc == 2 ? 0 : s->esc - 1;
    else if (c == '\\')
        s->esc = 1;
    else if (c == '"') {
        s->scan = SCAN_OUT;
        return 0;
    } else if (s->utf_left > 0)
        s->utf_left--;
    else if (c >= 0xC0)
        s->utf_left = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
    /* A cut may fall only where the prefix stays within max_string and
     * is valid on its own. */
    if (++s->sraw <= s->lim.max_string) {
        if (s->esc == 0 && s->utf_left == 0)
            s->safe_at = k->at0 + k->i;
        return 0;
    }
    if (hand_upto(s, k->buf, k->from, k->at0, s->safe_at) != 0)
        return -1;
    s->carry_len = 0;
    s->scan = SCAN_SKIP;
    s->esc = s->esc == 1; /* a backslash escapes on */
    k->from = k->i;
    return 0;
}

/* One byte `c` of a string past its cut: at its closing quote yajl is
 * handed a quote of its own. 0, or -1 when yajl fails. */
static int
step_skip(struct json_stream *s, struct cut *k, unsigned char c)
{
    const unsigned char *p;

    if (s->esc) {
        s->esc = 0;
    } else if (c == '\\') {
        s->esc = 1;
    } else if (c == '"') {
        s->trunc_next = 1;
        s->trunc_raw = s->sraw;
        s->scan = SCAN_OUT;
        if (piece(s, (const unsigned char *)"\"", 1, k->at0 + k->i) != 0)
            return -1;
        k->from = ++k->i;
        return 0;
    } else {
        /* Step over plain bytes without the state machine. */
        p = find_stop(k->buf + k->i, k->end, 1);
        s->sraw += (size_t)(p - (k->buf + k->i));
        k->i = (size_t)(p - k->buf);
        return 0;
    }
    s->sraw++;
    k->i++;
    return 0;
}

/* The chunk is scanned: what is safe goes to yajl; inside a string the
 * unsafe tail, at most one escape or UTF-8 sequence, is carried over to
 * the next chunk. */
static int
cut_end(struct json_stream *s, const struct cut *k)
{
    size_t keep;

    switch (s->scan) {
    case SCAN_OUT:
        return hand_upto(s, k->buf, k->from, k->at0, k->at0 + k->len);
    case SCAN_IN:
        if (hand_upto(s, k->buf, k->from, k->at0, s->safe_at) != 0)
            return -1;
        keep = s->safe_at > k->at0 + k->from ? s->safe_at - k->at0 : k->from;
        if (s->carry_len + (k->len - keep) > sizeof s->carry) {
            fail(s, k->at0 + keep, "internal error: string scanner");
            return -1;
        }
        if (s->carry_len == 0)
            s->carry_at = k->at0 + keep;
        memcpy(s->carry + s->carry_len, k->buf + keep, k->len - keep);
        s->carry_len += k->len - keep;
        return 0;
    case SCAN_SKIP:
        return 0;
    }
    return 0;
}

/*
 * Feeds a chunk with long strings cut short. A string that fits reaches
 * yajl whole, usually in the same call as the bytes around it. One that
 * grows past max_string reaches it up to its last safe cut; the scanner
 * then steps over the rest and, at the real closing quote, hands yajl a
 * quote of its own, so yajl sees a short valid string ending where the
 * long one ends.
 */
static int
feed_cutting(struct json_stream *s, const unsigned char *buf, size_t len)
{
    struct cut k = {buf, buf + len, len, s->total, 0, 0, 0, 0, 0, 0};
    int rc = 0;

    s->total += len;
    /* A whole line that is no longer than max_string cannot hold a string
     * over it, and cannot end inside a string (JSON strings hold no raw
     * newline: yajl refuses one), so it needs no scanning at all. The
     * events stream is fed a line at a time, and its lines are short. */
    if (s->scan == SCAN_OUT && s->carry_len == 0 && len <= s->lim.max_string &&
        buf[len - 1] == '\n') {
        s->bare = 0;
        return piece(s, buf, len, k.at0);
    }
    while (k.i < len) {
        if (skim(s, &k))
            continue;
        switch (s->scan) {
        case SCAN_OUT:
            rc = step_out(s, &k, buf[k.i]);
            break;
        case SCAN_IN:
            rc = step_in(s, &k, buf[k.i]);
            break;
        case SCAN_SKIP:
            rc = step_skip(s, &k, buf[k.i]);
            break;
        }
        if (rc != 0)
            return -1;
    }
    return cut_end(s, &k);
}

int
json_stream_feed(struct json_stream *s, const char *buf, size_t len)
{
    yajl_status st;

    if (s->failed)
        return -1;
    if (s->finished) {
        fail(s, s->total, "input after the end");
        return -1;
    }
    if (len == 0)
        return 0;
    if (s->flags & JSON_TRUNCATE) {
        if (feed_cutting(s, (const unsigned char *)buf, len) == 0 &&
            s->doc_open && s->total - s->doc_start > s->lim.max_bytes)
            fail(s, s->doc_start + s->lim.max_bytes,
                 "document exceeds %zu bytes", s->lim.max_bytes);
        goto out;
    }
    s->chunk = (const unsigned char *)buf;
    s->base = s->total;
    s->total += len;
    st = yajl_parse(s->h, s->chunk, len);
    if (st != yajl_status_ok) {
        if (!s->failed)
            fail_yajl(s, tok_end(s));
        goto out;
    }
    /* yajl holds the tail of a token that is not finished yet: bound it
     * (and any document left open) here, not only when tokens end. */
    gap_scan(s, len);
    if (s->doc_open && s->total - s->doc_start > s->lim.max_bytes)
        fail(s, s->doc_start + s->lim.max_bytes, "document exceeds %zu bytes",
             s->lim.max_bytes);
out:
    s->chunk = NULL;
    if (s->failed) {
        drop_doc(s);
        return -1;
    }
    return 0;
}

int
json_stream_finish(struct json_stream *s)
{
    static const unsigned char eof_blank[] = " ";
    yajl_status st;

    if (s->failed)
        return -1;
    if (s->finished)
        return 0;
    s->finished = 1;
    if ((s->flags & JSON_TRUNCATE) && s->scan != SCAN_OUT) {
        fail(s, s->total, "truncated document");
        goto out;
    }
    if (!s->doc_open) {
        if (s->flags & JSON_MULTIPLE)
            return 0; /* zero or more whole documents: fine */
        if (s->ndocs == 0) {
            fail(s, s->total, "empty document");
            return -1;
        }
    }
    /* yajl_complete_parse feeds one blank to end a pending number; mirror
     * it so the gap scan in callbacks reads what yajl reads. */
    s->chunk = eof_blank;
    s->base = s->total;
    st = yajl_complete_parse(s->h);
    s->chunk = NULL;
    if (st != yajl_status_ok && !s->failed) {
        /* Garbage fails while it is fed, so what fails only now is input
         * that stopped early: a premature EOF, or a token cut short (a
         * lexical error on the added blank). Trailing garbage is a parse
         * error and keeps yajl's wording. */
        fail_yajl(s, s->total);
        if (strstr(s->err, "premature EOF") != NULL ||
            strncmp(s->err, "lexical", 7) == 0)
            snprintf(s->err, sizeof s->err, "truncated document");
    }
    /* yajl lets a block comment run into the end of the input; a line
     * comment may end there, as the last line of a file often does. */
    if (!s->failed && (s->gap == GAP_SLASH || s->gap == GAP_BLOCK ||
                       s->gap == GAP_BLOCK_STAR))
        fail(s, s->total, "unterminated comment");
out:
    if (s->failed) {
        drop_doc(s);
        return -1;
    }
    return 0;
}

const char *
json_stream_error(const struct json_stream *s)
{
    return s->failed ? s->err : NULL;
}

size_t
json_stream_error_offset(const struct json_stream *s)
{
    return s->failed ? s->err_offset : 0;
}

size_t
json_stream_scanned(const struct json_stream *s)
{
    return s->scanned;
}

int
json_stream_oom(const struct json_stream *s)
{
    return s->failed && s->oom;
}

size_t
json_stream_error_doc_start(const struct json_stream *s)
{
    return s->failed ? s->err_doc : 0;
}

size_t
json_stream_pending(const struct json_stream *s)
{
    /* A failed stream holds nothing: the partial document is gone. */
    return s->doc_open && !s->failed ? s->total - s->doc_start : 0;
}

/* ---- one-shot parsing and accessors ---------------------------------- */

static int
keep_root(struct json_node *root, void *arg)
{
    *(struct json_node **)arg = root;
    return 0;
}

struct json_node *
json_parse(const char *buf, size_t len, const struct json_limits *limits,
           int flags, char *err, size_t errlen, size_t *err_offset)
{
    struct json_node *root = NULL;
    struct json_stream *s;
    const char *msg = JSON_ERR_OOM;
    size_t off = 0;

    s = json_stream_new(limits, flags & ~JSON_MULTIPLE, keep_root, &root);
    if (s == NULL)
        goto out;
    if (json_stream_feed(s, buf, len) != 0 || json_stream_finish(s) != 0) {
        /* Trailing garbage fails after the root was handed over. */
        json_free(root);
        root = NULL;
        msg = json_stream_error(s);
        off = json_stream_error_offset(s);
    }
out:
    if (root == NULL) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "%s", msg);
        if (err_offset != NULL)
            *err_offset = off;
    }
    json_stream_free(s);
    return root;
}

const struct json_node *
json_get(const struct json_node *obj, const char *key)
{
    const struct json_node *m;
    size_t i, klen;

    if (obj == NULL || obj->type != JSON_OBJECT || key == NULL)
        return NULL;
    klen = strlen(key);
    /* From the end, so the last duplicate is the one found. */
    for (i = obj->count; i-- > 0;) {
        m = obj->items[i];
        if (m->key_len == klen && memcmp(m->key, key, klen) == 0)
            return m;
    }
    return NULL;
}

const char *
json_string(const struct json_node *n)
{
    return n != NULL && n->type == JSON_STRING ? n->str : NULL;
}

int
json_int64(const struct json_node *n, int64_t *out)
{
    const char *p, *end;
    uint64_t v = 0, limit = INT64_MAX;
    unsigned d;
    int neg = 0;

    if (n == NULL || n->type != JSON_NUMBER || n->str == NULL)
        return -1;
    p = n->str;
    end = p + n->len;
    if (p < end && *p == '-') {
        neg = 1;
        limit = (uint64_t)INT64_MAX + 1;
        p++;
    }
    if (p == end)
        return -1;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return -1; /* fraction, exponent, anything else */
        d = (unsigned)(*p - '0');
        if (v > (limit - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (!neg)
        *out = (int64_t)v;
    else if (v == (uint64_t)INT64_MAX + 1)
        *out = INT64_MIN;
    else
        *out = -(int64_t)v;
    return 0;
}

void
json_linecol(const char *text, size_t len, size_t offset, unsigned *line,
             unsigned *col)
{
    size_t i, ln = 1, bol = 0;

    if (offset > len)
        offset = len;
    for (i = 0; i < offset; i++) {
        if (text[i] == '\n') {
            ln++;
            bol = i + 1;
        }
    }
    *line = ln > UINT_MAX ? UINT_MAX : (unsigned)ln;
    *col =
        offset - bol + 1 > UINT_MAX ? UINT_MAX : (unsigned)(offset - bol + 1);
}
