"""Fixtures for the nxdns integration suite: the real binary against fake upstreams on loopback.

Fixtures
  make_upstream(**kw) -> FakeUpstream    a started fake upstream (stopped at teardown)
  upstream                                one default fake upstream (answers A 192.0.2.1)
  make_nxdns(upstreams=[...], config={...}, start=True) -> Nxdns
                                          a daemon on free ports; `config` deep-merges into the
                                          base config (harness.base_config), None deletes a key
  nxdns                                   a daemon forwarding to `upstream`

Every test runs under a per-phase alarm (default 60 s; `@pytest.mark.nx_timeout(N)` to change),
so nothing can hang. On failure the report carries each daemon's log and the fake upstreams'
query logs. At teardown each daemon gets SIGTERM and must exit 0 without sanitizer reports.
"""

from __future__ import annotations

import signal

import pytest

from fakeupstream import FakeUpstream
from harness import Nxdns, base_config, merge, nxdns_bin

DEFAULT_TIMEOUT = 60


class TestTimeout(Exception):
    pass


def pytest_configure(config):
    config.addinivalue_line("markers", "nx_timeout(seconds): per-phase time limit for a test")


def _limit(item) -> int:
    m = item.get_closest_marker("nx_timeout")
    return int(m.args[0]) if m else DEFAULT_TIMEOUT


def _alarmed(item, phase):
    secs = _limit(item)

    def on_alarm(signum, frame):
        raise TestTimeout(f"{phase} of {item.nodeid} exceeded {secs}s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(secs)
    return old


def _alarm_phase(item, phase):
    """Hook-wrapper body: the phase runs under its alarm, restored afterwards."""
    old = _alarmed(item, phase)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield from _alarm_phase(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _alarm_phase(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    yield from _alarm_phase(item, "teardown")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed or call.when == "teardown":
        return
    for nx in getattr(item, "_nx_daemons", []):
        text = nx.log()
        if len(text) > 20000:
            text = "...(head cut)...\n" + text[-20000:]
        rep.sections.append((f"nxdns log: {nx.name} (config {nx.config_path})", text))
    for up in getattr(item, "_nx_upstreams", []):
        lines = [f"{q.time:.3f} {q.transport} id={q.id} from {q.src_addr}:{q.src_port} "
                 f"{q.qname} {q.qtype} edns={q.edns}" for q in up.queries()]
        rep.sections.append((f"fake upstream {up.addr} queries", "\n".join(lines[-200:])))
    rep.sections.extend(tls_server_sections(item))


@pytest.fixture(scope="session")
def _binary_present():
    b = nxdns_bin()
    if not b.exists():
        pytest.exit(f"nxdns binary not found at {b}: build it or set NXDNS_BIN", returncode=1)


@pytest.fixture
def make_upstream(request):
    ups = []
    request.node._nx_upstreams = ups

    def make(**kw) -> FakeUpstream:
        up = FakeUpstream(**kw).start()
        ups.append(up)
        return up

    yield make
    for up in ups:
        up.stop()


@pytest.fixture
def upstream(make_upstream) -> FakeUpstream:
    return make_upstream()


@pytest.fixture
def make_nxdns(request, tmp_path, make_upstream, _binary_present):
    # Depends on make_upstream so that daemons stop before their fake upstreams do.
    daemons = []
    request.node._nx_daemons = daemons

    def make(upstreams=(), config=None, start=True, name=None) -> Nxdns:
        name = name or f"nxdns{len(daemons)}"
        addrs = [u if isinstance(u, str) else u.addr for u in upstreams]
        cfg = base_config(tmp_path / name, addrs)
        if config:
            cfg = merge(cfg, config)
        nx = Nxdns(tmp_path / name, cfg, name=name)
        daemons.append(nx)
        if start:
            nx.start()
        return nx

    yield make
    problems = []
    for nx in daemons:
        if nx.proc is None:
            continue
        mine = []
        if nx.exit_code is None and not nx.alive():
            # Died while the test ran and the test did not collect it: a crash.
            mine.append(f"{nx.name}: exited with {nx.proc.returncode} during the test")
            nx.stop()
        elif nx.alive():
            code = nx.stop()
            if code != 0:
                mine.append(f"{nx.name}: exit code {code} after SIGTERM (expected 0)")
        if nx.sanitizer_report():
            mine.append(f"{nx.name}: sanitizer report in its log")
        if mine:
            problems += mine + [f"--- {nx.name} log ---\n{nx.log()[-20000:]}"]
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def nxdns(upstream, make_nxdns) -> Nxdns:
    return make_nxdns([upstream])


@pytest.fixture
def make_upstream_cls(request, make_upstream):
    """make_upstream_cls(cls, **kw): like make_upstream for a FakeUpstream subclass (the same
    teardown and failure logs: it joins make_upstream's list)."""

    def make(cls, **kw):
        up = cls(**kw).start()
        request.node._nx_upstreams.append(up)
        return up

    return make


# Encrypted upstreams: the real DoT/DoH servers of tlsservers.py (unbound, kresd, a silent
# port, a counting relay) as fixtures, with their logs in a failed test's report.
# Imported rather than named in pytest_plugins: pytest allows that only in the rootdir's
# conftest, which depends on how the suite is invoked.
from tlsservers import (make_cert, make_kresd, make_relay, make_unbound,  # noqa: E402,F401
                        silent_tcp, tls_server_sections)
