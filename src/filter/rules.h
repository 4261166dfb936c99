/*
 * User rules, groups, and the decision ladder that composes them with the snapshot.
 *
 * struct nx_filter_rules holds filter.allow / filter.deny (exact names, "*.x" = proper
 * subdomains of x, "/re/" = POSIX ERE, case-insensitive, matched against the whole lower-case
 * name without trailing dot) and the groups (name -> sources mask, filtering on/off).
 * Built on the control thread at config load; immutable after nx_filter_rules_finish(), then
 * shared read-only by every worker (swapped by generation like the snapshot).
 * Memory: NX_OWNER_filter_rules. Matching exact and wildcard rules allocates nothing; regex
 * rules call regexec(), which may allocate inside libc (user regexes are few; documented).
 *
 * The ladder (architecture.md): 1 paused -> 2 local records -> 3 user allow -> 4 user deny
 * -> 7 list exceptions -> 8 list exact -> 9 list parents (nx_filter_decide()).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filter/result.h"
#include "filter/snapshot.h"

/* Groups per configuration: a client's groups are one uint64_t mask. */
#define NX_FILTER_GROUPS_MAX 64
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
 * Add one rule to a list. groups: mask of groups it applies to, 0 = every client.
 * Returns the rule's index in its list (>= 0), or NX_ECONFIG with a message in err
 * ("invalid name", "regex: <regerror text>", "at offset N: ..."), NX_ELIMIT, -ENOMEM.
 * Not after finish().
 */
int nx_filter_rules_add(struct nx_filter_rules *r, enum nx_filter_rule_list list, const char *text,
			uint64_t groups, char *err, size_t errlen);
/* Define a group. Returns its index (bit in client masks), NX_ECONFIG (duplicate or empty
 * name), NX_ELIMIT (more than NX_FILTER_GROUPS_MAX). */
int nx_filter_rules_add_group(struct nx_filter_rules *r, const char *name, uint64_t sources,
			      bool filtering);
/* Index of a group by name, or NX_ENOTFOUND. */
int nx_filter_rules_group(const struct nx_filter_rules *r, const char *name);
/* Sort the rule tables; the object is read-only (and thread-safe) afterwards. 0 or -ENOMEM. */
int nx_filter_rules_finish(struct nx_filter_rules *r);

/* Sources eligible for a client in `groups`: union over its groups with filtering on.
 * No groups defined (or r == NULL): every source. */
uint64_t nx_filter_rules_sources(const struct nx_filter_rules *r, uint64_t groups);
/* Does any of the client's groups filter? (No groups defined: yes.) */
bool nx_filter_rules_filtering(const struct nx_filter_rules *r, uint64_t groups);
unsigned nx_filter_rules_count(const struct nx_filter_rules *r, enum nx_filter_rule_list list);
/* Original text of rule i of a list (for logs and the API). */
const char *nx_filter_rules_text(const struct nx_filter_rules *r, enum nx_filter_rule_list list,
				 unsigned i);

/*
 * Level 3 or 4 alone: exact rule for the name, else the nearest parent with a "*.x" rule,
 * else the first regex in config order. Sets action ALLOW/user_allow or BLOCK/user_deny,
 * rule index and matched offset. `name`: lower case text, no trailing dot.
 */
enum nx_filter_action nx_filter_rules_match(const struct nx_filter_rules *r,
					    enum nx_filter_rule_list list, const char *name,
					    size_t len, uint64_t groups,
					    struct nx_filter_result *out);

typedef bool (*nx_filter_local_cb)(void *arg, const char *name, size_t len);

/* Everything one decision needs; all borrowed, all may be NULL / zero. */
struct nx_filter_ladder {
	bool paused;		  /* filtering paused globally */
	uint64_t paused_groups;	  /* groups whose filtering is paused now */
	nx_filter_local_cb local; /* level 2: has Q local records? */
	void *local_arg;
	const struct nx_filter_rules *rules; /* levels 3-4 and groups */
	const struct nx_filter_snap *snap;   /* levels 7-9 */
};

/*
 * The whole ladder for a client in `groups`. Results: NONE/paused (1), LOCAL/local_record (2),
 * ALLOW/user_allow (3), BLOCK/user_deny (4), then nx_filter_snap_match()'s (7-9), or
 * NONE/none. `name`: lower case text (a trailing dot is ignored).
 */
enum nx_filter_action nx_filter_decide(const struct nx_filter_ladder *l, const char *name,
				       size_t len, uint64_t groups, struct nx_filter_result *out);
