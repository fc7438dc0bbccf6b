/*
 * replay — runs a fuzz target without libFuzzer: every file given (or
 * every file of the directories given) goes through
 * LLVMFuzzerTestOneInput once, in name order. Without arguments it
 * replays the directories the build names (REPLAY_CORPUS: the seed
 * corpus, which must not be empty; REPLAY_REGRESS: inputs that once
 * found a bug, which may be absent), so the unit test runs, under ASan
 * and under valgrind, go through them too.
 *
 *   test_fuzz_events [FILE|DIR]...
 *
 * A broken invariant aborts (fuzz.h); so does a sanitizer's report.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Reads a whole file into a buffer of exactly its size, so a read past
 * the end is caught as it would be under libFuzzer. */
static int
replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    struct stat st;
    size_t n;
    int rc = -1;

    if (f == NULL || fstat(fileno(f), &st) != 0) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        goto out;
    }
    buf = malloc(st.st_size > 0 ? (size_t)st.st_size : 1);
    if (buf == NULL)
        goto out;
    n = fread(buf, 1, (size_t)st.st_size, f);
    if (n != (size_t)st.st_size) {
        fprintf(stderr, "%s: short read\n", path);
        goto out;
    }
    LLVMFuzzerTestOneInput(buf, n);
    rc = 0;
out:
    free(buf);
    if (f != NULL)
        fclose(f);
    return rc;
}

static int
by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replays the regular files of `dir`; the count goes to *n. */
static int
replay_dir(const char *dir, size_t *n)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL, path[4096];
    size_t count = 0, cap = 0, i;
    int rc = -1;

    if (d == NULL) {
        fprintf(stderr, "%s: %s\n", dir, strerror(errno));
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        struct stat st;

        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (count == cap) {
            char **nn = realloc(names, (cap ? cap * 2 : 64) * sizeof(*nn));

            if (nn == NULL)
                goto out;
            names = nn;
            cap = cap ? cap * 2 : 64;
        }
        names[count] = strdup(e->d_name);
        if (names[count] == NULL)
            goto out;
        count++;
    }
    qsort(names, count, sizeof(*names), by_name);
    for (i = 0; i < count; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        if (replay_file(path) != 0)
            goto out;
    }
    *n = count;
    rc = 0;
out:
    for (i = 0; i < count; i++)
        free(names[i]);
    free(names);
    closedir(d);
    return rc;
}

static int
replay_path(const char *path, size_t *n)
{
    struct stat st;

    if (stat(path, &st) != 0) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode))
        return replay_dir(path, n);
    *n = 1;
    return replay_file(path);
}

int
main(int argc, char **argv)
{
    size_t total = 0, n = 0;
    struct stat st;
    int i;

    if (argc > 1) {
        for (i = 1; i < argc; i++) {
            n = 0;
            if (replay_path(argv[i], &n) != 0)
                return 1;
            total += n;
        }
        printf("replayed %zu inputs\n", total);
        return 0;
    }
    /* The seed corpus is part of the tree: an empty or missing one means
     * the test would check nothing, which is a failure. */
    if (replay_dir(REPLAY_CORPUS, &n) != 0 || n == 0) {
        fprintf(stderr, "%s: no seed inputs\n", REPLAY_CORPUS);
        return 1;
    }
    total += n;
    n = 0;
    if (stat(REPLAY_REGRESS, &st) == 0 && replay_dir(REPLAY_REGRESS, &n) != 0)
        return 1;
    total += n;
    printf("replayed %zu inputs (%s, %s)\n", total, REPLAY_CORPUS,
           REPLAY_REGRESS);
    return 0;
}
