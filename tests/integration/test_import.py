"""`nxdns import` (issue 15): a Pi-hole v6 Teleporter archive and AdGuard Home's
AdGuardHome.yaml become a validated nxdns configuration and a report, line by line.

The Teleporter archive is built here, in the layout FTL writes (github.com/pi-hole/FTL
src/zip/teleporter.c: members etc/pihole/pihole.toml, etc/pihole/gravity.db,
etc/pihole/dhcp.leases; gravity.db holds the tables "group", adlist, adlist_by_group,
domainlist, domainlist_by_group, client, client_by_group with the columns of test/gravity.db.sql;
pihole.toml in the form of FTL's test/pihole.toml: indented [tables], one array element per
line, "### CHANGED" comments). The AdGuard Home file is fixtures/AdGuardHome.yaml, laid out as
internal/home/config.go writes it (schema_version 29).

Each mapping is asserted on the report line and on the written file; the written file is then
loaded by `nxdns check-config` and served by a daemon (rules, block mode, local records,
clients and groups over DNS). The original is never modified.
"""

from __future__ import annotations

import hashlib
import sqlite3
import zipfile
from pathlib import Path

import dns.rcode
import pytest
import yaml

from adminkit import run_cli, start_nx
from filterkit import query_from
from harness import answers, make_query

FIXTURES = Path(__file__).parent / "fixtures"

PIHOLE_TOML = r'''# Pi-hole configuration file (v6.3.2)
# Encoding: UTF-8
# This file is managed by pihole-FTL

[dns]
  # Upstream DNS Servers to be used by Pi-hole.
  upstreams = [
    "192.0.2.53",
    "127.0.0.1#5335",
    "2001:db8::53"
  ] ### CHANGED, default = []

  CNAMEdeepInspect = true

  # Array of custom DNS records each one in HOSTS form: "IP HOSTNAME [HOSTNAME ...]"
  hosts = [
    "192.168.1.10 nas.lan nas-alias.lan",
    "2001:db8::10 nas.lan",
    "not-an-address broken.lan"
  ] ### CHANGED, default = []

  dnssec = true ### CHANGED, default = false

  # Array of CNAMEs, each one in the following form: "<cname>,<target>[,<TTL>]"
  cnameRecords = [
    "media.lan,nas.lan,120",
    "files.lan,backup.lan,nas.lan"
  ] ### CHANGED, default = []

  port = 53

  revServers = [
    "true,192.168.1.0/24,192.168.1.1,fritz.box",
    "true,10.0.0.0/20,10.0.0.1#5353",
    "false,172.16.0.0/16,172.16.0.1,old.lan"
  ] ### CHANGED, default = []

  [dns.domain]
    name = "lan"

  [dns.blocking]
    # Should FTL block queries?
    active = true

    mode = "NX" ### CHANGED, default = "NULL"

  [dns.reply.blocking]
    force4 = false
    IPv4 = ""

[dhcp]
  # Is the embedded DHCP server enabled?
  active = true ### CHANGED, default = false

  start = "192.168.1.100"
  hosts = [
    "00:11:22:33:44:55,192.168.1.50,printer"
  ] ### CHANGED, default = []

[webserver]
  domain = "pi.hole"
  [webserver.api]
    pwhash = "$BALLOON-SHA256$v1$..."
    totp_secret = ""
    excludeClients = []
'''

# The teleporter copies tables with CREATE TABLE .. AS SELECT: columns, no constraints.
GRAVITY_SQL = """
CREATE TABLE "group" (id INTEGER, enabled BOOLEAN, name TEXT, date_added INTEGER,
    date_modified INTEGER, description TEXT);
CREATE TABLE adlist (id INTEGER, type INTEGER, address TEXT, enabled BOOLEAN,
    date_added INTEGER, date_modified INTEGER, comment TEXT, date_updated INTEGER,
    number INTEGER, invalid_domains INTEGER, status INTEGER, abp_entries INTEGER);
CREATE TABLE adlist_by_group (adlist_id INTEGER, group_id INTEGER);
CREATE TABLE domainlist (id INTEGER, type INTEGER, domain TEXT, enabled BOOLEAN,
    date_added INTEGER, date_modified INTEGER, comment TEXT);
CREATE TABLE domainlist_by_group (domainlist_id INTEGER, group_id INTEGER);
CREATE TABLE client (id INTEGER, ip TEXT, date_added INTEGER, date_modified INTEGER,
    comment TEXT);
CREATE TABLE client_by_group (client_id INTEGER, group_id INTEGER);
"""

