"""UDP truncation to the client's size, TCP retry by the client, and TC from the upstream."""

import re

import dns.flags
import dns.message
import dns.rcode
import pytest

from fakeupstream import Rule
from harness import answers, header, make_query, raw_udp, run

# 15 TXT records of 40 bytes: about 830 bytes on the wire. More than 512, less than 1232.
MID = "mid.example"
MID_RULE = Rule(txt_count=15, txt_size=40)


@pytest.fixture
def mid(nxdns, upstream):
    upstream.script[MID] = MID_RULE
    return nxdns


def test_no_edns_truncated_to_512_then_tcp_full(mid, upstream):
    before = mid.counter("nxdns_truncated_total")
    q = make_query(MID, "TXT")
    wire = raw_udp(q.to_wire(), mid.port, timeout=3)
    assert wire is not None, "no UDP reply"
    assert len(wire) <= 512, f"UDP reply of {len(wire)} bytes to a client without EDNS"
    h = header(wire)
    assert h["id"] == q.id and h["qr"] and h["tc"], h
    assert h["rcode"] == dns.rcode.NOERROR
    r = dns.message.from_wire(wire)  # the truncated reply is still a well-formed message
    assert r.question[0].name.to_text() == MID + "."
    full = mid.tcp(q)
    assert not full.flags & dns.flags.TC
    assert full.answer == upstream.expected(MID, "TXT").answer
    assert len(full.answer[0]) == 15
    assert mid.wait_counter("nxdns_truncated_total", before + 1) >= before + 1


def test_edns_1232_fits_without_tc(mid, upstream):
    q = make_query(MID, "TXT", edns=0, payload=1232)
    wire = raw_udp(q.to_wire(), mid.port, timeout=3)
    assert wire is not None
    assert len(wire) <= 1232
    r = dns.message.from_wire(wire)
    assert not r.flags & dns.flags.TC
    assert r.edns == 0
    assert r.answer == upstream.expected(MID, "TXT").answer


def test_edns_512_payload_truncated(mid):
    q = make_query(MID, "TXT", edns=0, payload=512)
    wire = raw_udp(q.to_wire(), mid.port, timeout=3)
    assert wire is not None
    assert len(wire) <= 512
    assert header(wire)["tc"]


def test_dig_retries_over_tcp(mid):
    out = run(["dig", "@127.0.0.1", "-p", str(mid.port), "+noedns", "+tries=1", "+time=3",
               MID, "TXT"])
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Truncated, retrying in TCP mode" in out.stdout
    assert "status: NOERROR" in out.stdout
    assert len(re.findall(r"^mid\.example\.\s+\d+\s+IN\s+TXT\s+", out.stdout, re.M)) == 15, \
        out.stdout


def test_upstream_tc_retried_over_tcp(nxdns, upstream):
    upstream.script["tc.example"] = Rule(tc_udp=True, records=[("A", "192.0.2.30")])
    r = nxdns.udp(make_query("tc.example", edns=0), timeout=5)
    assert r.rcode() == dns.rcode.NOERROR
    assert not r.flags & dns.flags.TC
    assert answers(r) == ["192.0.2.30"]
    transports = [q.transport for q in upstream.queries("tc.example")]
    assert "udp" in transports and "tcp" in transports, transports
    assert transports.index("udp") < transports.index("tcp")


def test_big_answer_over_tcp(nxdns, upstream):
    # 60 x 60-byte TXT: about 4.4 KB, larger than any UDP size the upstream is offered.
    upstream.script["big.example"] = Rule(txt_count=60, txt_size=60)
    r = nxdns.tcp(make_query("big.example", "TXT", edns=0, payload=1232), timeout=5)
    assert r.rcode() == dns.rcode.NOERROR
    assert r.answer == upstream.expected("big.example", "TXT").answer
    assert len(r.answer[0]) == 60
