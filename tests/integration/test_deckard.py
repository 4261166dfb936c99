"""The Deckard forwarder scenarios (shared/suites/deckard-forwarder/*.rpl), their steps replayed
by our own reader (rpl.py; Deckard itself is not packaged): the RANGE entries answer from a fake
upstream on loopback that is nxdns's only upstream (the scenario's forward-addr), each STEP
QUERY goes to nxdns over UDP and each CHECK_ANSWER is compared as Deckard compares it.

Config: the harness's listeners and admin, and only upstream.servers (the scenario's
forward-addr, served on loopback); the harness's cache and timeout test values are removed so
the shipped defaults apply. Skipped and reported when ../shared (NX_SHARED_DIR) is absent.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import dns.query
import pytest

import rpl

SHARED = Path(os.environ.get("NX_SHARED_DIR", Path(__file__).resolve().parents[3] / "shared"))
SUITE = SHARED / "suites" / "deckard-forwarder"
SCENARIOS = sorted(SUITE.glob("*.rpl")) if SUITE.is_dir() else []

pytestmark = pytest.mark.skipif(not SCENARIOS, reason=f"{SUITE} absent (NX_SHARED_DIR): "
                                "Deckard forwarder scenarios skipped")


def start(make_nxdns, sc):
    up = rpl.RplUpstream(sc).start()
    fwd = sc.config.get("forward-addr")
    assert fwd, f"{sc.path.name}: no forward-addr: not a forwarder scenario"
    assert any(fwd in r.addresses for r in sc.ranges), \
        f"{sc.path.name}: no RANGE answers from forward-addr {fwd}"
    nx = make_nxdns([up.addr], config={"upstream": {"timeout_ms": None}, "cache": None})
    return up, nx


def ask_udp(nx):
    return lambda q: dns.query.udp(q, "127.0.0.1", port=nx.port, timeout=5)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_deckard_scenario(make_nxdns, path):
    sc = rpl.parse(path)
    up, nx = start(make_nxdns, sc)
    try:
        checks = rpl.replay(sc, up, ask_udp(nx))
        assert checks >= 1, f"{path.name}: no CHECK_ANSWER step"
        assert up.log, "the fake upstream was never asked"
    finally:
        up.stop()


def test_replayer_catches_a_wrong_answer(make_nxdns):
    """The replay can fail: the first scenario with its expected answer's address changed must
    be reported as a differing answer section."""
    if not SCENARIOS:
        pytest.skip("no scenario")
    sc = rpl.parse(SCENARIOS[0])
    bad = copy.deepcopy(sc)
    step = next(s for s in bad.steps if s.kind == "CHECK_ANSWER")
    owner, ttl, cls, typ, rdata = step.entry.sections["ANSWER"][0]
    step.entry.sections["ANSWER"][0] = (owner, ttl, cls, typ,
                                        "192.0.2.99" if typ == "A" else rdata + " x")
    up, nx = start(make_nxdns, sc)
    try:
        with pytest.raises(AssertionError, match="answer section"):
            rpl.replay(bad, up, ask_udp(nx))
    finally:
        up.stop()


def test_reader_refuses_what_it_does_not_know(tmp_path):
    p = tmp_path / "x.rpl"
    p.write_text("CONFIG_END\nSCENARIO_BEGIN x\nSTEP 1 REPLY\nSCENARIO_END\n")
    with pytest.raises(rpl.RplError, match="STEP REPLY"):
        rpl.parse(p)