GROUPS = [(0, 1, "Default", "The default group"), (1, 1, "Kids devices", "no social media"),
          (2, 0, "Paused", "switched off")]
ADLISTS = [  # id, type, address, enabled, comment, groups
    (1, 0, "https://raw.githubusercontent.com/StevenBlack/hosts/master/hosts", 1,
     "Migrated from /etc/pihole/adlists.list", [0]),
    (2, 0, "https://lists.example.org/social.txt", 1, "Social", [1]),
    (3, 0, "https://lists.example.org/old.txt", 0, "", [0]),
    (4, 0, "https://lists.example.org/orphan.txt", 1, "orphan", []),
    (5, 1, "https://lists.example.org/allow.txt", 1, "allow sub", [0]),
    (6, 0, "ftp://lists.example.org/x.txt", 1, "", [0]),
]
DOMAINS = [  # id, type, domain, enabled, groups
    (1, 0, "allowed.example.com", 1, [0]),
    (2, 1, "ads.example.com", 1, [0]),
    (3, 2, r"(\.|^)good\.example$", 1, [0]),
    (4, 3, r"^track[0-9]+\.example\.org$", 1, [0]),
    (5, 3, r"^ad.*\.example\.net$;querytype=AAAA", 1, [0]),
    (6, 1, "disabled.example.com", 0, [0]),
    (7, 1, "kids-only.example.com", 1, [1]),
    (8, 1, "nobody.example.com", 1, []),
    (9, 3, "([unclosed", 1, [0]),
    (10, 1, "not a domain!", 1, [0]),
    (11, 1, "kids-and-default.example.com", 1, [0, 1]),
    (12, 0, "kids-allowed.example.com", 1, [1]),
    (13, 3, r"^kidsre[0-9]+\.example$", 1, [1]),
    (14, 1, "paused-only.example.com", 1, [2]),
]
CLIENTS = [  # id, ip, comment, groups
    (1, "192.168.1.30", "Kids tablet", [1]),
    (2, "192.168.1.64/28", "Guest range", [0]),
    (3, "aa:bb:cc:dd:ee:ff", "By MAC", [0]),
    (4, ":eth1", "Interface", [0]),
    (5, "laptop.lan", "By name", [0]),
    (6, "2001:db8::/64", "", [0, 1]),
]


def gravity_db(path: Path, clients=None) -> bytes:
    clients = CLIENTS if clients is None else clients
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path)
    db.executescript(GRAVITY_SQL)
    db.executemany('INSERT INTO "group" (id, enabled, name, description) VALUES (?,?,?,?)',
                   GROUPS)
    for i, t, a, e, c, gs in ADLISTS:
        db.execute("INSERT INTO adlist (id, type, address, enabled, comment) VALUES (?,?,?,?,?)",
                   (i, t, a, e, c))
        db.executemany("INSERT INTO adlist_by_group VALUES (?,?)", [(i, g) for g in gs])
    for i, t, d, e, gs in DOMAINS:
        db.execute("INSERT INTO domainlist (id, type, domain, enabled) VALUES (?,?,?,?)",
                   (i, t, d, e))
        db.executemany("INSERT INTO domainlist_by_group VALUES (?,?)", [(i, g) for g in gs])
    for i, ip, c, gs in clients:
        db.execute("INSERT INTO client (id, ip, comment) VALUES (?,?,?)", (i, ip, c))
        db.executemany("INSERT INTO client_by_group VALUES (?,?)", [(i, g) for g in gs])
    db.commit()
    db.close()
    return path.read_bytes()


