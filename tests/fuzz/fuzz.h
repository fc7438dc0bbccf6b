/*
 * fuzz — what the fuzz targets share: a broken invariant stops the run
 * as a crash (so libFuzzer keeps the input and the replay test fails),
 * inputs are read from the front a byte at a time, streams are cut into
 * chunks the input itself chooses, and the checks that more than one
 * target makes on the daemon's parsed results.
 *
 * Each target is one file fuzz_<name>.c defining LLVMFuzzerTestOneInput;
 * it is linked either with libFuzzer (tests/fuzz/run) or with replay.c,
 * which feeds it the files of its corpus and regressions.
 */
#ifndef REAPD_FUZZ_H
#define REAPD_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct docker_container;
struct ctrd_task;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A finding: says what was expected where, then aborts. */
__attribute__((noreturn)) void fuzz_fail(const char *file, int line,
                                         const char *what);
#define FUZZ_CHECK(cond)                                                      \
    ((cond) ? (void)0 : fuzz_fail(__FILE__, __LINE__, #cond))

/* The input, consumed from the front. */
struct fuzz_in {
    const uint8_t *p;
    size_t n;
};

/* The next byte, or 0 once the input is used up. */
uint8_t fuzz_byte(struct fuzz_in *in);

/*
 * Chunk sizes for feeding a stream: `count` bytes of the input, each
 * giving one size (1..256), used in turn; with none, the stream goes in
 * whole.
 */
#define FUZZ_MAX_CHUNKS 16
struct fuzz_chunks {
    size_t sizes[FUZZ_MAX_CHUNKS];
    size_t count, next;
};
void fuzz_chunks_init(struct fuzz_chunks *c, struct fuzz_in *in,
                      unsigned count);
/* The size of the next chunk, at most `left` (> 0). */
size_t fuzz_chunks_next(struct fuzz_chunks *c, size_t left);

/* Sends the daemon's log to /dev/null (formatted all the same, so the
 * code that writes hostile strings into log lines is still run). */
void fuzz_quiet_logs(void);

/* A directory private to this process, made on first use and removed
 * with what is in it at exit. In /dev/shm when there is one, so the
 * fsyncs of the code under test cost nothing. Never NULL (aborts). */
const char *fuzz_tmpdir(void);

/* A 64-bit FNV-1a hash, to compare two runs of the same bytes. */
uint64_t fuzz_hash(uint64_t h, const void *p, size_t n);
#define FUZZ_HASH_INIT 14695981039346656037ull

/* Is `s` (NUL-terminated) exactly `n` lowercase hex digits? */
bool fuzz_is_hex(const char *s, size_t n);

/* What docker.h promises of a parsed container (list or inspect). */
void fuzz_check_container(const struct docker_container *c, bool inspect);

/* What containerd.h promises of a decoded task. */
void fuzz_check_task(const struct ctrd_task *t);
/* A containerd id as ctrd_* hands it out: printable ASCII without
 * spaces, at most 128 bytes; empty only where `may_be_empty`. */
void fuzz_check_ctrd_id(const char *s, bool may_be_empty);

/* Decode one protobuf message as an Events envelope, a Tasks.List answer
 * or a Tasks.Get answer, and check what containerd.h promises: a result
 * whose ids are valid, or a failure that hands nothing out; the same
 * bytes decoded twice give the same envelope. */
void fuzz_ctrd_envelope(const uint8_t *msg, size_t len);
void fuzz_ctrd_list(const uint8_t *msg, size_t len);
void fuzz_ctrd_get(const uint8_t *msg, size_t len);

#endif
