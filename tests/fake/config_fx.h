/*
 * config_fx — what the config's unit tests share (tests/unit/
 * test_config*.c, one per part of the config): parsing a text that must
 * load, or must fail with exactly the problems given, and the values of
 * the embedded default. Each fails the running test otherwise, printing
 * what it got.
 */
#ifndef CONFIG_FX_H
#define CONFIG_FX_H

struct config;
struct config_errors;

/* The config in `text` (source "t.json"), which must load without a
 * problem. The caller frees it (config_free). */
struct config *cfx_parse_ok(const char *text);
/* config_parse's result `rc`, `cfg` and `errs` are a failure with
 * exactly the problems `want` (NULL-terminated); clears `errs`. */
void cfx_assert_lines(int rc, struct config *cfg, struct config_errors *errs,
                      const char *const *want);
/* `text` fails with exactly the problems `want` (NULL-terminated). */
void cfx_expect_errors(const char *text, const char *const *want);
/* `text` fails with one problem, `msg` once its location is cut off. */
void cfx_expect_message(const char *text, const char *msg);
/* Every value of `cfg` is the embedded default's. */
void cfx_assert_default_values(const struct config *cfg);

#endif