def teleporter(tmp_path: Path, toml: str = PIHOLE_TOML, with_db: bool = True,
               clients=None) -> Path:
    out = tmp_path / "pi-hole_pihole_teleporter_2026-12-01_12-00-00_UTC.zip"
    out.unlink(missing_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("etc/pihole/pihole.toml", toml)
        if with_db:
            z.writestr("etc/pihole/gravity.db", gravity_db(tmp_path / "gravity.db", clients))
        z.writestr("etc/pihole/dhcp.leases", "1764590000 00:11:22:33:44:55 192.168.1.50 "
                   "printer *\n")
        z.writestr("etc/hosts", "127.0.0.1 localhost\n")
    return out


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def do_import(kind: str, src: Path, out: Path, *extra: str):
    before = sha(src)
    p = run_cli(["import", kind, str(src), "-o", str(out), *extra])
    assert sha(src) == before, "the original was modified"
    return p


def report(p) -> list:
    return p.stdout.splitlines()


def has(lines, verdict: str, *parts: str) -> bool:
    return any(l.startswith(verdict + ": ") and all(x in l for x in parts) for l in lines)


def check_config(path: Path):
    p = run_cli(["check-config", str(path)])
    assert p.returncode == 0, p.stderr


# ------------------------------------------------------------------ Pi-hole


def test_pihole_teleporter(tmp_path):
    src = teleporter(tmp_path)
    out = tmp_path / "nxdns.yaml"
    p = do_import("pihole", src, out)
    assert p.returncode == 0, p.stderr
    lines = report(p)
    cfg = yaml.safe_load(out.read_text())
    check_config(out)

    # upstreams: "ip#port" is dnsmasq's form; IPv6 gets brackets and its port
    assert cfg["upstream"]["servers"] == ["192.0.2.53", "127.0.0.1:5335", "[2001:db8::53]:53"]
    # conditional forwarding: the domain and the reverse zone of an octet-aligned prefix
    fz = cfg["upstream"]["forward_zones"]
    assert fz["fritz.box"] == ["192.168.1.1"]
    assert fz["1.168.192.in-addr.arpa"] == ["192.168.1.1"]
    assert "10.0.0.1:5353" not in [s for v in fz.values() for s in v]
    assert has(lines, "not imported", "10.0.0.0/20", "zone boundary")
    assert has(lines, "not imported", "false,172.16.0.0/16", "disabled in Pi-hole")
    assert "old.lan" not in fz

    assert cfg["filter"]["block_mode"] == "nxdomain"
    assert has(lines, "imported", "dns.blocking.mode", "nxdomain")

    # adlists: names from comments, groups mapped, disabled kept disabled, Pi-hole's
    # "applies to nobody" kept by disabling, allowlists and other schemes reported
    src_by_url = {s["url"]: s for s in cfg["filter"]["sources"]}
    sb = src_by_url["https://raw.githubusercontent.com/StevenBlack/hosts/master/hosts"]
    assert sb["name"] == "migrated-from-etc-pihole-adlists-list"
    assert sb.get("groups", ["default"]) == ["default"] and sb.get("enabled", True)
    social = src_by_url["https://lists.example.org/social.txt"]
    assert social["name"] == "social" and social["groups"] == ["kids-devices"]
    assert src_by_url["https://lists.example.org/old.txt"]["enabled"] is False
    assert src_by_url["https://lists.example.org/orphan.txt"]["enabled"] is False
    assert has(lines, "imported", "orphan.txt", "no group", "imported disabled")
    assert "https://lists.example.org/allow.txt" not in src_by_url
    assert has(lines, "no equivalent", "allow.txt", "allowlists")
    assert has(lines, "not imported", "ftp://lists.example.org/x.txt", "not an http")

    # domainlist: exact and regex, allow and deny, each exact rule for the groups Pi-hole
    # links it to (the kids tablet is out of Default, so Default is not everyone here: its
    # rules are for group default), regexes too; FTL's ;options, disabled entries, entries in
    # no group and what the loader refuses are reported
    f = cfg["filter"]
    assert f["allow"] == [{"rule": "allowed.example.com", "groups": ["default"]},
                          {"rule": r"/(\.|^)good\.example$/", "groups": ["default"]},
                          {"rule": "kids-allowed.example.com", "groups": ["kids-devices"]}]
    assert f["deny"] == [{"rule": "ads.example.com", "groups": ["default"]},
                         {"rule": r"/^track[0-9]+\.example\.org$/", "groups": ["default"]},
                         {"rule": "kids-only.example.com", "groups": ["kids-devices"]},
                         {"rule": "kids-and-default.example.com",
                          "groups": ["default", "kids-devices"]},
                         {"rule": r"/^kidsre[0-9]+\.example$/", "groups": ["kids-devices"]}]
    assert has(lines, "imported", "kids-only.example.com", '"Kids devices"',
               'filter.deny "kids-only.example.com" for groups "kids-devices"')
    assert has(lines, "imported", "kids-and-default.example.com",
               'for groups "default", "kids-devices"')
    assert has(lines, "imported", "kids-allowed.example.com",
               'filter.allow "kids-allowed.example.com" for groups "kids-devices"')
    assert has(lines, "imported", "^kidsre", 'for groups "kids-devices"')
    assert has(lines, "not imported", "paused-only.example.com", "disabled groups only")
    assert has(lines, "not imported", ";querytype=AAAA", "no nxdns equivalent")
    assert has(lines, "not imported", "disabled.example.com", "disabled in Pi-hole")
    assert has(lines, "not imported", "nobody.example.com", "applies it to nobody")
    assert has(lines, "not imported", "([unclosed")   # regcomp refuses it: the loader's reason
    assert has(lines, "not imported", "not a domain!", "not a name")

    # groups and clients
    assert cfg["groups"] == {"kids-devices": {"filtering": True}, "paused": {"filtering": True}}
    assert has(lines, "imported", '"Paused"', "disabled in Pi-hole")
    clients = {c["name"]: c for c in cfg["clients"]}
    assert clients["kids-tablet"] == {"name": "kids-tablet", "ids": ["192.168.1.30"],
                                      "groups": ["kids-devices"]}
    assert clients["guest-range"] == {"name": "guest-range", "ids": ["192.168.1.64/28"]}
    assert clients["2001-db8-64"]["groups"] == ["default", "kids-devices"]
    assert has(lines, "no equivalent", "aa:bb:cc:dd:ee:ff", "MAC")
    assert has(lines, "no equivalent", ":eth1", "interface")
    assert has(lines, "no equivalent", "laptop.lan", "host name")

    # local records: hosts lines (several names, both families), CNAMEs with a TTL and
    # several names before the target
    recs = {(r["name"], r["type"], r["value"]): r for r in cfg["local_records"]}
    assert ("nas.lan", "A", "192.168.1.10") in recs
    assert ("nas-alias.lan", "A", "192.168.1.10") in recs
    assert ("nas.lan", "AAAA", "2001:db8::10") in recs
    assert recs[("media.lan", "CNAME", "nas.lan")]["ttl"] == 120
    assert ("files.lan", "CNAME", "nas.lan") in recs and ("backup.lan", "CNAME", "nas.lan") in recs
    assert has(lines, "not imported", "not-an-address broken.lan")

    # what nxdns does not have
    assert has(lines, "no equivalent", "DHCP server", "dhcp.active")
    assert has(lines, "no equivalent", "static leases", "1 entries")
    assert has(lines, "no equivalent", "DHCP leases", "dhcp.leases")
    assert has(lines, "no equivalent", "DNSSEC")
    assert lines[-2].startswith("summary: ") and lines[-1].startswith("wrote ")


def test_pihole_default_group_is_everyone(tmp_path):
    """Every client in Default (FTL puts each new client there): a rule of Default alone
    is a rule for every client; other groups' rules keep their groups."""
    clients = [(1, "192.168.1.30", "Kids tablet", [0, 1]), (2, "192.168.1.64/28", "Guests", [0])]
    out = tmp_path / "nxdns.yaml"
    p = do_import("pihole", teleporter(tmp_path, clients=clients), out)
    assert p.returncode == 0, p.stderr
    f = yaml.safe_load(out.read_text())["filter"]
    assert f["allow"] == ["allowed.example.com", r"/(\.|^)good\.example$/",
                          {"rule": "kids-allowed.example.com", "groups": ["kids-devices"]}]
    assert f["deny"][0] == "ads.example.com"
    assert {"rule": "kids-only.example.com", "groups": ["kids-devices"]} in f["deny"]
    lines = report(p)
    assert has(lines, "imported", "ads.example.com", 'filter.deny "ads.example.com"')
    assert not has(lines, "imported", "ads.example.com", "for groups")
    # a Default-only regex is for everyone then: no note
    assert not has(lines, "imported", "good\\.example", "cannot limit")


def test_pihole_imported_config_serves(tmp_path, make_upstream, make_nxdns):
    """The imported rules, block mode, groups, clients and records, served by the daemon;
    group-limited rules only for their groups' clients (the kids tablet asks from 127.0.0.2)."""
    src = teleporter(tmp_path)
    out = tmp_path / "nxdns.yaml"
    assert do_import("pihole", src, out).returncode == 0
    imp = yaml.safe_load(out.read_text())
    imp["filter"].pop("sources")  # no downloads in tests; a group may list none
    for c in imp["clients"]:
        if c["name"] == "kids-tablet":
            c["ids"].append("127.0.0.2")
    up = make_upstream(default_a="192.0.2.7")
    nx = start_nx(make_nxdns, [up], password=False,
                  config={"filter": imp["filter"], "groups": imp["groups"],
                          "clients": imp["clients"], "local_records": imp["local_records"]})
    r = nx.udp(make_query("ads.example.com"))
    assert r.rcode() == dns.rcode.NXDOMAIN   # deny + block mode NX
    assert answers(nx.udp(make_query("track42.example.org")))== [] 
    assert answers(nx.udp(make_query("nas.lan"))) == ["192.168.1.10"]
    assert answers(nx.udp(make_query("allowed.example.com"))) == ["192.0.2.7"]
    # 127.0.0.1 is no listed client (default); 127.0.0.2 is the tablet (kids-devices only)
    def rcode_from(name, src):
        return query_from(nx, make_query(name), src=src).rcode()
    assert rcode_from("kids-only.example.com", "127.0.0.2") == dns.rcode.NXDOMAIN
    assert rcode_from("kids-only.example.com", "127.0.0.1") == dns.rcode.NOERROR
    assert rcode_from("ads.example.com", "127.0.0.2") == dns.rcode.NOERROR  # Default's rule
    assert rcode_from("kids-and-default.example.com", "127.0.0.1") == dns.rcode.NXDOMAIN
    assert rcode_from("kids-and-default.example.com", "127.0.0.2") == dns.rcode.NXDOMAIN


def test_pihole_dry_run_and_refusals(tmp_path):
    src = teleporter(tmp_path)
    p = run_cli(["import", "pihole", str(src)])
    assert p.returncode == 0, p.stderr
    assert yaml.safe_load(p.stdout)["filter"]["block_mode"] == "nxdomain"  # config on stdout
    assert "summary: " in p.stderr and "imported: " in p.stderr           # report on stderr
    out = tmp_path / "exists.yaml"
    out.write_text("# mine\n")
    p = do_import("pihole", src, out)
    assert p.returncode == 2 and "--force" in p.stderr
    assert out.read_text() == "# mine\n"
    assert do_import("pihole", src, out, "--force").returncode == 0
    check_config(out)
    # never the file being imported
    p = do_import("pihole", src, src, "--force")
    assert p.returncode == 2 and "being imported" in p.stderr
    # not a Teleporter archive
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("readme.txt", "hello")
    p = run_cli(["import", "pihole", str(other)])
    assert p.returncode == 1 and "not a Pi-hole v6 Teleporter archive" in p.stderr
    v5 = tmp_path / "pi-hole-teleporter_v5.tar.gz"
    v5.write_bytes(b"\x1f\x8b\x08\x00" + b"\x00" * 60)
    p = run_cli(["import", "pihole", str(v5)])
    assert p.returncode == 1 and "Pi-hole v5" in p.stderr, p.stderr
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"PK\x03\x04" + b"\xff" * 200)
    p = run_cli(["import", "pihole", str(junk)])
    assert p.returncode == 1 and p.stdout == ""
    # a TOML FTL would not write is refused with its line
    bad = teleporter(tmp_path, toml='[dns]\n  upstreams = [\n    "1.1.1.1",\n  x = 1\n')
    p = run_cli(["import", "pihole", str(bad)])
    assert p.returncode == 1 and "pihole.toml: line 4" in p.stderr, p.stderr
    # settings alone (no gravity.db) import what they have and say what is missing
    only = teleporter(tmp_path, with_db=False)
    p = run_cli(["import", "pihole", str(only)])
    assert p.returncode == 0 and "has no etc/pihole/gravity.db" in p.stderr


