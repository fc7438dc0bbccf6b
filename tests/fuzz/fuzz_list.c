/*
 * fuzz_list — an engine's answer to GET /containers/json, through
 * docker_parse_list (agent/docker_parse.h), the input being the whole
 * body.
 *
 * Checked: 0 with at most as many containers as the body could hold,
 * each keeping docker_parse.h's promises (entries with a bad id or state
 * are left out, never passed on), or -1 with a message and no result.
 */
#include <string.h>

#include "docker_parse.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct docker_parsed *ctx = NULL;
    const struct docker_container *cs = NULL;
    char err[256];
    size_t n = (size_t)-1, i;
    int rc;

    fuzz_quiet_logs();
    memset(err, 'x', sizeof(err));
    rc = docker_parse_list((const char *)data, size, &ctx, &cs, &n, err,
                           sizeof(err));
    if (rc == 0) {
        FUZZ_CHECK(ctx != NULL);
        /* Each entry needs at least its 64-hex id in quotes. */
        FUZZ_CHECK(n <= size / 66);
        FUZZ_CHECK(n == 0 || cs != NULL);
        for (i = 0; i < n; i++)
            fuzz_check_container(&cs[i], false);
    } else {
        FUZZ_CHECK(rc == -1);
        FUZZ_CHECK(ctx == NULL);
        FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL);
        FUZZ_CHECK(err[0] != '\0');
    }
    docker_parsed_free(ctx);
    return 0;
}
