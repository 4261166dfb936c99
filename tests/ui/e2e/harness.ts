// The e2e harness: the real nxdns binary on free loopback ports, a fake upstream that answers
// every A query, a small DNS client. Everything stays on 127.0.0.1 and stops by itself.
import { spawn, ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export const UPSTREAM_A = [192, 0, 2, 1];

/** A TCP+UDP port free on 127.0.0.1 (nxdns listens on both for DNS). */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = await new Promise<number>((res, rej) => {
      const s = net.createServer();
      s.once('error', rej);
      s.listen(0, '127.0.0.1', () => {
        const p = (s.address() as net.AddressInfo).port;
        s.close(() => res(p));
      });
    });
    const ok = await new Promise<boolean>((res) => {
      const u = dgram.createSocket('udp4');
      u.once('error', () => res(false));
      u.bind(port, '127.0.0.1', () => u.close(() => res(true)));
    });
    if (ok) return port;
  }
  throw new Error('no free port');
}

export function buildQuery(id: number, name: string, qtype = 1): Buffer {
  const labels = name.split('.').filter(Boolean);
  const q = Buffer.alloc(12 + labels.reduce((n, l) => n + l.length + 1, 0) + 1 + 4);
  q.writeUInt16BE(id, 0);
  q.writeUInt16BE(0x0100, 2); // RD
  q.writeUInt16BE(1, 4);
  let o = 12;
  for (const l of labels) {
    q[o++] = l.length;
    o += q.write(l, o, 'ascii');
  }
  q[o++] = 0;
  q.writeUInt16BE(qtype, o);
  q.writeUInt16BE(1, o + 2);
  return q;
}

/** End of the question section of a message (one question), or -1. */
function questionEnd(m: Buffer): number {
  let o = 12;
  while (o < m.length && m[o] !== 0) {
    if ((m[o] & 0xc0) !== 0) return -1;
    o += m[o] + 1;
  }
  return o + 5 <= m.length ? o + 5 : -1;
}

/** Fake upstream: answers every query with one A record UPSTREAM_A (NOERROR), counts them. */
export class FakeUpstream {
  readonly sock = dgram.createSocket('udp4');
  received = 0;
  port = 0;

  async start(): Promise<this> {
    this.sock.on('message', (m, rinfo) => {
      const end = questionEnd(m);
      if (m.length < 12 || end < 0) return;
      this.received++;
      const ans = Buffer.alloc(16);
      ans.writeUInt16BE(0xc00c, 0);
      ans.writeUInt16BE(1, 2);
      ans.writeUInt16BE(1, 4);
      ans.writeUInt32BE(60, 6);
      ans.writeUInt16BE(4, 10);
      Buffer.from(UPSTREAM_A).copy(ans, 12);
      const r = Buffer.concat([m.subarray(0, end), ans]);
      r.writeUInt16BE(0x8180 | (m.readUInt16BE(2) & 0x0100), 2); // QR RA (+RD)
      r.writeUInt16BE(1, 4);
      r.writeUInt16BE(1, 6);
      r.writeUInt16BE(0, 8);
      r.writeUInt16BE(0, 10);
      this.sock.send(r, rinfo.port, rinfo.address);
    });
    await new Promise<void>((res) => this.sock.bind(0, '127.0.0.1', () => res()));
    this.port = this.sock.address().port;
    return this;
  }

  stop(): Promise<void> {
    return new Promise((res) => this.sock.close(() => res()));
  }
}

export interface Answer { rcode: number; a: string[] }

/** One UDP query to 127.0.0.1:port; the A records of the answer. Rejects after timeoutMs. */
export function query(port: number, name: string, timeoutMs = 3000): Promise<Answer> {
  return new Promise((res, rej) => {
    const s = dgram.createSocket('udp4');
    const id = Math.floor(Math.random() * 65535);
    const t = setTimeout(() => { s.close(); rej(new Error(`no answer for ${name}`)); }, timeoutMs);
    s.on('message', (m) => {
      if (m.readUInt16BE(0) !== id) return;
      clearTimeout(t);
      s.close();
      const rcode = m.readUInt16BE(2) & 0xf;
      const an = m.readUInt16BE(6);
      let o = questionEnd(m);
      const a: string[] = [];
      for (let i = 0; i < an && o > 0 && o + 12 <= m.length; i++) {
        o += (m[o] & 0xc0) === 0xc0 ? 2 : 0; // our servers compress the owner name
        const type = m.readUInt16BE(o);
        const len = m.readUInt16BE(o + 8);
        if (type === 1 && len === 4) a.push([...m.subarray(o + 10, o + 14)].join('.'));
        o += 10 + len;
      }
      res({ rcode, a });
    });
    s.send(buildQuery(id, name), port, '127.0.0.1');
  });
}

/** blocked: the names of the config's one list; extra: top-level YAML lines appended to the
 * config (a part the harness does not write, e.g. `sync:`); admin: lines under `admin:`. */
export interface DaemonOpts { blocked: string[]; extra?: string[]; admin?: string[] }

