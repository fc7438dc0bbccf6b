/*
 * fuzz_inspect — an engine's answer to GET /containers/{id}/json, through
 * docker_parse_inspect (agent/docker_parse.h), the input being the whole
 * body.
 *
 * Checked: the result is 0 with a container that keeps docker_parse.h's
 * promises (64-hex id, a known state, names, images and labels within
 * bounds.h, times absent or set), or -1 with a message and no result.
 */
#include <string.h>

#include "docker_parse.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct docker_parsed *ctx = NULL;
    const struct docker_container *c = NULL;
    char err[256];
    int rc;

    fuzz_quiet_logs();
    memset(err, 'x', sizeof(err));
    rc = docker_parse_inspect((const char *)data, size, &ctx, &c, err,
                              sizeof(err));
    if (rc == 0) {
        FUZZ_CHECK(ctx != NULL);
        fuzz_check_container(c, true);
    } else {
        FUZZ_CHECK(rc == -1);
        FUZZ_CHECK(ctx == NULL);
        FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL);
        FUZZ_CHECK(err[0] != '\0');
    }
    docker_parsed_free(ctx);
    return 0;
}