# ------------------------------------------------------------------ AdGuard Home


def test_adguardhome_yaml(tmp_path):
    src = FIXTURES / "AdGuardHome.yaml"
    out = tmp_path / "nxdns.yaml"
    p = do_import("adguardhome", src, out)
    assert p.returncode == 0, p.stderr
    lines = report(p)
    cfg = yaml.safe_load(out.read_text())
    check_config(out)

    u = cfg["upstream"]
    assert u["servers"] == ["192.0.2.53", "198.51.100.53:5353", "tls://dns.example.net",
                            "[2001:db8::53]:53"]
    assert u["bootstrap"] == ["192.0.2.54", "[2001:db8::54]:53"]
    assert u["forward_zones"] == {"lan": ["192.168.1.1"], "home.arpa": ["192.168.1.1"],
                                  "corp.example": ["tcp://203.0.113.10"]}
    assert has(lines, "no equivalent", "quic://dns.adguard-dns.com")
    assert has(lines, "no equivalent", "[/private.lan/]#")

    f = cfg["filter"]
    assert f["block_mode"] == "custom" and f["block_addresses"] == ["192.0.2.1", "2001:db8::1"]
    assert [s["name"] for s in f["sources"]] == ["adguard-dns-filter",
                                                 "adaway-default-blocklist", "local-list"]
    assert f["sources"][1]["enabled"] is False
    assert f["sources"][2]["path"] == "/opt/adguardhome/lists/local.txt"
    assert has(lines, "imported", "Local list", "copy it to this machine")
    assert has(lines, "no equivalent", "https://example.com/allow.txt", "whitelist_filters")

    # user rules: names, @@ exceptions, regex and hosts-style lines; the AdGuard rule language
    # (||x^, $client) is nxdns's own user-rule language too, so those are kept as written
    assert f["allow"] == ["allowed.example.com"]
    assert f["deny"] == ["ads.example.com", r"/^track[0-9]+\.example\.org$/",
                         "||doubleclick.example^", "sinkholed.example",
                         "example.org$client=192.168.1.7"]
    assert has(lines, "not imported", "user_rules: 2 comment or empty lines")

    recs = [(r["name"], r["type"], r["value"]) for r in cfg["local_records"]]
    assert recs == [("printer.lan", "A", "192.0.2.80"), ("nas.lan", "A", "192.168.1.20"),
                    ("nas6.lan", "AAAA", "2001:db8::20"), ("www.nas.lan", "CNAME", "nas.lan")]
    assert has(lines, "not imported", "old.lan", "disabled in AdGuard Home")
    assert has(lines, "no equivalent", "keep.lan -> A")

    assert cfg["groups"] == {"unfiltered": {"filtering": False}}
    assert cfg["clients"] == [
        {"name": "kids-tablet", "ids": ["192.168.1.30", "192.168.1.64/28", "id:kidstablet"]},
        {"name": "work-laptop", "ids": ["192.168.1.40"], "groups": ["unfiltered"]}]
    assert has(lines, "no equivalent", "Kids tablet", "aa:bb:cc:dd:ee:ff", "MAC")
    assert has(lines, "no equivalent", "Kids tablet", "blocked services")
    assert has(lines, "no equivalent", "Work laptop", "per-client upstreams")
    assert has(lines, "no equivalent", "Work laptop", "safe browsing")

    assert has(lines, "no equivalent", "DHCP server")
    assert has(lines, "no equivalent", "blocked services (2 services)")
    assert has(lines, "no equivalent", "parental control (parental_enabled: true)")
    n_imp = sum(l.startswith("imported: ") for l in lines)
    assert f"summary: {n_imp} imported" in lines[-2]


