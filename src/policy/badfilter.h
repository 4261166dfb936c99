/*
 * Inside policy/: a user `$badfilter` against the lists' snapshot entries (badfilter.c).
 * The public half (build, free, count) is in policy.h.
 */
#pragma once

#include "filter/lists.h"
#include "policy/policy.h"

/*
 * out is the list verdict nx_filter_lists_decide gave for fq, taken from the snapshot
 * (out->side_rule < 0, action ALLOW or BLOCK). When a badfilter entry of bf that applies to
 * fq->groups names the matched name, the snapshot is walked again over the name and its
 * parents with the cancelled entry forms removed in every source, and the side rules of `side`
 * get the say they lose to a snapshot verdict (AdGuard's ranking); out becomes that verdict
 * (NONE when nothing is left). Otherwise out is untouched. No allocation; any thread.
 */
void nx_policy_badfilter_apply(const struct nx_policy_badfilter *bf,
			       const struct nx_filter_snap *snap, const struct nx_filter_side *side,
			       const struct nx_filter_qctx *fq, struct nx_filter_result *out);
