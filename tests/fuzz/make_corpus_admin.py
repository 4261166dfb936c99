#!/usr/bin/python3
"""Regenerate tests/fuzz/corpus/admin: the seed corpus for fuzz_admin (and its replay test).

Input format (see tests/fuzz/fuzz_admin.c): a route byte (an index into its route table,
mirrored in ROUTES below), then "path-suffix\\nquery-string\\nbody". The seeds are what the
web admin sends (settings, sources, rules, groups, clients, local records, pause, lookups,
query-log filters with every parameter) and the mistakes a client makes (unknown members,
wrong types, duplicate keys, out-of-range integers, bad CIDRs, deep nesting, truncated JSON).
Needs only the standard library; the files are committed, rerun after edits:
    tests/fuzz/make_corpus_admin.py
Deterministic: no randomness.
"""
import json
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "admin")

# The order of fuzz_admin.c's routes[] table.
ROUTES = [
    "GET /api/settings", "PUT /api/settings", "GET /api/schema", "GET /api/stats/summary",
    "GET /api/stats/history", "GET /api/stats/top", "GET /api/queries",
    "GET /api/filter/sources", "POST /api/filter/sources", "POST /api/filter/sources/refresh",
    "POST /api/filter/sources/", "PUT /api/filter/sources/", "DELETE /api/filter/sources/",
    "GET /api/filter/rules", "POST /api/filter/rules", "DELETE /api/filter/rules",
    "DELETE /api/filter/rules/", "GET /api/filter/pause", "POST /api/filter/pause",
    "GET /api/lookup", "GET /api/groups", "POST /api/groups", "PUT /api/groups/",
    "DELETE /api/groups/", "GET /api/clients", "POST /api/clients", "PUT /api/clients/",
    "DELETE /api/clients/", "GET /api/local-records", "POST /api/local-records",
    "DELETE /api/local-records", "DELETE /api/local-records/",
    "GET /api/apple/doh.mobileconfig", "GET /api/apple/dot.mobileconfig",
]


def j(v):
    return json.dumps(v, separators=(",", ":"))


