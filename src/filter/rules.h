/*
 * User rules: filter.allow / filter.deny (exact names, "*.x" = proper subdomains of x, "/re/" =
 * POSIX ERE, case-insensitive, matched against the whole lower-case name without trailing dot),
 * each optionally limited to a mask of the config's groups.
 * Built on the control thread at config load; immutable after nx_filter_rules_finish(), then
 * shared read-only by every worker (swapped by generation like the snapshot).
 * Memory: NX_OWNER_filter_rules. Matching exact and wildcard rules allocates nothing; regex
 * rules call regexec(), which may allocate inside libc (user regexes are few; documented).
 * The ladder that composes them with local records and the lists is policy/policy.h.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filter/result.h"
#include "filter/snapshot.h"

/* Rules per list: rule indexes are int16_t in struct nx_filter_result. */
#define NX_FILTER_RULES_MAX 32767

enum nx_filter_rule_list {
	NX_FILTER_RULES_ALLOW, /* level 3 */
	NX_FILTER_RULES_DENY,  /* level 4 */
};

struct nx_filter_rules;

int nx_filter_rules_new(struct nx_filter_rules **out);
void nx_filter_rules_free(struct nx_filter_rules *r);

/*
 * Add one rule to a list. groups: mask of the config's groups (bit g = groups[g]) whose
 * clients it applies to, 0 = every client.
 * Returns the rule's index in its list (>= 0), or NX_ECONFIG with a message in err
 * ("invalid name", "regex: <regerror text>", "at offset N: ..."), NX_ELIMIT, -ENOMEM.
 * Not after finish().
 */
int nx_filter_rules_add(struct nx_filter_rules *r, enum nx_filter_rule_list list, const char *text,
			uint64_t groups, char *err, size_t errlen);
/* Sort the rule tables; the object is read-only (and thread-safe) afterwards. 0 or -ENOMEM. */
int nx_filter_rules_finish(struct nx_filter_rules *r);

unsigned nx_filter_rules_count(const struct nx_filter_rules *r, enum nx_filter_rule_list list);
/* Original text of rule i of a list (for logs and the API). */
const char *nx_filter_rules_text(const struct nx_filter_rules *r, enum nx_filter_rule_list list,
				 unsigned i);

/*
 * One list alone (user allow or user deny): exact rule for the name, else the nearest parent with a "*.x" rule,
 * else the first regex in config order. Sets action ALLOW/user_allow or BLOCK/user_deny,
 * rule index and matched offset. `name`: lower case text, no trailing dot. `groups`: the
 * client's groups (a rule limited to groups matches only when it shares one).
 */
enum nx_filter_action nx_filter_rules_match(const struct nx_filter_rules *r,
					    enum nx_filter_rule_list list, const char *name,
					    size_t len, uint64_t groups,
					    struct nx_filter_result *out);
