/*
 * config_policies — the keys that decide what happens to a container:
 * "policies" (each with its match, action and options, and the bound on
 * the label names they name together), "default_action", and the
 * "labels" filter of what reapd keeps (policy.h's inputs). Private to
 * config's files: callers see config.h.
 */
#ifndef REAPD_CONFIG_POLICIES_H
#define REAPD_CONFIG_POLICIES_H

#include "config.h"
#include "config_values.h"

/* An action ("remove", "keep", "ignore") into *out. */
void config_parse_action(struct config_ctx *c, const struct json_node *n,
                         const char *path, enum policy_action *out);
/* "policies": the file's list replaces the default one. */
void config_parse_policies(struct config_ctx *c, const struct json_node *arr,
                           struct config *cfg);
/* "labels": the globs of label keys reapd keeps and drops. */
void config_parse_label_filter(struct config_ctx *c,
                               const struct json_node *obj,
                               struct config *cfg);

#endif