SEEDS = [
    ("settings_get", "GET /api/settings", "", "", ""),
    ("settings_one", "PUT /api/settings", "", "", j({"key": "cache.size", "value": 4096})),
    ("settings_many", "PUT /api/settings", "", "",
     j({"settings": {"upstream.timeout_ms": 1500, "log.level": "info",
                     "filter.block_mode": "nxdomain"}})),
    ("settings_bad_type", "PUT /api/settings", "", "", j({"key": "cache.size", "value": "x"})),
    ("settings_unknown", "PUT /api/settings", "", "", j({"key": "no.such.key", "value": 1})),
    ("settings_dup", "PUT /api/settings", "", "", '{"key":"a","key":"b"}'),
    ("settings_truncated", "PUT /api/settings", "", "", '{"settings":{"cache.size":'),
    ("settings_deep", "PUT /api/settings", "", "", '{"value":' + "[" * 200 + "]" * 200 + "}"),
    ("settings_array", "PUT /api/settings", "", "", "[1,2,3]"),
    ("schema", "GET /api/schema", "", "", ""),
    ("summary_range", "GET /api/stats/summary", "", "from=1699990000000&to=1700000000000", ""),
    ("summary_bad", "GET /api/stats/summary", "", "from=9&to=1", ""),
    ("history_step", "GET /api/stats/history", "", "step=3600&from=0&to=1700000000000", ""),
    ("history_bad_step", "GET /api/stats/history", "", "step=61", ""),
    ("top_clients", "GET /api/stats/top", "", "kind=clients&limit=10", ""),
    ("top_bad", "GET /api/stats/top", "", "kind=x&limit=-1", ""),
    ("queries_all", "GET /api/queries", "",
     "client=192.168.1.0%2F24&client_id=phone&name=example&status=blocked&proto=udp,doh"
     "&from=1&to=1700000000000&limit=50", ""),
    ("queries_cursor", "GET /api/queries", "", "cursor=1700000000000-42&limit=1", ""),
    ("queries_bad_proto", "GET /api/queries", "", "proto=udp,,tcp&status=nope", ""),
    ("queries_overflow", "GET /api/queries", "", "limit=99999999999999999999999", ""),
    ("sources_get", "GET /api/filter/sources", "", "", ""),
    ("sources_add", "POST /api/filter/sources", "", "",
     j({"name": "extra", "url": "https://lists.example/hosts.txt", "format": "hosts",
        "groups": ["default"], "enabled": True})),
    ("sources_add_path", "POST /api/filter/sources", "", "",
     j({"name": "local", "path": "../../etc/passwd"})),
    ("sources_add_both", "POST /api/filter/sources", "", "",
     j({"name": "x", "url": "https://a.example/", "path": "x.txt"})),
    ("sources_refresh_all", "POST /api/filter/sources/refresh", "", "", ""),
    ("sources_refresh_one", "POST /api/filter/sources/", "ads/refresh", "", ""),
    ("sources_edit", "PUT /api/filter/sources/", "mine", "", j({"enabled": False})),
    ("sources_delete", "DELETE /api/filter/sources/", "ads", "", ""),
    ("sources_delete_missing", "DELETE /api/filter/sources/", "nope/x", "", ""),
    ("rules_get", "GET /api/filter/rules", "", "", ""),
    ("rules_add_deny", "POST /api/filter/rules", "", "", j({"list": "deny", "rule": "bad.example"})),
    ("rules_add_allow", "POST /api/filter/rules", "", "",
     j({"list": "allow", "rule": "*.ok.example"})),
    ("rules_add_bad", "POST /api/filter/rules", "", "", j({"list": "other", "rule": 7})),
    ("rules_delete_body", "DELETE /api/filter/rules", "", "",
     j({"list": "deny", "rule": "ads.example"})),
    ("rules_delete_path", "DELETE /api/filter/rules/", "deny/ads.example", "", ""),
    ("pause_get", "GET /api/filter/pause", "", "", ""),
    ("pause_set", "POST /api/filter/pause", "", "", j({"seconds": 300})),
    ("pause_resume", "POST /api/filter/pause", "", "", j({"resume": True})),
    ("pause_huge", "POST /api/filter/pause", "", "", '{"seconds":9223372036854775807}'),
    ("lookup", "GET /api/lookup", "", "name=ads.example&client=tablet", ""),
    ("lookup_empty", "GET /api/lookup", "", "name=&client=", ""),
    ("groups_get", "GET /api/groups", "", "", ""),
    ("groups_add", "POST /api/groups", "", "",
     j({"name": "teens", "sources": ["ads"], "filtering": True})),
    ("groups_add_unknown_source", "POST /api/groups", "", "", j({"name": "g", "sources": ["zz"]})),
    ("groups_edit", "PUT /api/groups/", "kids", "", j({"sources": [], "filtering": False})),
    ("groups_delete", "DELETE /api/groups/", "guests", "", ""),
    ("clients_get", "GET /api/clients", "", "", ""),
    ("clients_add", "POST /api/clients", "", "",
     j({"name": "tv", "ids": ["192.168.1.60", "fd00::/64", "aa:bb:cc:dd:ee:ff", "phone"],
        "groups": ["kids"]})),
    ("clients_add_bad_cidr", "POST /api/clients", "", "", j({"name": "x", "ids": ["10.0.0.0/33"]})),
    ("clients_edit", "PUT /api/clients/", "tablet", "", j({"ids": ["192.168.1.51"]})),
    ("clients_delete", "DELETE /api/clients/", "tablet", "", ""),
    ("locals_get", "GET /api/local-records", "", "", ""),
    ("locals_add_a", "POST /api/local-records", "", "",
     j({"name": "printer.lan", "type": "A", "value": "192.168.1.20", "ttl": 60})),
    ("locals_add_txt", "POST /api/local-records", "", "",
     j({"name": "t.lan", "type": "TXT", "value": "v=spf1 -all"})),
    ("locals_add_bad", "POST /api/local-records", "", "",
     j({"name": "a..lan", "type": "MX", "value": "x", "ttl": -5})),
    ("locals_delete_query", "DELETE /api/local-records", "",
     "name=nas.lan&type=A&value=192.168.1.10", ""),
    ("locals_delete_escaped", "DELETE /api/local-records", "", "name=nas%2Elan&type=%41", ""),
    ("locals_delete_index", "DELETE /api/local-records/", "1", "", ""),
    ("locals_delete_bad_index", "DELETE /api/local-records/", "99999999999999999999", "", ""),
    ("apple_doh", "GET /api/apple/doh.mobileconfig", "", "client_id=phone", ""),
    ("apple_dot", "GET /api/apple/dot.mobileconfig", "", "client_id=Not%20Valid", ""),
]


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.unlink(os.path.join(OUT, f))
    for name, route, suffix, query, body in SEEDS:
        data = bytes([ROUTES.index(route)]) + f"{suffix}\n{query}\n{body}".encode()
        with open(os.path.join(OUT, name + ".bin"), "wb") as f:
            f.write(data)
    print(f"{len(SEEDS)} seeds in {OUT}")


if __name__ == "__main__":
    main()
