/*
 * The side structure: list and user rules that the compact snapshot cannot hold.
 *
 * AdGuard DNS rules with modifiers ($important, $client, $ctag, $dnstype, $denyallow,
 * $dnsrewrite), regex rules /re/, URL-pattern rules that can match a bare host, and hosts lines
 * whose address is an answer (hosts_answers: listed). They are rare (hundreds against millions
 * of plain names), so they live here, beside the snapshot, and the snapshot's 8 bytes per entry
 * do not grow. Language and semantics: src/filter/README.md "The AdGuard rule language".
 *
 * Lifecycle: a builder (control thread or job thread) takes rule lines one at a time
 * (nx_filter_side_add_line, or nx_filter_side_load_source for a compiled <name>.side body),
 * then nx_filter_side_build turns it into an immutable struct nx_filter_side. That object is
 * read by any number of workers concurrently without locks (nx_filter_lists_decide in
 * lists.h); it is freed after every reader passed a quiescent point, with the snapshot it
 * was loaded with.
 * Memory: everything (rules, names, texts, compiled regexes) is charged to NX_OWNER_filter_side.
 * Regexes are PCRE2 without JIT (the service runs with MemoryDenyWriteExecute), each match
 * bounded by NX_FILTER_RE_MATCH_LIMIT / NX_FILTER_RE_DEPTH_LIMIT / NX_FILTER_RE_HEAP_KIB; the
 * matcher's PCRE2 working memory is one fixed block per thread (lists.h).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filter/snapshot.h"

/* Rules per side structure (all sources and user rules together). 8 bytes per entry in the
 * snapshot hold millions; the side is for the rare rest: 256k rules is ~40 MiB at most. */
#define NX_FILTER_SIDE_RULES_MAX (256u * 1024)
/* Regex and pattern rules per side structure (compiled PCRE2 code, ~300 B each): bounds the
 * memory and the prefilter's candidate lists. The 37 shared lists need ~630. */
#define NX_FILTER_SIDE_REGEX_MAX 2048u
/* PCRE2 limits per match call: backtracking steps, nesting depth, KiB of backtracking frames.
 * A crafted pattern + name stops at the step limit (counted, treated as no match). */
#define NX_FILTER_RE_MATCH_LIMIT 20000u
#define NX_FILTER_RE_DEPTH_LIMIT 250u
#define NX_FILTER_RE_HEAP_KIB 32u
/* Regex executions per query: a prefilter (an Aho-Corasick automaton over the regexes'
 * literals) picks the regexes whose literal occurs in the name, and at most this many run (more are
 * counted as limit hits and skipped). With the step limit this is the per-query bound: 32 x 2
 * subjects x NX_FILTER_RE_MATCH_LIMIT steps. */
#define NX_FILTER_RE_PER_QUERY_MAX 32u
/* Values in one $client / $ctag / $dnstype / $denyallow list. */
#define NX_FILTER_SIDE_VALUES_MAX 64u
/* Records one $dnsrewrite / hosts answer may produce (rules of one name and source). */
#define NX_FILTER_REWRITE_RRS_MAX 16u
/* Longest $dnsrewrite TXT value (one character-string). */
#define NX_FILTER_TXT_MAX 255u

/* Origins of a rule: a blocklist source index (< NX_FILTER_SOURCES_MAX, gated by the query's
 * eligible mask) or a user list (always eligible, outranks every list rule). In the user allow
 * list a rule without "@@" is an exception (it is an allow list). */
#define NX_FILTER_ORIGIN_USER_DENY 64u
#define NX_FILTER_ORIGIN_USER_ALLOW 65u

/* How a side rule answers. */
#define NX_FILTER_REWRITES(X)                                                                      \
	X(NONE, "none")		/* block or exception: the usual block response */                 \
	X(RECORDS, "records")	/* NOERROR with the rule's records (empty: NODATA) */              \
	X(NXDOMAIN, "nxdomain") /* $dnsrewrite=NXDOMAIN;; */                                       \
	X(REFUSED, "refused")	/* $dnsrewrite=REFUSED;; */                                        \
	X(HOSTS, "hosts")	/* hosts line with a listed address: A/AAAA records of the name */

enum nx_filter_rewrite {
#define NX_FILTER_REWRITE_ENUM(id, text) NX_FILTER_RW_##id,
	NX_FILTER_REWRITES(NX_FILTER_REWRITE_ENUM)
#undef NX_FILTER_REWRITE_ENUM
};

struct nx_filter_side_builder;
struct nx_filter_side;

