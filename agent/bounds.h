/*
 * bounds — what reapd keeps of each input, in one place.
 *
 * The principle (docs/limits.md): a value over a limit degrades that value
 * (skipped, or truncated and flagged), never the container, the node or
 * the stream. The engine itself sets no limit on most of these (labels,
 * environment, command), so reapd cannot refuse what is over them: it keeps
 * a bounded part and says so in the report (anomalies) and the metrics.
 *
 * Writers and readers of reapd's own files (records, the reports journal)
 * derive their limits from these, so that whatever reapd can write, it can
 * read back after a restart.
 */
#ifndef REAPD_BOUNDS_H
#define REAPD_BOUNDS_H

#include <stddef.h>

/* A container id: 64 hex digits (the engine's; one that is not is
 * refused where it enters). CTR_ID_SIZE holds it and its NUL. */
#define CTR_ID_LEN  64
#define CTR_ID_SIZE (CTR_ID_LEN + 1)

/* A container's name and image: longer ones are truncated (and a policy
 * glob on a truncated value does not match). The engine's own references
 * are at most 255 + 128 bytes; names have no limit there. */
#define LIMIT_NAME_BYTES  ((size_t)4096)
#define LIMIT_IMAGE_BYTES ((size_t)4096)

/* A label key longer than this is dropped; a value longer than this (as
 * sent, escapes included) is truncated to a prefix. A prefix decodes to at
 * least a sixth of it (\u0001 is six bytes for one), which is more than
 * any policy value may be: so a truncated value never equals a policy
 * value, and a policy is always decided exactly. Policy label keys are
 * held to LIMIT_LABEL_KEY. */
#define LIMIT_LABEL_KEY          ((size_t)1024)
#define LIMIT_LABEL_VALUE        ((size_t)4096)
#define LIMIT_POLICY_LABEL_VALUE ((size_t)512)

/* Labels kept per container besides those a policy names (which are kept
 * whatever their number): at most this many, and at most
 * LIMIT_LABEL_BYTES of keys and values together. */
#define LIMIT_LABELS      ((size_t)256)
#define LIMIT_LABEL_BYTES ((size_t)64 * 1024)

/* Distinct label keys the policies of one config may name. */
#define LIMIT_POLICY_LABELS ((size_t)64)

/* Labels one record or report can hold at most, and its bytes at most:
 * what readers of records and of the journal must accept. */
#define LIMIT_LABELS_STORED (LIMIT_LABELS + LIMIT_POLICY_LABELS)
#define LIMIT_LABELS_STORED_BYTES                                             \
    (LIMIT_LABEL_BYTES +                                                      \
     LIMIT_POLICY_LABELS * (LIMIT_LABEL_KEY + LIMIT_LABEL_VALUE))

/* The largest record or report reapd writes (JSON escaping can take a byte
 * to six: \u00XX), with room for everything that is not a label. */
#define LIMIT_RECORD_BYTES                                                    \
    (6 * (LIMIT_LABELS_STORED_BYTES + LIMIT_NAME_BYTES + LIMIT_IMAGE_BYTES) + \
     (size_t)64 * 1024)

/* What readers of records and report lines accept: at least the bounds
 * above, and never less than earlier versions wrote (4096 labels, 64 KiB
 * strings), so files from before these bounds stay readable. */
#define LIMIT_READ_ITEMS                                                      \
    (LIMIT_LABELS_STORED + 64 > 4096 ? LIMIT_LABELS_STORED + 64 : 4096)
#define LIMIT_READ_STRING ((size_t)64 * 1024)
_Static_assert(LIMIT_READ_STRING >= LIMIT_LABEL_KEY &&
                   LIMIT_READ_STRING >= LIMIT_LABEL_VALUE &&
                   LIMIT_READ_STRING >= LIMIT_NAME_BYTES &&
                   LIMIT_READ_STRING >= LIMIT_IMAGE_BYTES,
               "the readers take every string the writers keep");

#endif
