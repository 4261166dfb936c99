"""Racing upstreams: staggered sends, first valid answer wins, the rest are cancelled."""

import dns.rcode

from fakeupstream import Rule
from harness import answers, make_query, wait_until

EXCH = "nxdns_upstream_exchanges_total"


def _pair(make_upstream, slow_ms, fast_ms):
    slow = make_upstream(default_a="192.0.2.101")
    fast = make_upstream(default_a="192.0.2.102")
    slow.script["*"] = Rule(delay_ms=slow_ms)
    fast.script["*"] = Rule(delay_ms=fast_ms)
    return slow, fast


def test_fast_upstream_wins_and_both_were_asked(make_upstream, make_nxdns):
    # The fast one still takes 150 ms, far more than the 20 ms stagger: whatever order nxdns
    # picks, the second server is asked before the first could answer.
    slow, fast = _pair(make_upstream, slow_ms=2000, fast_ms=150)
    nx = make_nxdns([slow, fast], config={
        "upstream": {"race": 2, "stagger_ms": 20, "timeout_ms": 5000}})
    r = nx.udp(make_query("race.example", edns=0), timeout=6)
    assert r.rcode() == dns.rcode.NOERROR
    assert answers(r) == ["192.0.2.102"], "the fast upstream's answer must win"
    assert slow.queries("race.example"), "slow upstream was never asked"
    assert fast.queries("race.example"), "fast upstream was never asked"
    # Outcomes are counted per upstream: the fast one answered, the slow one was cancelled.
    assert nx.wait_counter(EXCH, 1, server=fast.addr, outcome="answer") >= 1
    assert nx.wait_counter(EXCH, 1, server=slow.addr, outcome="cancelled") >= 1
    assert nx.counter(EXCH, server=slow.addr, outcome="answer") == 0


def test_slow_listed_last_still_loses(make_upstream, make_nxdns):
    slow, fast = _pair(make_upstream, slow_ms=2000, fast_ms=150)
    nx = make_nxdns([fast, slow], config={
        "upstream": {"race": 2, "stagger_ms": 20, "timeout_ms": 5000}})
    for i in range(3):
        r = nx.udp(make_query(f"race{i}.example", edns=0), timeout=6)
        assert answers(r) == ["192.0.2.102"]


def test_race_survives_a_dead_upstream(make_upstream, make_nxdns):
    dead = make_upstream(default_a="192.0.2.201")
    dead.script["*"] = Rule(drop=True)
    live = make_upstream(default_a="192.0.2.202")
    nx = make_nxdns([dead, live], config={
        "upstream": {"race": 2, "stagger_ms": 50, "timeout_ms": 4000}})
    for i in range(3):
        r = nx.udp(make_query(f"dead{i}.example", edns=0), timeout=6)
        assert r.rcode() == dns.rcode.NOERROR
        assert answers(r) == ["192.0.2.202"]
    assert wait_until(lambda: len(live.queries()) >= 3)


def test_first_answer_wins_even_if_it_is_nxdomain(make_upstream, make_nxdns):
    """A valid negative answer is an answer: it wins the race like a positive one."""
    slow, fast = _pair(make_upstream, slow_ms=2000, fast_ms=150)
    fast.script["*"] = Rule(delay_ms=150, rcode="NXDOMAIN")
    nx = make_nxdns([slow, fast], config={
        "upstream": {"race": 2, "stagger_ms": 20, "timeout_ms": 5000}})
    r = nx.udp(make_query("neg.example", edns=0), timeout=6)
    assert r.rcode() == dns.rcode.NXDOMAIN


def test_ipv6_upstream_and_a_mixed_race(make_upstream, make_nxdns):
    """An upstream on [::1] (its own pool of connected IPv6 sockets) answers over UDP and, after
    TC, over TCP; raced against a slow IPv4 upstream it wins."""
    v6 = make_upstream(host="::1", default_a="192.0.2.106")
    v4 = make_upstream(default_a="192.0.2.104")
    v4.script["*"] = Rule(delay_ms=2000)
    v6.script["big.example"] = Rule(tc_udp=True)
    nx = make_nxdns([v4, v6], config={
        "upstream": {"race": 2, "stagger_ms": 20, "timeout_ms": 5000}})
    for i in range(5):
        r = nx.udp(make_query(f"six{i}.example", edns=0), timeout=6)
        assert answers(r) == ["192.0.2.106"]
        assert v6.queries(f"six{i}.example", transport="udp")
    r = nx.udp(make_query("big.example", edns=0), timeout=6)
    assert answers(r) == ["192.0.2.106"]
    assert v6.queries("big.example", transport="tcp"), "no TCP retry to the IPv6 upstream"
    assert nx.wait_counter(EXCH, 6, server=v6.addr, outcome="answer") >= 6
