/*
 * Value types of the guard keys (access.rate_limit*, filter.rebinding_*): a list of domain
 * names, each meaning the name itself and every name below it.
 */
#include <stdio.h>
#include <string.h>

#include "base/ledger.h"
#include "conf/impl.h"

#define LABEL_MAX 320 /* bytes of a value label: "filter.rebinding_allow[12]" */

/* Stored as the lower-cased presentation form without the trailing dot: the matcher compares
 * text suffixes, only on the rare answer that would otherwise be stripped. */
static int domains_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
			 struct fy_node *key)
{
	size_t cnt;
	int rc = nx_conf_list_count(ld, k->path, val, key, k->min, k->max, true, &cnt);
	if (rc || cnt == 0) {
		return rc;
	}
	char **v = nx_mem_calloc(NX_OWNER_config, cnt, sizeof(*v));
	if (!v) {
		return nx_conf_fail(ld, val, key, "%s: out of memory", k->path);
	}
	*NX_CONF_FIELD(ld->c, k, char **) = v;
	*NX_CONF_COUNT(ld->c, k) = cnt;
	void *it = NULL;
	struct fy_node *item;
	char label[LABEL_MAX], buf[NX_DNS_TEXT_MAX], text[NX_DNS_TEXT_MAX];
	for (size_t i = 0; i < cnt && (item = fy_node_sequence_iterate(val, &it)); i++) {
		nx_conf_label(label, sizeof(label), "%s[%zu]", k->path, i);
		rc = nx_conf_scalar(ld, label, item, key, "a domain name", false, buf, sizeof(buf));
		if (rc) {
			return rc;
		}
		uint8_t wire[NX_DNS_NAME_MAX];
		const char *why = NULL;
		size_t wl = nx_conf_host_name(buf, wire, &why);
		if (wl == 0) {
			return nx_conf_fail(ld, item, key, "%s: '%s' is not a domain name: %s",
					    label, buf, why);
		}
		if (wl == 1 || nx_dns_name_to_text(wire, wl, text, sizeof(text)) < 0) {
			return nx_conf_fail(ld, item, key, "%s: '%s' is not a domain name", label,
					    buf);
		}
		v[i] = nx_mem_strdup(NX_OWNER_config, text);
		if (!v[i]) {
			return nx_conf_fail(ld, item, key, "%s: out of memory", label);
		}
	}
	return 0;
}

static void domains_release(const struct nx_conf_key *k, struct nx_conf *c)
{
	char ***f = NX_CONF_FIELD(c, k, char **);
	size_t *n = NX_CONF_COUNT(c, k);
	nx_conf_free_strv(*f, *n);
	*f = NULL;
	*n = 0;
}

static void domains_range(const struct nx_conf_key *k, char *buf, size_t cap)
{
	snprintf(buf, cap, "%lld..%lld names", k->min, k->max);
}

const struct nx_conf_type nx_conf_t_domains = {
    .name = "list of domain names",
    .parse = domains_parse,
    .release = domains_release,
    .range = domains_range,
};
