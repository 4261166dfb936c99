/* Read-only facts about one built side rule, for callers outside filter/ that rank a side
 * verdict against another (policy/badfilter.c). Kept apart from side.c, which builds. */
#include "filter/side.h"
#include "filter/side_impl.h"

int nx_filter_side_rule_mods(const struct nx_filter_side *s, int32_t idx)
{
	if (!s || idx < 0 || (uint32_t)idx >= s->nrules) {
		return -1;
	}
	return s->rules[idx].nmods;
}
