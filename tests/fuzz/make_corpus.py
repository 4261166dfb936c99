#!/usr/bin/python3
"""Regenerate tests/fuzz/corpus/msg: a small seed corpus for fuzz_msg (and its replay test).

Queries, responses with compression, EDNS, EDE, and a few malformed messages, built with
dnspython (Debian: python3-dnspython). The generated files are committed; rerun after edits:
    tests/fuzz/make_corpus.py
Deterministic: fixed ids, no randomness.
"""
import os
import struct

import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "msg")


def query(name, rdtype, qid, **kw):
    q = dns.message.make_query(name, rdtype, **kw)
    q.id = qid
    return q


def response(q, answers=(), authority=(), additional=(), rcode=dns.rcode.NOERROR):
    r = dns.message.make_response(q)
    r.set_rcode(rcode)
    for sec, rrs in ((r.answer, answers), (r.authority, authority), (r.additional, additional)):
        for name, ttl, rdtype, *texts in rrs:
            owner = dns.name.from_text(name)  # absolute
            sec.append(dns.rrset.from_text(owner, ttl, "IN", rdtype, *texts))
    return r


def ede(code, text):
    return dns.edns.GenericOption(dns.edns.OptionType.EDE, struct.pack("!H", code) + text.encode())


def hdr(qid, flags, qd, an, ns, ar):
    return struct.pack("!HHHHHH", qid, flags, qd, an, ns, ar)


