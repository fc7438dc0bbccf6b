/*
 * docker_parse — the Docker Engine API's answers, read.
 *
 * What reapd takes from an engine's answers (a container's inspect, the
 * container list, /version, an error's message) and nothing else: each
 * answer is parsed under bounds (bounds.h, docs/limits.md) into the
 * structs below and validated (ids are 64 hex, states are known words);
 * anything else is a failed parse with a message, never a crash. No I/O:
 * docker.c feeds it the bodies it receives, tests and fuzz targets feed
 * it whole ones.
 *
 * Ownership: a parse's results live in its struct docker_parsed (or a
 * handed-over struct docker_list) until freed by the matching *_free;
 * the strings of a struct docker_container point into them.
 */
#ifndef REAPD_DOCKER_PARSE_H
#define REAPD_DOCKER_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bounds.h"
#include "events.h"
#include "lifecycle.h"
#include "policy.h"

/* The oldest and newest Engine API versions reapd speaks. */
#define DOCKER_API_MIN "1.24"
#define DOCKER_API_MAX "1.51"

/* The part of an error answer kept and read for its message. */
#define DOCKER_ERR_MAX_BODY (64u << 10)

/* One container as list or inspect describes it. Owned by the parse
 * (or the list) it came from. */
struct docker_container {
    char id[CTR_ID_SIZE];
    const char *name;  /* without the leading "/"; may be NULL */
    const char *image; /* Config.Image (inspect) or Image (list) */
    const struct policy_label *labels;
    size_t nlabels;
    /* Over the limits of bounds.h: a label was dropped or a value cut;
     * the name or image is a prefix (a policy glob must not match it). */
    bool labels_truncated;
    bool name_truncated;
    bool image_truncated;
    struct lc_inspect state; /* list answers: has_exit_code false */
    const char *started_at;  /* RFC 3339, NULL if never */
    const char *finished_at; /* RFC 3339, NULL if never */
};

/* What the engine says it is, from its /version answer. Each string is
 * "" when the engine did not say, or said something other than a version
 * (only letters, digits and . + ~ _ - : are taken, at most 63). */
struct docker_engine_info {
    char api[16];                /* the version reapd uses with it */
    char engine_api[16];         /* the engine's own ApiVersion */
    char version[64];            /* dockerd's, "20.10.24+dfsg1" */
    char containerd_version[64]; /* its containerd's, "1.6.20~ds1" */
};

/* The label rules of a parse: the labels policies name (`wanted`, kept
 * whatever the limits) and the operator's filter (`kept`: a label it
 * refuses and no policy names is left out as if the engine had not sent
 * it). Either may be NULL. */
struct docker_label_rules {
    events_label_cb wanted;
    void *wanted_arg;
    events_label_cb kept;
    void *kept_arg;
};

/* Parsers of whole bodies: fill `out` from an engine answer. They
 * return 0, or -1 with a message in `err`. The results live in `ctx`
 * until docker_parsed_free. */
struct docker_parsed;
int docker_parse_inspect(const char *body, size_t len,
                         struct docker_parsed **ctx,
                         const struct docker_container **out, char *err,
                         size_t errlen);
int docker_parse_list(const char *body, size_t len, struct docker_parsed **ctx,
                      const struct docker_container **out, size_t *n,
                      char *err, size_t errlen);
/* The API version to use given the engine's ApiVersion and
 * MinAPIVersion: "1.41" etc. into `out`. -1 if the engine is too old. */
int docker_parse_version(const char *body, size_t len, char *out,
                         size_t outlen, char *err, size_t errlen);
/* The same, and what the engine says of itself (Version, and the
 * Version of its "containerd" component), into `out`. */
int docker_parse_engine(const char *body, size_t len,
                        struct docker_engine_info *out, char *err,
                        size_t errlen);
void docker_parsed_free(struct docker_parsed *ctx);

/* docker_parse_inspect and docker_parse_list under `rules` (NULL: none),
 * the body fed in pieces of `chunk` bytes (0: whole) as from the engine. */
int docker_parse_inspect_with(const char *body, size_t len, size_t chunk,
                              const struct docker_label_rules *rules,
                              struct docker_parsed **ctx,
                              const struct docker_container **out, char *err,
                              size_t errlen);
int docker_parse_list_with(const char *body, size_t len, size_t chunk,
                           const struct docker_label_rules *rules,
                           struct docker_parsed **ctx,
                           const struct docker_container **out, size_t *n,
                           char *err, size_t errlen);

/* The "message" of an engine's error answer (its first
 * DOCKER_ERR_MAX_BODY bytes), when it has one without NUL bytes: into
 * `out`, cut to fit, and true. Else false. */
bool docker_parse_message(const char *body, size_t len, char *out,
                          size_t outlen);

/* A list answer kept whole (docker_list_all), read an entry at a time. */
struct docker_list;
/* Entry i of a handed-over answer (i < n) in *out, valid until the next
 * call or docker_list_free: 0; 1 for an entry without a valid Id or State
 * (said in the log; not taken); -1 when its labels find no memory (the
 * answer cannot be taken whole: a decision on part of its labels could
 * pick the wrong policy). The labels kept follow the rules of the list. */
int docker_list_entry(struct docker_list *l, size_t i,
                      const struct docker_container **out);
void docker_list_free(struct docker_list *l);
/* Frees `l` a part at a time: up to `max` of its 1 MiB pieces per call;
 * 1 once all is freed (`l` is gone), 0 while some is left (then `l` may
 * only be passed here again or to docker_list_free). NULL: 1. */
int docker_list_free_some(struct docker_list *l, size_t max);

/*
 * An answer read as it streams in (docker.c's calls): created for one
 * answer, fed its body in pieces, then ended by one of the three
 * docker_doc_* that build a result. Only what reapd reads is kept: a
 * container's Env, Cmd, Mounts... are lexed and left out, whatever their
 * size.
 */
enum docker_doc_kind { DOCKER_DOC_INSPECT, DOCKER_DOC_LIST };
struct docker_doc;

/* `rules` is copied (NULL: none). NULL on allocation failure. */
struct docker_doc *docker_doc_new(enum docker_doc_kind kind,
                                  const struct docker_label_rules *rules);
void docker_doc_free(struct docker_doc *doc);
/* 0, or -1 with "WHAT at byte N" in `err`: the answer is malformed or
 * over a bound, and feeding it more is of no use. */
int docker_doc_feed(struct docker_doc *doc, const char *buf, size_t len,
                    char *err, size_t errlen);
/* The answer's tree is to live in pieces of its own (json.h's
 * json_stream_set_mapped), for a list handed over whole. */
void docker_doc_set_mapped(struct docker_doc *doc);
/* End the input and build the result, as docker_parse_inspect and
 * docker_parse_list do: 0, or -1 with a message in `err`. */
int docker_doc_inspect(struct docker_doc *doc, struct docker_parsed **ctx,
                       const struct docker_container **out, char *err,
                       size_t errlen);
int docker_doc_list(struct docker_doc *doc, struct docker_parsed **ctx,
                    const struct docker_container **out, size_t *n, char *err,
                    size_t errlen);
/* End the input of a list and hand its answer over whole: *out (the
 * caller's, for docker_list_entry) with `*n` entries; or -1 with a
 * message in `err`. */
int docker_doc_list_owned(struct docker_doc *doc, struct docker_list **out,
                          size_t *n, char *err, size_t errlen);

/* Is `s` exactly 64 lowercase hex digits? */
bool docker_valid_id(const char *s);

#endif
