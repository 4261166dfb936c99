/* One verdict as JSON: the same object from `nxdns lookup` and /api/lookup. */
#include "policy/policy.h"

#include <jansson.h>

#include "dns/wire.h"

json_t *nx_policy_lookup_json(const struct nx_policy *p, const char *name, uint16_t qtype,
			      const struct sockaddr *client, const char *client_id,
			      const char **err)
{
	uint8_t wire[NX_DNS_NAME_MAX];
	int wl = name ? nx_dns_name_from_text(name, wire) : -1;
	if (wl < 0) {
		*err = "invalid name";
		return NULL;
	}
	struct nx_policy_query q;
	nx_policy_query_init(p, &q, wire, (size_t)wl, qtype, client, client_id);
	struct nx_filter_result r;
	enum nx_filter_action a = nx_policy_decide(p, &q, &r);
	char matched[NX_DNS_TEXT_MAX] = "";
	if (r.matched_len > 0) {
		nx_dns_name_to_text(wire + r.matched_off, r.matched_len, matched, sizeof(matched));
	}
	json_t *j =
	    json_pack("{s:s, s:s, s:s, s:s, s:s}", "name", name, "action", nx_policy_verdict(a),
		      "reason", nx_filter_reason_name((enum nx_filter_reason)r.reason), "matched",
		      matched, "source", nx_policy_source_name(p, &r));
	if (!j) {
		*err = "out of memory";
	}
	return j;
}
