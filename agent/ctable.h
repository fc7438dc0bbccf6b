/*
 * ctable — the reaper's table of container records (struct rec, in
 * reaper_int.h), by id, and the one block each record keeps its name,
 * image and labels in, taken from an event until a list answers.
 *
 * A chained hash on the id's first 16 hex digits (ids are random), grown
 * by doubling. Embedded in struct reaper; its fields are the table's own.
 */
#ifndef REAPD_CTABLE_H
#define REAPD_CTABLE_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rec;
struct docker_event;
struct policy_label;

struct ctable {
    struct rec **buckets;
    size_t nbuckets; /* a power of two */
    size_t n;
    /* Every record, least recently added or touched first. */
    struct rec *thead, *ttail;
};

/* 0, or -1 when out of memory. */
int ctable_init(struct ctable *t);
/* Frees the buckets, not the records (the reaper forgets them first). */
void ctable_cleanup(struct ctable *t);

struct rec *ctable_find(const struct ctable *t, const char *id);
/* Links `c` (its id set) in, as the most recently touched. */
void ctable_add(struct ctable *t, struct rec *c);
void ctable_remove(struct ctable *t, struct rec *c);
/* Buckets for n records at once (out of memory: longer chains, still
 * correct). A relist reserves for what it lists before taking any in:
 * each doubling rehashes every record, in one loop turn. */
void ctable_reserve(struct ctable *t, size_t n);
/* `c` becomes the most recently touched: a relist touches what it lists,
 * so what it did not list is found at the front (ctable_collect_front)
 * without a walk of every record, which would hold the loop on a crowded
 * node. */
void ctable_touch(struct ctable *t, struct rec *c);

/* Walks every record: `for (c = ctable_first(t, &it); c != NULL; c =
 * ctable_next(t, &it))`. The walk may remove (and free) the record it is
 * at, and no other; it must not add any. To act on some records with
 * acts that may forget others, collect them first. */
struct ctable_iter {
    size_t b;
    struct rec *next;
};
struct rec *ctable_first(const struct ctable *t, struct ctable_iter *it);
struct rec *ctable_next(const struct ctable *t, struct ctable_iter *it);

/* The records `pick` says yes to, in an array the caller frees (*n of
 * them); NULL when out of memory. Feeding one of them may free that one,
 * never another. */
typedef bool (*ctable_pick_fn)(const struct rec *c, const void *arg);
struct rec **ctable_collect(const struct ctable *t, ctable_pick_fn pick,
                            const void *arg, size_t *n);

/* As ctable_collect, over the least recently touched records only: the
 * walk ends at the first one `stop` says yes to. */
struct rec **ctable_collect_front(const struct ctable *t, ctable_pick_fn stop,
                                  ctable_pick_fn pick, const void *arg,
                                  size_t *n);

/* Copies name, image and labels into one block owned by `c`: the label
 * array, then the strings. The arguments may point into c's current
 * block (a rename): it is freed only after the copy. `labels_cut` and
 * `meta_cut` say that labels, or the name or image, are less than the
 * engine holds. Returns 0 or -1 (out of memory; the old values and flags
 * stay). */
int rec_set_meta(struct rec *c, const char *name, const char *image,
                 const struct policy_label *labels, size_t n, bool labels_cut,
                 bool meta_cut);
/* Until a list answers, an event's attributes are the best guess of the
 * labels (the engine merges labels with a few fields of its own): they
 * are c's metadata, the labels kept as rec_wanted_label and
 * rec_kept_label say. Out of memory: logged, c unchanged. */
void rec_meta_from_event(struct rec *c, const struct docker_event *ev);
/* The labels the current policies name (`arg` the reaper): kept whatever
 * the input limits. */
bool rec_wanted_label(const char *key, size_t len, void *arg);
/* The operator's label filter of the current config (config "labels"),
 * read at each label so that a reload applies at once. */
bool rec_kept_label(const char *key, size_t len, void *arg);
/* Frees c's block; name, image and labels become NULL. */
void rec_free_meta(struct rec *c);
/* *dst becomes a copy of src (or NULL), the old one freed; out of memory,
 * *dst stays as it was. */
void rec_set_str(char **dst, const char *src);
/* (Re)arms one of c's timers (*ev created on first use, with c as its
 * argument) for `ms`. */
void rec_arm(struct rec *c, struct event **ev, event_callback_fn fn,
             uint64_t ms);

#endif
