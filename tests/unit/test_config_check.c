/*
 * Unit tests for what a string setting must look like
 * (agent/config_check.c): globs, the status listener, socket paths; each
 * refused value reported at its FILE:LINE:COL.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bounds.h"
#include "config.h"
#include "config_fx.h"
#include "testutil.h"

static void
test_invalid_glob(void **state)
{
    static const char *const want[] = {
        "t.json:3:24: policies[0].match.name: invalid glob \"web-[0-9\": "
        "unbalanced '[' (no closing ']')",
        "t.json:4:25: policies[0].match.image: invalid glob \"img\\\": "
        "ends with a lone '\\'",
        NULL,
    };

    (void)state;
    cfx_expect_errors("{\"policies\": [\n"
                      "  { \"name\": \"p\", \"action\": \"keep\",\n"
                      "    \"match\": { \"name\": \"web-[0-9\",\n"
                      "               \"image\": \"img\\\\\" } }\n"
                      "]}\n",
                      want);
}

static void
test_glob_classes_accepted(void **state)
{
    static const char *const good[] = {
        "[[:alpha:]]*", "[]x]", "[!]]", "x\\[", "[a-z\\]]", "*", "[^0-9]",
    };
    char text[256];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct config *cfg;
        char esc[64];
        size_t j, k = 0;

        for (j = 0; good[i][j]; j++) {
            if (good[i][j] == '\\')
                esc[k++] = '\\';
            esc[k++] = good[i][j];
        }
        esc[k] = '\0';
        snprintf(text, sizeof(text),
                 "{\"policies\": [{\"name\": \"p\", \"action\": \"keep\", "
                 "\"match\": {\"name\": \"%s\"}}]}",
                 esc);
        cfg = cfx_parse_ok(text);
        assert_string_equal(cfg->policies.items[0].match_name, good[i]);
        config_free(cfg);
    }
    cfx_expect_message(
        "{\"policies\": [{\"name\": \"p\", \"action\": \"keep\", "
        "\"match\": {\"image\": \"[[:alpha:]\"}}]}",
        "policies[0].match.image: invalid glob \"[[:alpha:]\": "
        "unbalanced '[' (no closing ']')");
    /* A ']' right after '[' is a member, so "[]" is still open. */
    cfx_expect_message(
        "{\"policies\": [{\"name\": \"p\", \"action\": \"keep\", "
        "\"match\": {\"name\": \"web-[]\"}}]}",
        "policies[0].match.name: invalid glob \"web-[]\": "
        "unbalanced '[' (no closing ']')");
    cfx_expect_message(
        "{\"policies\": [{\"name\": \"p\", \"action\": \"keep\", "
        "\"match\": {\"name\": \"\"}}]}",
        "policies[0].match.name: invalid glob \"\": must not be "
        "empty");
}

#define LISTEN(v) "{\"status\": {\"listen\": \"" v "\"}}"

static void
test_listen(void **state)
{
    static const char *const good[] = {
        "off",
        "127.0.0.1:9323",
        "0.0.0.0:1",
        "localhost:65535",
        "[::1]:80",
        "[::]:9323",
        "unix:/run/r.sock",
        "my-host.lan:80",
        /* 107 bytes of path, the most a sockaddr_un holds */
        ("unix:/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
    };
    char text[256];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct config *cfg;

        snprintf(text, sizeof(text), LISTEN("%s"), good[i]);
        cfg = cfx_parse_ok(text);
        assert_string_equal(cfg->status_listen, good[i]);
        config_free(cfg);
    }
    cfx_expect_message(LISTEN("9323"),
                       "status.listen: expected \"HOST:PORT\", "
                       "\"unix:/path\" or \"off\"");
    cfx_expect_message(LISTEN(":9323"),
                       "status.listen: expected \"HOST:PORT\": the host is "
                       "missing");
    cfx_expect_message(LISTEN("h:0"),
                       "status.listen: port must be between 1 and 65535");
    cfx_expect_message(LISTEN("h:65536"),
                       "status.listen: port must be between 1 and 65535");
    cfx_expect_message(LISTEN("h:"),
                       "status.listen: port must be between 1 and 65535");
    cfx_expect_message(LISTEN("h:12a"),
                       "status.listen: port must be between 1 and 65535");
    cfx_expect_message(LISTEN("h:99999999999999999999"),
                       "status.listen: port must be between 1 and 65535");
    cfx_expect_message(LISTEN("::1:80"), "status.listen: invalid host (use "
                                         "[ADDR] for IPv6)");
    cfx_expect_message(LISTEN("[::1:80"),
                       "status.listen: an IPv6 host must be "
                       "written \"[ADDR]:PORT\"");
    cfx_expect_message(LISTEN("[zz]:80"),
                       "status.listen: invalid IPv6 address");
    cfx_expect_message(LISTEN("unix:run/r.sock"),
                       "status.listen: unix socket path must be absolute "
                       "(\"unix:/path\")");
    cfx_expect_message(
        LISTEN("unix:/" /* 108 bytes of path: no room left for the NUL */
               "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
               "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
               "aa"),
        "status.listen: unix socket path is too long (at most 107 bytes)");
    cfx_expect_message("{\"status\": {\"listen\": 9323}}",
                       "status.listen: expected a string, got number");
}

static void
test_sockets(void **state)
{
    struct config *cfg;

    (void)state;
    cfg = cfx_parse_ok("{\"containerd\": {\"socket\": \"off\"}}");
    assert_string_equal(cfg->containerd_socket, "off");
    config_free(cfg);
    cfg = cfx_parse_ok("{\"containerd\": {\"socket\": \"/run/c.sock\"}}");
    assert_string_equal(cfg->containerd_socket, "/run/c.sock");
    config_free(cfg);

    cfx_expect_message("{\"containerd\": {\"socket\": \"on\"}}",
                       "containerd.socket: must be \"auto\", \"off\" or an "
                       "absolute path");
    cfx_expect_message("{\"containerd\": {\"namespace\": \"\"}}",
                       "containerd.namespace: must start with a letter or "
                       "digit");
    cfx_expect_message("{\"containerd\": {\"namespace\": \"a/b\"}}",
                       "containerd.namespace: may hold only letters, digits, "
                       "'.', '_' and '-'");
    cfx_expect_message("{\"docker\": {\"socket\": \"tcp://h:2375\"}}",
                       "docker.socket: must be an absolute path");
    cfx_expect_message("{\"state_dir\": \"var/lib\"}",
                       "state_dir: must be an absolute path");
    cfx_expect_message("{\"node\": \"a\\u0000b\"}",
                       "node: must not contain NUL characters");
    cfx_expect_message("{\"docker\": {\"request_timeout_ms\": 99}}",
                       "docker.request_timeout_ms: must be between 100 and "
                       "3600000");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid_glob),
        cmocka_unit_test(test_glob_classes_accepted),
        cmocka_unit_test(test_listen),
        cmocka_unit_test(test_sockets),
    };

    tu_test_filters(); /* REAPD_TEST_ONLY, TEST_FILTER */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
