/* User allow/deny rules (exact, *.x, /regex/), each optionally limited to groups. */
#include "filter/rules.h"

#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/ledger.h"
#include "filter/parse.h"

struct name_rule {
	char *name; /* owned (filter_rules), normalised */
	uint16_t len;
	int16_t index;	 /* rule index in its list */
	uint64_t groups; /* 0 = all */
};

struct regex_rule {
	regex_t re;
	int16_t index;
	uint64_t groups;
};

struct rule_list {
	struct name_rule *exact, *wild; /* owned arrays, sorted by name after finish */
	unsigned nexact, nwild, cap_exact, cap_wild;
	struct regex_rule *re; /* owned array, config order */
	unsigned nre, cap_re;
	char **texts; /* owned: original text of every rule by index */
	unsigned ntexts, cap_texts;
};

struct nx_filter_rules {
	struct rule_list lists[2];
	bool finished;
};

int nx_filter_rules_new(struct nx_filter_rules **out)
{
	*out = nx_mem_calloc(NX_OWNER_filter_rules, 1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

static void free_list(struct rule_list *l)
{
	for (unsigned i = 0; i < l->nexact; i++) {
		nx_mem_free(NX_OWNER_filter_rules, l->exact[i].name, l->exact[i].len + 1u);
	}
	for (unsigned i = 0; i < l->nwild; i++) {
		nx_mem_free(NX_OWNER_filter_rules, l->wild[i].name, l->wild[i].len + 1u);
	}
	for (unsigned i = 0; i < l->nre; i++) {
		regfree(&l->re[i].re);
	}
	for (unsigned i = 0; i < l->ntexts; i++) {
		nx_mem_free(NX_OWNER_filter_rules, l->texts[i], strlen(l->texts[i]) + 1);
	}
	nx_mem_free(NX_OWNER_filter_rules, l->exact, l->cap_exact * sizeof(*l->exact));
	nx_mem_free(NX_OWNER_filter_rules, l->wild, l->cap_wild * sizeof(*l->wild));
	nx_mem_free(NX_OWNER_filter_rules, l->re, l->cap_re * sizeof(*l->re));
	nx_mem_free(NX_OWNER_filter_rules, l->texts, l->cap_texts * sizeof(*l->texts));
}

void nx_filter_rules_free(struct nx_filter_rules *r)
{
	if (!r) {
		return;
	}
	free_list(&r->lists[0]);
	free_list(&r->lists[1]);
	nx_mem_free(NX_OWNER_filter_rules, r, sizeof(*r));
}

/* Grow *arr (elements of size sz) to hold one more; 0 or -ENOMEM. */
static int grow(void **arr, unsigned *cap, unsigned n, size_t sz)
{
	if (n < *cap) {
		return 0;
	}
	unsigned ncap = *cap ? *cap * 2 : 8;
	void *p = nx_mem_realloc(NX_OWNER_filter_rules, *arr, *cap * sz, ncap * sz);
	if (!p) {
		return -ENOMEM;
	}
	*arr = p;
	*cap = ncap;
	return 0;
}

static int add_name(struct name_rule **arr, unsigned *n, unsigned *cap, const char *name,
		    size_t len, int16_t index, uint64_t groups)
{
	if (grow((void **)arr, cap, *n, sizeof(**arr)) != 0) {
		return -ENOMEM;
	}
	char *copy = nx_mem_alloc(NX_OWNER_filter_rules, len + 1);
	if (!copy) {
		return -ENOMEM;
	}
	memcpy(copy, name, len + 1);
	(*arr)[(*n)++] = (struct name_rule){
	    .name = copy, .len = (uint16_t)len, .index = index, .groups = groups};
	return 0;
}

int nx_filter_rules_add(struct nx_filter_rules *r, enum nx_filter_rule_list list, const char *text,
			uint64_t groups, char *err, size_t errlen)
{
	if (r->finished || (unsigned)list > NX_FILTER_RULES_DENY) {
		snprintf(err, errlen, "rules are finished");
		return NX_ECONFIG;
	}
	struct rule_list *l = &r->lists[list];
	if (l->ntexts >= NX_FILTER_RULES_MAX) {
		snprintf(err, errlen, "more than %d rules", NX_FILTER_RULES_MAX);
		return NX_ELIMIT;
	}
	size_t tlen = strlen(text);
	int16_t index = (int16_t)l->ntexts;
	int rc;
	if (tlen >= 2 && text[0] == '/' && text[tlen - 1] == '/') {
		char *re = nx_mem_alloc(NX_OWNER_filter_rules, tlen - 1);
		if (!re) {
			return -ENOMEM;
		}
		memcpy(re, text + 1, tlen - 2);
		re[tlen - 2] = '\0';
		if (grow((void **)&l->re, &l->cap_re, l->nre, sizeof(*l->re)) != 0) {
			nx_mem_free(NX_OWNER_filter_rules, re, tlen - 1);
			return -ENOMEM;
		}
		struct regex_rule *rr = &l->re[l->nre];
		rc = regcomp(&rr->re, re, REG_EXTENDED | REG_ICASE | REG_NOSUB);
		nx_mem_free(NX_OWNER_filter_rules, re, tlen - 1);
		if (rc != 0) {
			char msg[200];
			regerror(rc, &rr->re, msg, sizeof(msg));
			snprintf(err, errlen, "at offset 1: regex: %s", msg);
			return NX_ECONFIG;
		}
		rr->index = index;
		rr->groups = groups;
		l->nre++;
	} else {
		bool wild = tlen > 2 && text[0] == '*' && text[1] == '.';
		const char *n = wild ? text + 2 : text;
		char norm[NX_FILTER_NAME_MAX + 1];
		size_t nlen = 0;
		enum nx_filter_skip why = nx_filter_name_norm(n, strlen(n), norm, &nlen);
		if (why != NX_FILTER_SKIP_NONE && why != NX_FILTER_SKIP_localhost) {
			snprintf(err, errlen, "at offset %d: %s", wild ? 2 : 0,
				 nx_filter_skip_help(why));
			return NX_ECONFIG;
		}
		if (why == NX_FILTER_SKIP_localhost) {
			/* a person may deliberately allow/deny "local"; keep it as written */
			snprintf(norm, sizeof(norm), "%s", n);
			nlen = strlen(norm);
			for (size_t i = 0; i < nlen; i++) {
				if (norm[i] >= 'A' && norm[i] <= 'Z') {
					norm[i] = (char)(norm[i] + 32);
				}
			}
		}
		rc = wild ? add_name(&l->wild, &l->nwild, &l->cap_wild, norm, nlen, index, groups)
			  : add_name(&l->exact, &l->nexact, &l->cap_exact, norm, nlen, index,
				     groups);
		if (rc != 0) {
			return rc;
		}
	}
	if (grow((void **)&l->texts, &l->cap_texts, l->ntexts, sizeof(*l->texts)) != 0) {
		return -ENOMEM; /* the rule stays, without text; free_list copes */
	}
	l->texts[l->ntexts] = nx_mem_strdup(NX_OWNER_filter_rules, text);
	if (!l->texts[l->ntexts]) {
		return -ENOMEM;
	}
	l->ntexts++;
	return index;
}

static int rule_cmp(const void *a, const void *b)
{
	const struct name_rule *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->name, y->name, n);
	if (c != 0) {
		return c;
	}
	if (x->len != y->len) {
		return x->len < y->len ? -1 : 1;
	}
	return x->index - y->index;
}

int nx_filter_rules_finish(struct nx_filter_rules *r)
{
	for (int i = 0; i < 2; i++) {
		struct rule_list *l = &r->lists[i];
		if (l->nexact) {
			qsort(l->exact, l->nexact, sizeof(*l->exact), rule_cmp);
		}
		if (l->nwild) {
			qsort(l->wild, l->nwild, sizeof(*l->wild), rule_cmp);
		}
	}
	r->finished = true;
	return 0;
}

unsigned nx_filter_rules_count(const struct nx_filter_rules *r, enum nx_filter_rule_list list)
{
	return r && (unsigned)list <= NX_FILTER_RULES_DENY ? r->lists[list].ntexts : 0;
}

const char *nx_filter_rules_text(const struct nx_filter_rules *r, enum nx_filter_rule_list list,
				 unsigned i)
{
	if (!r || (unsigned)list > NX_FILTER_RULES_DENY || i >= r->lists[list].ntexts) {
		return NULL;
	}
	return r->lists[list].texts[i];
}

/* First rule (lowest index) for exactly name that applies to groups; -1 if none. */
static int find_name(const struct name_rule *arr, unsigned n, const char *name, size_t len,
		     uint64_t groups)
{
	unsigned lo = 0, hi = n;
	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		size_t m = arr[mid].len < len ? arr[mid].len : len;
		int c = memcmp(arr[mid].name, name, m);
		if (c == 0 && arr[mid].len != len) {
			c = arr[mid].len < len ? -1 : 1;
		}
		if (c < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	for (unsigned i = lo; i < n && arr[i].len == len && memcmp(arr[i].name, name, len) == 0;
	     i++) {
		if (arr[i].groups == 0 || (arr[i].groups & groups)) {
			return arr[i].index;
		}
	}
	return -1;
}

enum nx_filter_action nx_filter_rules_match(const struct nx_filter_rules *r,
					    enum nx_filter_rule_list list, const char *name,
					    size_t len, uint64_t groups,
					    struct nx_filter_result *out)
{
	nx_filter_result_clear(out);
	if (!r || (unsigned)list > NX_FILTER_RULES_DENY) {
		return NX_FILTER_ACT_NONE;
	}
	if (len > 0 && name[len - 1] == '.') {
		len--;
	}
	if (len == 0 || len > NX_FILTER_NAME_MAX) {
		return NX_FILTER_ACT_NONE;
	}
	const struct rule_list *l = &r->lists[list];
	int idx = -1;
	size_t off = 0;
	if (l->nexact) {
		idx = find_name(l->exact, l->nexact, name, len, groups);
	}
	for (size_t pos = 0; idx < 0 && l->nwild;) {
		const char *dot = memchr(name + pos, '.', len - pos);
		if (!dot || (size_t)(dot - name) + 1 >= len) {
			break;
		}
		pos = (size_t)(dot - name) + 1;
		idx = find_name(l->wild, l->nwild, name + pos, len - pos, groups);
		off = pos;
	}
	if (idx < 0 && l->nre) {
		char buf[NX_FILTER_NAME_MAX + 1];
		memcpy(buf, name, len);
		buf[len] = '\0';
		for (unsigned i = 0; i < l->nre; i++) {
			const struct regex_rule *rr = &l->re[i];
			if ((rr->groups == 0 || (rr->groups & groups)) &&
			    regexec(&rr->re, buf, 0, NULL, 0) == 0) {
				idx = rr->index;
				off = 0;
				break;
			}
		}
	}
	if (idx < 0) {
		return NX_FILTER_ACT_NONE;
	}
	bool allow = list == NX_FILTER_RULES_ALLOW;
	out->action = allow ? NX_FILTER_ACT_ALLOW : NX_FILTER_ACT_BLOCK;
	out->reason = allow ? NX_FILTER_R_user_allow : NX_FILTER_R_user_deny;
	out->rule = (int16_t)idx;
	out->matched_off = (uint16_t)off;
	out->matched_len = (uint16_t)(len - off);
	return (enum nx_filter_action)out->action;
}
