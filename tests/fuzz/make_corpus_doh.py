#!/usr/bin/python3
"""Regenerate tests/fuzz/corpus/doh: the seed corpus for fuzz_doh (and its replay test).

Input format (see tests/fuzz/fuzz_doh.c): a mode byte, then for requests
"path\\ncontent-type\\nbody" (method in mode bits 0-1: GET, POST, HEAD, PUT; bit 2: a 64-byte
output buffer); with mode bit 7 set, raw client HTTP/2 frames after the preface exchange.
Realistic GET/POST requests (client ids, extra parameters, percent-escapes, content-type
parameters), the errors a client can provoke, and HTTP/2 conversations (HEADERS, DATA,
CONTINUATION, RST_STREAM, PING, WINDOW_UPDATE). Needs only the standard library; the files
are committed, rerun after edits:
    tests/fuzz/make_corpus_doh.py
Deterministic: fixed ids, no randomness.
"""
import base64
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "doh")

GET, POST, HEAD, PUT, SMALL, H2 = 0, 1, 2, 3, 4, 0x80


def name(text):
    out = b""
    for label in text.strip(".").split("."):
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def query(qname, qtype, qid=0, edns=False):
    msg = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 1 if edns else 0)
    msg += name(qname) + struct.pack("!HH", qtype, 1)
    if edns:
        msg += b"\0" + struct.pack("!HHIH", 41, 1232, 0, 0)
    return msg


def nxdomain(qname):
    msg = struct.pack("!HHHHHH", 0, 0x8183, 1, 0, 1, 0) + name(qname) + struct.pack("!HH", 1, 1)
    soa = b"\xc0\x0c" * 2 + struct.pack("!IIIII", 1, 7200, 900, 1209600, 300)
    return msg + b"\xc0\x0c" + struct.pack("!HHIH", 6, 1, 900, len(soa)) + soa


def b64(msg):
    return base64.urlsafe_b64encode(msg).rstrip(b"=")


def req(mode, path, ctype=b"", body=b""):
    return bytes([mode]) + path + b"\n" + ctype + b"\n" + body


def hint(n):
    """HPACK integer with a 7-bit prefix (RFC 7541 5.1)."""
    if n < 127:
        return bytes([n])
    out, n = [127], n - 127
    while n >= 128:
        out.append(n % 128 + 128)
        n //= 128
    return bytes(out + [n])


def hpack(headers):
    """Literal header fields without indexing, new names (RFC 7541 6.2.2), no Huffman."""
    out = b""
    for k, v in headers:
        out += b"\0" + hint(len(k)) + k + hint(len(v)) + v
    return out


def frame(ftype, flags, stream, payload):
    return struct.pack("!I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack("!I", stream) \
        + payload


DATA, HEADERS, RST, PING, WINUP, CONT = 0, 1, 3, 6, 8, 9
END_STREAM, END_HEADERS = 1, 4


def table_size(n):
    """Dynamic table size update (RFC 7541 6.3), 5-bit prefix: due in the first header block
    after our SETTINGS_HEADER_TABLE_SIZE (1024) is acknowledged."""
    if n < 31:
        return bytes([0x20 | n])
    out, n = [0x3f], n - 31
    while n >= 128:
        out.append(n % 128 + 128)
        n //= 128
    return bytes(out + [n])


FIRST = table_size(1024)


def request_headers(method, path, extra=()):
    return hpack([(b":method", method), (b":scheme", b"https"), (b":authority", b"dns.home"),
                  (b":path", path)] + list(extra))


def main():
    qa = query("www.example.com", 1, 0)
    qaaaa = query("example.org", 28, 0, edns=True)
    qhttps = query("Cdn.Example.NET", 65, 0, edns=True)
    files = {}
    # --- requests
    files["get.bin"] = req(GET, b"/dns-query?dns=" + b64(qa))
    files["get_clientid_params.bin"] = req(GET, b"/dns-query/laptop-1?ct=application/dns-message"
                                           b"&dns=" + b64(qaaaa))
    files["get_duplicate.bin"] = req(GET, b"/dns-query?dns=" + b64(qa) + b"&dns=" + b64(qa))
    files["get_padding.bin"] = req(GET, b"/dns-query?dns=" + base64.urlsafe_b64encode(qa))
    files["get_percent.bin"] = req(GET, b"/dns-query/Kids?%64ns=" +
                                   b"".join(b"%%%02X" % c for c in b64(qa)[:8]) + b64(qa)[8:])
    files["get_small_cap.bin"] = req(GET | SMALL, b"/dns-query?dns=" + b64(qhttps))
    files["post.bin"] = req(POST, b"/dns-query", b"application/dns-message", qa)
    files["post_params.bin"] = req(POST, b"/dns-query/phone",
                                   b"Application/DNS-Message; charset=binary", qhttps)
    files["post_wrong_type.bin"] = req(POST, b"/dns-query", b"text/plain", qa)
    files["post_nxdomain_body.bin"] = req(POST, b"/dns-query", b"application/dns-message",
                                          nxdomain("nope.example"))
    files["head.bin"] = req(HEAD, b"/dns-query?dns=" + b64(qa))
    files["raw_b64_body.bin"] = req(PUT, b"/", b"", b"Zm9vYmFy")
    # --- HTTP/2 conversations
    get_path = b"/dns-query?dns=" + b64(qa)
    files["h2_get.bin"] = bytes([H2 | 9]) + frame(
        HEADERS, END_STREAM | END_HEADERS, 1, FIRST + request_headers(b"GET", get_path))
    post_hdr = request_headers(b"POST", b"/dns-query/tv",
                               [(b"content-type", b"application/dns-message"),
                                (b"content-length", str(len(qaaaa)).encode())])
    files["h2_post_and_get.bin"] = bytes([H2 | 20]) + frame(HEADERS, END_HEADERS, 1, FIRST + post_hdr) \
        + frame(DATA, 0, 1, qaaaa[:10]) + frame(DATA, END_STREAM, 1, qaaaa[10:]) \
        + frame(HEADERS, END_STREAM | END_HEADERS, 3, request_headers(b"GET", get_path))
    block = FIRST + request_headers(b"GET", b"/dns-query/x?dns=" + b64(qhttps))
    files["h2_continuation_rst_ping.bin"] = bytes([H2 | 40]) \
        + frame(HEADERS, END_STREAM, 1, block[:11]) + frame(CONT, END_HEADERS, 1, block[11:]) \
        + frame(HEADERS, END_HEADERS, 3, request_headers(b"POST", b"/dns-query")) \
        + frame(RST, 0, 3, struct.pack("!I", 8)) + frame(PING, 0, 0, b"12345678") \
        + frame(WINUP, 0, 0, struct.pack("!I", 1000)) \
        + frame(HEADERS, END_STREAM | END_HEADERS, 5, request_headers(b"DELETE", b"/"))
    files["h2_stream_flood.bin"] = bytes([H2 | 0]) + b"".join(
        frame(HEADERS, END_HEADERS, sid, (FIRST if sid == 1 else b"") +
              request_headers(b"POST", b"/dns-query"))
        for sid in range(1, 20, 2))

    os.makedirs(OUT, exist_ok=True)
    for fname in os.listdir(OUT):
        if fname.endswith(".bin"):
            os.unlink(os.path.join(OUT, fname))
    for fname, data in sorted(files.items()):
        with open(os.path.join(OUT, fname), "wb") as f:
            f.write(data)
    print("%d files in %s" % (len(files), OUT))


if __name__ == "__main__":
    main()
