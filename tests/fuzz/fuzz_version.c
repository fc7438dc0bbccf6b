/*
 * fuzz_version — an engine's answer to GET /version, through
 * docker_parse_version and docker_parse_engine (agent/docker_parse.h),
 * which pick the API version reapd speaks and read what the engine says
 * it is.
 *
 * Checked: 0 with "MAJOR.MINOR" inside DOCKER_API_MIN..DOCKER_API_MAX,
 * or -1 with a message. A version reapd would then put into every URL
 * must never be anything else. The engine's and containerd's versions,
 * which go into logs and label values unescaped, hold only version
 * characters; both functions agree.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "docker_parse.h"
#include "fuzz.h"

/* "1.41" -> 1041; -1 for anything but DIGITS.DIGITS. */
static long
number(const char *s)
{
    long major = 0, minor = 0;
    const char *p = s;

    if (*p < '0' || *p > '9')
        return -1;
    while (*p >= '0' && *p <= '9' && major < 1000)
        major = major * 10 + (*p++ - '0');
    if (*p++ != '.' || *p < '0' || *p > '9')
        return -1;
    while (*p >= '0' && *p <= '9' && minor < 1000000)
        minor = minor * 10 + (*p++ - '0');
    return *p == '\0' && minor < 1000 ? major * 1000 + minor : -1;
}

static void
check_version_chars(const char *s, size_t size)
{
    size_t i;

    FUZZ_CHECK(memchr(s, '\0', size) != NULL);
    for (i = 0; s[i] != '\0'; i++)
        FUZZ_CHECK(isalnum((unsigned char)s[i]) ||
                   strchr(".+~_-:", s[i]) != NULL);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char out[16], err[256];
    long v;
    int rc;

    fuzz_quiet_logs();
    memset(out, 'x', sizeof(out));
    memset(err, 'x', sizeof(err));
    rc = docker_parse_version((const char *)data, size, out, sizeof(out), err,
                              sizeof(err));
    if (rc == 0) {
        FUZZ_CHECK(memchr(out, '\0', sizeof(out)) != NULL);
        v = number(out);
        FUZZ_CHECK(v >= number(DOCKER_API_MIN));
        FUZZ_CHECK(v <= number(DOCKER_API_MAX));
    } else {
        FUZZ_CHECK(rc == -1);
        FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL);
        FUZZ_CHECK(err[0] != '\0');
    }
    {
        struct docker_engine_info info;
        char err2[256];

        FUZZ_CHECK(docker_parse_engine((const char *)data, size, &info, err2,
                                       sizeof(err2)) == rc);
        if (rc == 0) {
            FUZZ_CHECK(strcmp(info.api, out) == 0);
            FUZZ_CHECK(number(info.engine_api) >= number(info.api));
            check_version_chars(info.version, sizeof(info.version));
            check_version_chars(info.containerd_version,
                                sizeof(info.containerd_version));
        }
    }
    return 0;
}
