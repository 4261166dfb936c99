"""Self-tests of the harness (fake upstream, metrics parser, config writer); no nxdns needed."""

import socket
import time

import dns.flags
import dns.message
import dns.query
import dns.rcode
import pytest

from fakeupstream import Rule
from harness import Metrics, free_port, make_query, merge, tcp_query, to_yaml, udp_query


def test_fake_upstream_answers_udp_and_tcp_and_records(upstream):
    r = udp_query(make_query("WwW.Example.COM", edns=0), upstream.port)
    assert r.rcode() == dns.rcode.NOERROR
    assert [rr.to_text() for rr in r.answer[0]] == ["192.0.2.1"]
    r = tcp_query(make_query("www.example.com", "AAAA"), upstream.port)
    assert [rr.to_text() for rr in r.answer[0]] == ["2001:db8::1"]
    qs = upstream.queries("www.example.com")
    assert [q.transport for q in qs] == ["udp", "tcp"]
    assert qs[0].qname == "WwW.Example.COM." and qs[0].edns == 0 and qs[0].payload == 1232
    assert qs[1].qtype == "AAAA" and qs[1].edns == -1


def test_fake_upstream_rules(make_upstream):
    up = make_upstream(default_a="192.0.2.9")
    up.script["slow.example"] = Rule(delay_ms=300)
    up.script["nx.example"] = Rule(rcode="NXDOMAIN")
    up.script["tc.example"] = Rule(tc_udp=True, records=[("A", "192.0.2.77")])
    up.script["big.example"] = Rule(txt_count=40)
    up.script["Drop.Example"] = Rule(drop=True)
    t0 = time.monotonic()
    r = udp_query(make_query("slow.example"), up.port)
    assert time.monotonic() - t0 >= 0.28
    assert r.answer[0][0].to_text() == "192.0.2.9"
    assert udp_query(make_query("nx.example"), up.port).rcode() == dns.rcode.NXDOMAIN
    r = udp_query(make_query("tc.example"), up.port)
    assert r.flags & dns.flags.TC and not r.answer
    assert tcp_query(make_query("tc.example"), up.port).answer[0][0].to_text() == "192.0.2.77"
    r = udp_query(make_query("big.example", "TXT", edns=0, payload=1232), up.port)
    assert r.flags & dns.flags.TC  # 40 x 40-byte TXT does not fit 1232
    r = tcp_query(make_query("big.example", "TXT"), up.port)
    assert len(r.answer[0]) == 40
    with pytest.raises(dns.exception.Timeout):
        udp_query(make_query("drop.example"), up.port, timeout=0.5)


def _recv_all(sock, timeout):
    out = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        sock.settimeout(end - time.monotonic())
        try:
            out.append(sock.recvfrom(65535))
        except socket.timeout:
            break
    return out


@pytest.mark.parametrize("kind", ["wrong_id", "wrong_port", "wrong_addr", "wrong_question"])
def test_fake_upstream_spoofs_before_real_reply(make_upstream, kind):
    up = make_upstream()
    up.script["s.example"] = Rule(spoof=[kind], delay_ms=200)
    q = make_query("s.example")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(q.to_wire(), ("127.0.0.1", up.port))
        got = _recv_all(s, 0.8)
    assert len(got) == 2
    (w1, src1), (w2, src2) = got
    m1, m2 = dns.message.from_wire(w1), dns.message.from_wire(w2)
    assert m1.answer[0][0].to_text() == "6.6.6.6"
    assert m2.answer[0][0].to_text() == "192.0.2.1" and m2.id == q.id
    assert src2 == ("127.0.0.1", up.port)
    if kind == "wrong_id":
        assert m1.id != q.id and src1 == src2
    elif kind == "wrong_port":
        assert m1.id == q.id and src1[0] == "127.0.0.1" and src1[1] != up.port
    elif kind == "wrong_addr":
        assert m1.id == q.id and src1 == ("127.0.0.2", up.port)
    else:
        assert m1.id == q.id and m1.question[0].name != q.question[0].name


def test_metrics_parser():
    m = Metrics('# HELP x y\n# TYPE a counter\na_total{proto="udp"} 3\na_total{proto="tcp"} 4\n'
                'g 7\nlab{server="127.0.0.1:53",outcome="answer"} 2\n')
    assert m.get("a_total", proto="udp") == 3
    assert m.sum("a_total") == 7
    assert m.get("g") == 7 and m.has("g")
    assert m.get("lab", server="127.0.0.1:53", outcome="answer") == 2
    assert m.get("missing") == 0 and not m.has("missing")


def test_config_writer_and_ports():
    cfg = merge({"a": {"b": 1, "c": [1, 2]}, "d": "x"}, {"a": {"c": ["[::1]:5"]}, "d": None})
    assert cfg == {"a": {"b": 1, "c": ["[::1]:5"]}}
    text = to_yaml({"upstream": {"forward_zones": {"corp.example": ["127.0.0.1:1"]},
                                 "race": 2}, "admin": {"enabled": True}})
    assert text == ('upstream:\n  forward_zones:\n    "corp.example": ["127.0.0.1:1"]\n'
                    '  race: 2\nadmin:\n  enabled: true\n')
    p1, p2 = free_port(), free_port()
    assert p1 != p2