def test_adguardhome_imported_config_serves(tmp_path, make_upstream, make_nxdns):
    out = tmp_path / "nxdns.yaml"
    assert do_import("adguardhome", FIXTURES / "AdGuardHome.yaml", out).returncode == 0
    imp = yaml.safe_load(out.read_text())
    imp["filter"].pop("sources")
    up = make_upstream(default_a="192.0.2.7")
    nx = start_nx(make_nxdns, [up], password=False,
                  config={"filter": imp["filter"], "groups": imp["groups"],
                          "local_records": imp["local_records"]})
    assert answers(nx.udp(make_query("ads.example.com"))) == ["192.0.2.1"]  # custom_ip
    # an AdGuard-language user rule, imported as written, blocks the name and its subdomains
    assert answers(nx.udp(make_query("x.doubleclick.example"))) == ["192.0.2.1"]
    assert answers(nx.udp(make_query("sinkholed.example", "AAAA"))) == ["2001:db8::1"]
    assert answers(nx.udp(make_query("nas.lan"))) == ["192.168.1.20"]
    assert "nas.lan." in " ".join(answers(nx.udp(make_query("www.nas.lan"))))
    assert answers(nx.udp(make_query("allowed.example.com"))) == ["192.0.2.7"]


def test_adguardhome_refusals(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("dns:\n  upstream_dns: [1.1.1.1\n")
    p = run_cli(["import", "adguardhome", str(bad)])
    assert p.returncode == 1 and "not valid YAML" in p.stderr and p.stdout == ""
    other = tmp_path / "other.yaml"
    other.write_text("listener:\n  dns: ['127.0.0.1:53']\n")
    p = run_cli(["import", "adguardhome", str(other)])
    assert p.returncode == 1 and "not an AdGuard Home configuration" in p.stderr
    p = run_cli(["import", "adguardhome", str(tmp_path / "missing.yaml")])
    assert p.returncode == 1 and "No such file" in p.stderr
    p = run_cli(["import", "opnsense", str(other)])
    assert p.returncode == 2 and "unknown kind" in p.stderr