/** nxdns serve with a config in a fresh temp dir, no admin password (first start). */
export class Daemon {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nxdns-ui-'));
  proc: ChildProcess | null = null;
  dnsPort = 0;
  adminPort = 0;
  logPath = path.join(this.dir, 'nxdns.log');

  constructor(readonly bin: string, readonly upstreamPort: number, readonly opts: DaemonOpts) {}

  get base(): string {
    return `http://127.0.0.1:${this.adminPort}`;
  }

  log(): string {
    try { return fs.readFileSync(this.logPath, 'utf8'); } catch { return ''; }
  }

  async start(): Promise<void> {
    this.dnsPort = await freePort();
    this.adminPort = await freePort();
    const list = path.join(this.dir, 'blocked.txt');
    fs.writeFileSync(list, this.opts.blocked.map((n) => n + '\n').join(''));
    const cfg = [
      'listener:',
      `  dns: ["127.0.0.1:${this.dnsPort}"]`,
      '  workers: 1',
      'upstream:',
      `  servers: ["127.0.0.1:${this.upstreamPort}"]`,
      '  timeout_ms: 2000',
      'cache:',
      '  size: 0',
      // rate limit off: the browser and the tests query from 127.0.0.1 faster than a device would
      'access:',
      '  rate_limit: {qps: 0}',
      'filter:',
      '  sources:',
      `    - {name: e2e, path: "${list}", format: domains}`,
      'admin:',
      '  enabled: true',
      `  listen: "127.0.0.1:${this.adminPort}"`,
      ...(this.opts.admin ?? []).map((l) => `  ${l}`),
      `state_dir: "${path.join(this.dir, 'state')}"`,
      ...(this.opts.extra ?? []),
      '',
    ].join('\n');
    const cfgPath = path.join(this.dir, 'nxdns.yaml');
    fs.writeFileSync(cfgPath, cfg);
    const out = fs.openSync(this.logPath, 'a');
    this.proc = spawn(this.bin, ['serve', '--config', cfgPath], { stdio: ['ignore', out, out], cwd: this.dir });
    fs.closeSync(out);
    const end = Date.now() + 20000;
    while (Date.now() < end) {
      if (this.proc.exitCode !== null) throw new Error(`nxdns exited ${this.proc.exitCode}:\n${this.log()}`);
      if (this.log().includes('serving')) {
        try {
          if ((await fetch(`${this.base}/healthz`)).status === 200) return;
        } catch { /* not yet */ }
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`nxdns did not start:\n${this.log()}`);
  }

  setupToken(): string {
    const m = /admin setup token: ([A-Za-z0-9_-]{43})/.exec(this.log());
    if (!m) throw new Error(`no setup token in the log:\n${this.log()}`);
    return m[1];
  }

  /** VmRSS of the daemon in KiB. */
  rssKiB(): number {
    const s = fs.readFileSync(`/proc/${this.proc!.pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+) kB/.exec(s)![1]);
  }

  /** SIGTERM; resolves with the exit code (must be 0), SIGKILL after 10 s. */
  stop(): Promise<number | null> {
    const p = this.proc;
    if (!p || p.exitCode !== null) return Promise.resolve(p ? p.exitCode : null);
    return new Promise((res) => {
      const t = setTimeout(() => p.kill('SIGKILL'), 10000);
      p.once('exit', (code) => { clearTimeout(t); res(code); });
      p.kill('SIGTERM');
    });
  }
}

/** The rcode and A records of a DNS message (one question, owner names compressed). */
export function parseAnswer(m: Buffer): Answer {
  const rcode = m.readUInt16BE(2) & 0xf;
  const an = m.readUInt16BE(6);
  let o = questionEnd(m);
  const a: string[] = [];
  for (let i = 0; i < an && o > 0 && o + 12 <= m.length; i++) {
    o += (m[o] & 0xc0) === 0xc0 ? 2 : 0;
    const type = m.readUInt16BE(o);
    const len = m.readUInt16BE(o + 8);
    if (type === 1 && len === 4) a.push([...m.subarray(o + 10, o + 14)].join('.'));
    o += 10 + len;
  }
  return { rcode, a };
}

/** One query over TCP (RFC 1035 two-byte length framing) to 127.0.0.1:port. */
export function queryTcp(port: number, name: string, timeoutMs = 3000): Promise<Answer> {
  return new Promise((res, rej) => {
    const id = Math.floor(Math.random() * 65535);
    const q = buildQuery(id, name);
    const len = Buffer.alloc(2);
    len.writeUInt16BE(q.length, 0);
    const s = net.connect(port, '127.0.0.1', () => s.write(Buffer.concat([len, q])));
    let buf = Buffer.alloc(0);
    const t = setTimeout(() => { s.destroy(); rej(new Error(`no TCP answer for ${name}`)); }, timeoutMs);
    s.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        clearTimeout(t);
        s.destroy();
        const m = buf.subarray(2, 2 + buf.readUInt16BE(0));
        if (m.readUInt16BE(0) !== id) rej(new Error(`TCP answer for ${name}: wrong id`));
        else res(parseAnswer(m));
      }
    });
    s.on('error', (e) => { clearTimeout(t); rej(e); });
  });
}
