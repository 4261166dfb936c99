"""The process has exactly the threads the config implies, and load does not add any."""

import pytest

from harness import answers, closed_port, make_query, parallel


def expected_threads(workers: int, query_log: bool, pgsink: bool = False) -> int:
    # main/control thread + one per worker + the query-log writer when the query log is on
    # + the PostgreSQL sink's writer when logging.postgresql is set (docs/architecture:
    # threads are fixed at start, never grown by load). 2 workers: 4 threads, 5 with the sink.
    return 1 + workers + (1 if query_log else 0) + (1 if pgsink else 0)


@pytest.mark.parametrize("workers,query_log,pgsink",
                         [(1, True, False), (3, True, False), (2, False, False), (2, True, False),
                          (2, True, True)],
                         ids=["1worker", "3workers", "2workers-noquerylog", "2workers",
                              "2workers-pgsink"])
def test_thread_count_matches_config(make_upstream, make_nxdns, workers, query_log, pgsink):
    up = make_upstream()
    logging = {"query_log": query_log}
    if pgsink:
        # nothing listens there: the sink's thread exists (and retries) all the same
        logging["postgresql"] = {"dsn": f"host=127.0.0.1 port={closed_port()} dbname=x"}
    nx = make_nxdns([up], config={"listener": {"workers": workers}, "logging": logging})
    want = expected_threads(workers, query_log, pgsink)
    assert want == {(2, True, False): 4, (2, True, True): 5}.get((workers, query_log, pgsink), want)
    assert nx.threads() == want, f"/proc says {nx.threads()} threads, config implies {want}"
    m = nx.metrics()
    assert m.has("nxdns_process_threads"), "/metrics has no nxdns_process_threads"
    assert m.get("nxdns_process_threads") == want

    # Load over UDP and TCP, v4 and v6: the thread count does not move.
    calls = []
    for i in range(40):
        proto = "udp" if i % 2 else "tcp"
        v6 = bool(i % 3 == 0)
        calls.append(lambda i=i, proto=proto, v6=v6:
                     getattr(nx, proto)(make_query(f"t{i}.example", edns=0), v6=v6, timeout=5))
    results = parallel(calls, timeout=30)
    errors = [r for r in results if isinstance(r, Exception)]
    assert not errors, f"{len(errors)} queries failed under load: {errors[0]!r}"
    assert all(answers(r) == ["192.0.2.1"] for r in results)
    assert nx.threads() == want, "the thread count grew under load"
    assert nx.metrics().get("nxdns_process_threads") == want