/* Counts of one build (nx_filter_side_stats). */
struct nx_filter_side_stats {
	uint64_t rules;	     /* rules kept */
	uint64_t named;	     /* of which indexed by name (||x^, |x^, hosts lines) */
	uint64_t regexes;    /* of which regex / pattern rules (prefiltered per query) */
	uint64_t unfiltered; /* of those, without a literal: tried on every clean name */
	uint64_t never;	     /* of those, with a literal no DNS name (nor "http://name/") holds */
	uint64_t rewrites;   /* of which $dnsrewrite or hosts answers */
	uint64_t badfilter;  /* $badfilter rules read */
	uint64_t cancelled;  /* rules cancelled by a $badfilter of the same origin */
	uint64_t refused;    /* lines refused by add_line (bad rule or a cap) */
	uint64_t bytes;	     /* NX_OWNER_filter_side bytes held by the built structure */
	uint64_t ac_states;  /* the prefilter automaton: states, */
	uint64_t ac_dense;   /* of which with a full row, */
	uint64_t ac_bytes;   /* and its bytes (within `bytes`) */
};

/* New empty builder; returns 0 or -ENOMEM. */
int nx_filter_side_builder_new(struct nx_filter_side_builder **out);
/* Release a builder that was not built (NULL: no-op). */
void nx_filter_side_builder_free(struct nx_filter_side_builder *b);

/*
 * Add one rule line (no '\n'; comments and blank lines are accepted and ignored) from
 * `origin` (a source index or NX_FILTER_ORIGIN_USER_*). Returns 0, or NX_EFORMAT with a
 * NUL-terminated message in err (e.g. "unknown modifier 'third-party'", "$dnstype: unknown
 * type 'NONE'"), or NX_ELIMIT when a cap above is reached (message says which), or -ENOMEM.
 * Refusals are counted in the stats. The rule text is copied.
 */
int nx_filter_side_add_line(struct nx_filter_side_builder *b, const char *line, size_t len,
			    unsigned origin, char *err, size_t errlen);

/*
 * nx_filter_side_add_line for a user rule (origin NX_FILTER_ORIGIN_USER_*) limited to the
 * config groups in `groups` (bit g: group g; 0: every client): the rule then applies only to
 * a query whose nx_filter_qctx.groups shares a bit (Pi-hole's per-group lists). Same returns.
 */
int nx_filter_side_add_line_groups(struct nx_filter_side_builder *b, const char *line, size_t len,
				   unsigned origin, uint64_t groups, char *err, size_t errlen);

/*
 * Add every line of <dir>/<name>.side (written by the compiler) as source `origin`. A missing
 * file is an empty source. Lines that no longer parse (a body from another version) are
 * counted as refused, not fatal. Returns 0, -errno, -ENOMEM, NX_ELIMIT.
 */
int nx_filter_side_load_source(struct nx_filter_side_builder *b, const char *dir, const char *name,
			       unsigned origin);

/* Apply $badfilter, index and compile; consumes the builder (freed in every case). Returns 0
 * and *out (owned by the caller), or -ENOMEM. */
int nx_filter_side_build(struct nx_filter_side_builder *b, struct nx_filter_side **out);

/* Convenience: builder + load_source for every snapshot source (index = position) + build. */
int nx_filter_side_open(const struct nx_filter_snap_source *src, unsigned n,
			struct nx_filter_side **out);

/* Free (NULL: no-op); only after every reader is done. */
void nx_filter_side_free(struct nx_filter_side *s);

void nx_filter_side_stats(const struct nx_filter_side *s, struct nx_filter_side_stats *out);

/* Text of rule `idx` as written in its list (pointer into s, valid while s lives); NULL when
 * idx is out of range. *len gets its length. */
const char *nx_filter_side_rule_text(const struct nx_filter_side *s, int32_t idx, size_t *len);
/* Origin of rule idx (source index or NX_FILTER_ORIGIN_USER_*), or -1. */
int nx_filter_side_rule_origin(const struct nx_filter_side *s, int32_t idx);
/* Restricting modifiers of rule idx as the ranking counts them ($client, $ctag, $dnstype,
 * $denyallow, $dnsrewrite, a hosts answer: one each), or -1 (side_info.c). Within a class the
 * rule with more wins, and a side rule beats a snapshot verdict of its class only with one. */
int nx_filter_side_rule_mods(const struct nx_filter_side *s, int32_t idx);

/*
 * Check one line as the compiler's parser does before writing it to <name>.side: returns
 * true when it is a valid side rule; false fills err. Pure, any thread.
 */
bool nx_filter_side_line_ok(const char *line, size_t len, char *err, size_t errlen);

/* Regex matches stopped by a PCRE2 limit since start (all threads), for tests and metrics. */
uint64_t nx_filter_side_regex_limit_hits(void);
