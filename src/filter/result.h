/*
 * The decision for one query name: action, reason, matched name, source. A plain value
 * (caller's stack); matched is an offset into the caller's query name, never a copy.
 */
#pragma once

#include <stdint.h>

#define NX_FILTER_ACTIONS(X)                                                                       \
	X(NONE, "none")	  /* no rule matched: resolve normally */                                  \
	X(ALLOW, "allow") /* a rule allows it: resolve normally, stop the ladder */                \
	X(BLOCK, "block") /* answer with the block response */                                     \
	X(LOCAL, "local") /* answer from local records */

enum nx_filter_action {
#define NX_FILTER_ACTION_ENUM(id, text) NX_FILTER_ACT_##id,
	NX_FILTER_ACTIONS(NX_FILTER_ACTION_ENUM)
#undef NX_FILTER_ACTION_ENUM
};

/* Reasons in ladder order (architecture.md "Decision ladder"). */
#define NX_FILTER_REASONS(X)                                                                       \
	X(none, "none")                                                                            \
	X(paused, "paused")			      /* level 1 */                                \
	X(local_record, "local_record")		      /* level 2 */                                \
	X(user_allow, "user_allow")		      /* level 3 */                                \
	X(user_deny, "user_deny")		      /* level 4 */                                \
	X(blocklist_exception, "blocklist_exception") /* level 7 */                                \
	X(blocklist_domain, "blocklist_domain")	      /* level 8 */                                \
	X(blocklist_wildcard, "blocklist_wildcard")   /* level 9 */                                \
	X(blocklist_rule, "blocklist_rule")	      /* side rule: modifiers, regex, pattern */   \
	X(blocklist_rewrite, "blocklist_rewrite")     /* side rule: $dnsrewrite answer */          \
	X(blocklist_hosts, "blocklist_hosts")	      /* hosts line with a listed address */ \
	X(special_localhost, "special_localhost")     /* special-use names (policy/special.c) */  \
	X(special_use_name, "special_use_name")                                                    \
	X(single_label, "single_label")                                                            \
	X(private_reverse, "private_reverse")                                                      \
	X(firefox_canary, "firefox_canary")                                                        \
	X(android_probe, "android_probe")                                                          \
	X(private_relay, "private_relay")                                                          \
	X(ddr, "ddr")

enum nx_filter_reason {
#define NX_FILTER_REASON_ENUM(id, text) NX_FILTER_R_##id,
	NX_FILTER_REASONS(NX_FILTER_REASON_ENUM)
#undef NX_FILTER_REASON_ENUM
};

struct nx_filter_result {
	uint8_t action;	      /* enum nx_filter_action */
	uint8_t reason;	      /* enum nx_filter_reason */
	int16_t source;	      /* blocklist source index (levels 7-9), else -1 */
	int16_t rule;	      /* user rule index (levels 3-4), else -1 */
	uint16_t matched_off; /* matched name = query name + matched_off (text: first byte of the
			       * name; wire: its first length byte); 0 when nothing matched */
	uint16_t matched_len; /* bytes of the matched name from matched_off to the end */
	uint8_t rewrite;      /* enum nx_filter_rewrite (filter/side.h): NONE = block response */
	int32_t side_rule;    /* deciding rule of the side structure (its text: side.h), else -1 */
};

const char *nx_filter_action_name(enum nx_filter_action a);
const char *nx_filter_reason_name(enum nx_filter_reason r);

static inline void nx_filter_result_clear(struct nx_filter_result *r)
{
	r->action = NX_FILTER_ACT_NONE;
	r->reason = NX_FILTER_R_none;
	r->source = -1;
	r->rule = -1;
	r->matched_off = 0;
	r->matched_len = 0;
	r->rewrite = 0;
	r->side_rule = -1;
}
