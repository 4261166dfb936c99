#!/usr/bin/python3
"""Regenerate tests/fuzz/corpus/parse: the seed corpus for fuzz_parse (and its replay test).

Input format (see tests/fuzz/fuzz_parse.c): a mode byte whose bits 0-2 pick the format
(0 auto, 1 hosts, 2 domains, 3 adblock, 4 wildcard), then one list line. The seeds are the
line shapes real lists carry (hosts with several names and inline comments, plain domains,
adblock rules with and without modifiers, exceptions, $badfilter, wildcards, Unicode names,
Punycode, cosmetic rules, regex rules, bare IPs, localhost entries, CRLF endings) and the
edges the parser must refuse (labels of 64 bytes, a 254-byte name, empty labels). Needs only
the standard library; the files are committed, rerun after edits:
    tests/fuzz/make_corpus_parse.py
Deterministic: no randomness.
"""
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "parse")

AUTO, HOSTS, DOMAINS, ADBLOCK, WILDCARD = range(5)

LONG_LABEL = "a" * 63
SEEDS = {
    "hosts_basic": (AUTO, "0.0.0.0 ads.example.com"),
    "hosts_multi": (HOSTS, "127.0.0.1\tads.example.com tracker.example.net # inline"),
    "hosts_v6": (AUTO, "::1 ip6-localhost ip6-loopback"),
    "hosts_localhost": (HOSTS, "127.0.0.1 localhost"),
    "hosts_no_name": (HOSTS, "0.0.0.0"),
    "hosts_crlf": (AUTO, "0.0.0.0 crlf.example.org\r"),
    "domain_plain": (DOMAINS, "Ads.Example.COM."),
    "domain_comment": (AUTO, "# a comment line"),
    "domain_bang": (AUTO, "! Title: a list"),
    "abp_header": (AUTO, "[Adblock Plus 2.0]"),
    "abp_sub": (ADBLOCK, "||ads.example.com^"),
    "abp_exact": (AUTO, "|exact.example.com^"),
    "abp_pipe": (AUTO, "|pipe.example.com|"),
    "abp_allow": (AUTO, "@@||good.example.com^"),
    "abp_allow_exact": (AUTO, "@@|good.example.com|"),
    "abp_important": (AUTO, "||imp.example.com^$important"),
    "abp_badfilter": (AUTO, "||ads.example.com^$badfilter"),
    "abp_modifier": (AUTO, "||ads.example.com^$dnstype=AAAA,client=192.168.1.1"),
    "abp_third_party": (ADBLOCK, "||ads.example.com^$third-party"),
    "abp_path": (AUTO, "||ads.example.com/path/x.js"),
    "abp_port": (AUTO, "||ads.example.com:8080^"),
    "abp_regex": (AUTO, "/^ad[0-9]+\\.example\\.com$/"),
    "abp_pattern": (AUTO, "ad*.example.com^"),
    "abp_scheme": (AUTO, "||https://ads.example.com^"),
    "abp_cosmetic": (AUTO, "example.com##.banner"),
    "abp_cosmetic_ex": (AUTO, "example.com#@#.banner"),
    "abp_dot": (AUTO, ".ads.example.com^"),
    "wild_star": (WILDCARD, "*.tracker.example"),
    "wild_auto": (AUTO, "*.tracker.example"),
    "unicode": (AUTO, "b\u00fccher.example"),
    "unicode_hosts": (HOSTS, "0.0.0.0 \u043f\u0440\u0438\u043c\u0435\u0440.\u0440\u0444"),
    "punycode": (DOMAINS, "xn--bcher-kva.example"),
    "bad_punycode": (DOMAINS, "xn--zz.example"),
    "bare_ip": (DOMAINS, "192.168.1.1"),
    "label_63": (DOMAINS, LONG_LABEL + ".example"),
    "label_64": (DOMAINS, LONG_LABEL + "a.example"),
    "name_253": (DOMAINS, ".".join([LONG_LABEL] * 3 + ["a" * 61])),
    "name_254": (DOMAINS, ".".join([LONG_LABEL] * 3 + ["a" * 62])),
    "empty_label": (DOMAINS, "a..example"),
    "underscore": (AUTO, "_dmarc.example.com"),
    "blank": (AUTO, "   \t"),
    "mismatch": (HOSTS, "||ads.example.com^"),
    "mismatch_wild": (DOMAINS, "*.ads.example.com"),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.unlink(os.path.join(OUT, f))
    for name, (fmt, line) in SEEDS.items():
        with open(os.path.join(OUT, name + ".bin"), "wb") as f:
            f.write(bytes([fmt]) + line.encode("utf-8"))
    print(f"{len(SEEDS)} seeds in {OUT}")


if __name__ == "__main__":
    main()