def main():
    files = {}
    # --- queries
    files["q_a.bin"] = query("www.example.com", "A", 0x0101, use_edns=False).to_wire()
    files["q_aaaa_edns_do.bin"] = query("example.org", "AAAA", 0x0102, want_dnssec=True,
                                         payload=4096).to_wire()
    files["q_any.bin"] = query("example.net", "ANY", 0x0103, use_edns=0).to_wire()
    files["q_https_mixedcase.bin"] = query("WwW.ExAmPle.CoM", "HTTPS", 0x0104,
                                           use_edns=0).to_wire()
    files["q_cookie.bin"] = query("cookie.example", "A", 0x0105, use_edns=0, options=[
        dns.edns.GenericOption(dns.edns.OptionType.COOKIE, b"\x01\x02\x03\x04\x05\x06\x07\x08")
    ]).to_wire()
    files["q_ptr.bin"] = query("1.2.0.192.in-addr.arpa", "PTR", 0x0106,
                               use_edns=False).to_wire()
    files["q_root_ns.bin"] = query(".", "NS", 0x0107, use_edns=0, payload=512).to_wire()

    # --- responses (dnspython compresses names)
    q = query("www.example.com", "A", 0x0201, use_edns=0)
    files["r_cname_chain.bin"] = response(q, answers=[
        ("www.example.com", 300, "CNAME", "cdn.example.com."),
        ("cdn.example.com", 60, "A", "192.0.2.1", "192.0.2.2"),
    ], authority=[("example.com", 86400, "NS", "ns1.example.com.", "ns2.example.com.")],
        additional=[("ns1.example.com", 3600, "A", "192.0.2.53"),
                    ("ns2.example.com", 3600, "AAAA", "2001:db8::53")]).to_wire()
    q = query("nope.example.com", "A", 0x0202, use_edns=0)
    files["r_nxdomain_soa.bin"] = response(q, authority=[
        ("example.com", 900, "SOA", "ns1.example.com. hostmaster.example.com. 1 7200 900 "
         "1209600 900")], rcode=dns.rcode.NXDOMAIN).to_wire()
    q = query("www.example.org", "A", 0x0203, use_edns=False)
    r = response(q, authority=[("example.org", 172800, "NS", "a.iana-servers.net.",
                                "b.iana-servers.net.")],
                 additional=[("a.iana-servers.net", 172800, "A", "199.43.135.53"),
                             ("b.iana-servers.net", 172800, "A", "199.43.133.53")])
    r.flags &= ~dns.flags.RA
    files["r_referral.bin"] = r.to_wire()
    q = query("example.com", "MX", 0x0204, use_edns=0)
    files["r_mx_srv.bin"] = response(q, answers=[
        ("example.com", 3600, "MX", "10 mail.example.com.", "20 mail2.example.com."),
        ("_sip._udp.example.com", 3600, "SRV", "0 5 5060 sip.example.com."),
    ]).to_wire()
    q = query("example.com", "TXT", 0x0205, use_edns=0)
    files["r_txt.bin"] = response(q, answers=[
        ("example.com", 60, "TXT", '"v=spf1 -all"', '"a" "b" "' + "x" * 200 + '"'),
    ]).to_wire()
    q = query("ads.example", "A", 0x0206, use_edns=0)
    r = response(q, answers=[("ads.example", 10, "A", "0.0.0.0")])
    r.use_edns(0, 0, 1232, options=[ede(15, "Blocked by nxdns")])
    files["r_ede_blocked.bin"] = r.to_wire()
    q = query("stale.example", "A", 0x0207, use_edns=0)
    r = response(q, rcode=dns.rcode.SERVFAIL)
    r.use_edns(0, 0, 1232, options=[ede(22, "no reachable authority"), ede(23, ""),
                                    dns.edns.GenericOption(12, b"\x00" * 8)])
    files["r_servfail_two_ede.bin"] = r.to_wire()
    q = query("v1.example", "A", 0x0208, use_edns=0)
    r = dns.message.make_response(q)
    r.set_rcode(dns.rcode.BADVERS)
    files["r_badvers.bin"] = r.to_wire()
    q = query("many.example", "A", 0x0209, use_edns=0)
    files["r_many_a.bin"] = response(q, answers=[
        ("many.example", 600, "A", *["10.0.%d.%d" % (i // 250, i % 250) for i in range(150)])
    ]).to_wire(max_size=65535)
    q = query("signed.example", "A", 0x020a, want_dnssec=True)
    files["r_rrsig.bin"] = response(q, answers=[
        ("signed.example", 300, "A", "192.0.2.7"),
        ("signed.example", 300, "RRSIG", "A 13 2 300 20300101000000 20200101000000 12345 "
         "signed.example. " + "A" * 86 + "=="),
    ]).to_wire()

    # OPT first in the additional section, then an A record (relay drops both)
    q = query("glue.example", "A", 0x020b, use_edns=False)
    base = response(q, answers=[("glue.example", 30, "A", "192.0.2.9")]).to_wire()
    opt = b"\x00" + struct.pack("!HHIH", 41, 1232, 0, 0)
    glue = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 30, 4) + bytes([192, 0, 2, 10])
    files["r_opt_not_last.bin"] = base[:10] + struct.pack("!H", 2) + base[12:] + opt + glue

    # --- malformed
    good = files["q_aaaa_edns_do.bin"]
    files["bad_trailing.bin"] = good + b"\x00"
    files["bad_short.bin"] = good[:11]
    files["bad_two_opt.bin"] = good[:10] + struct.pack("!H", 2) + good[12:] + good[-11:]
    files["bad_ptr_loop.bin"] = hdr(0x0301, 0x0100, 1, 0, 0, 0) + b"\x01a\xc0\x0e\xc0\x0c" \
        + struct.pack("!HH", 1, 1)
    files["bad_label_type.bin"] = hdr(0x0302, 0x0100, 1, 0, 0, 0) + b"\x41abc\x00" \
        + struct.pack("!HH", 1, 1)
    files["bad_count.bin"] = files["r_cname_chain.bin"][:6] + struct.pack("!H", 9) \
        + files["r_cname_chain.bin"][8:]
    files["bad_fwd_ptr.bin"] = hdr(0x0303, 0x0100, 1, 0, 0, 0) + b"\xc0\x12" \
        + struct.pack("!HH", 1, 1) + b"\x01b\x00"

    os.makedirs(OUT, exist_ok=True)
    for name in os.listdir(OUT):
        if name.endswith(".bin"):
            os.unlink(os.path.join(OUT, name))
    for name, data in sorted(files.items()):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print("%d files in %s" % (len(files), OUT))


if __name__ == "__main__":
    main()
