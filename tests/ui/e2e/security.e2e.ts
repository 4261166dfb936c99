// The Security page in a real browser against the real daemon. The second factor: enrol on
// the page (the secret shown once), confirm with a code this test computes from that secret
// (RFC 6238, as an authenticator app does), log out, and log in with the password and a code;
// a wrong code is refused at its field; removal needs a code. Backup and restore: the download
// is a gzip archive the server made, a junk upload is refused with the server's message and
// changes nothing, the downloaded archive restores. Screenshots at both widths, axe-core clean.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ART, Session } from './session';

const PASSWORD = 'correct horse battery';
const s = new Session();
const page = () => s.page;
const h1 = () => page().getByRole('heading', { level: 1 }).innerText();

function base32Decode(text: string): Buffer {
  const abc = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = 0, acc = 0;
  const out: number[] = [];
  for (const ch of text.replace(/[\s=]/g, '').toUpperCase()) {
    const v = abc.indexOf(ch);
    if (v < 0) throw new Error(`not base32: ${ch}`);
    acc = (acc << 5) | v;
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      out.push((acc >> bits) & 0xff);
    }
  }
  return Buffer.from(out);
}

/** RFC 6238 / 4226: HMAC-SHA-1, 30 s steps, 6 digits. */
function totpAt(secret: string, step: number): string {
  const msg = Buffer.alloc(8);
  msg.writeBigUInt64BE(BigInt(step));
  const mac = crypto.createHmac('sha1', base32Decode(secret)).update(msg).digest();
  const off = mac[mac.length - 1] & 0x0f;
  const bin = (mac.readUInt32BE(off) & 0x7fffffff) % 1_000_000;
  return String(bin).padStart(6, '0');
}

// The server accepts each step's code once (replay), within one step either side: every code
// this test sends is for a step after the last one used, waiting when that is still ahead.
let lastStep = 0;
async function freshCode(secret: string): Promise<string> {
  const nowStep = () => Math.floor(Date.now() / 30_000);
  const step = Math.max(nowStep(), lastStep + 1);
  while (step > nowStep() + 1) await page().waitForTimeout(500);
  lastStep = step;
  return totpAt(secret, step);
}

beforeAll(async () => {
  await s.start(['ads.e2e.test']);
  await page().goto(s.nx.base + '/#/security');
  await page().getByRole('heading', { level: 1, name: 'Security' }).waitFor();
});

afterAll(async () => {
  await s.stop();
});

let secret = '';

describe('second factor', () => {
  it('computes RFC 6238\'s test vector (the helper this suite trusts)', () => {
    // RFC 6238 appendix B, SHA-1, T = 59 s: 94287082 (8 digits); its last 6 digits
    expect(totpAt('GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ', 1)).toBe('287082'); // base32 of "12345678901234567890"
  });

  it('enrols on the page: the secret and the otpauth link once, then a code turns it on', async () => {
    expect(await page().getByTestId('totp-state').innerText()).toBe('No second factor: the password alone logs in.');
    await page().getByRole('button', { name: 'Set up a second factor' }).click();
    const code = page().getByTestId('totp-secret');
    await code.waitFor();
    secret = (await code.getAttribute('data-secret')) ?? '';
    expect(secret).toMatch(/^[A-Z2-7]{32}$/); // 160 bits
    expect(await code.innerText()).toBe(secret.replace(/(.{4})/g, '$1 ').trim());
    const uri = (await page().getByTestId('totp-uri').getAttribute('href')) ?? '';
    expect(uri.startsWith('otpauth://totp/')).toBe(true);
    expect(new URL(uri).searchParams.get('secret')).toBe(secret);
    await expect.poll(() => s.focusedId()).toBe('totp-code');
    await s.shoot('security-enrol');
    await s.axeCheck('security enrolment');

    // a code of the wrong shape is said at once, a wrong code by the server, both at the field
    await page().getByLabel('Code from the authenticator app').fill('12');
    await page().getByRole('button', { name: 'Turn on' }).click();
    await expect.poll(() => s.fieldError('totp-code').innerText()).toBe('The code is 6 digits.');
    const wrong = totpAt(secret, Math.floor(Date.now() / 30_000) + 5);
    await page().getByLabel('Code from the authenticator app').fill(wrong);
    await page().getByRole('button', { name: 'Turn on' }).click();
    await expect.poll(() => s.fieldError('totp-code').innerText()).toContain('wrong code');
    expect(s.config()).not.toContain(secret);

    await page().getByLabel('Code from the authenticator app').fill(await freshCode(secret));
    await page().getByRole('button', { name: 'Turn on' }).click();
    await expect.poll(() => page().getByTestId('totp-state').innerText()).toBe('A second factor is on.');
    expect(await page().getByRole('status').filter({ hasText: 'second factor is on' }).count()).toBe(1);
    expect(await page().getByTestId('totp-secret').count()).toBe(0); // shown once only
    expect(s.config()).toContain(secret);
    await s.shoot('security-on');
    await s.axeCheck('security with a second factor');
  });

  it('logs out, and the login asks for the code: a wrong one is refused, a fresh one logs in', async () => {
    await page().getByRole('button', { name: 'Log out' }).click();
    await expect.poll(h1).toBe('Log in');
    await page().getByLabel('Authenticator code').waitFor();
    await s.shoot('login-totp');
    await s.axeCheck('login with a second factor');
    await page().getByLabel('Admin password').fill(PASSWORD);
    await page().getByLabel('Authenticator code').fill(totpAt(secret, Math.floor(Date.now() / 30_000) + 7));
    await page().keyboard.press('Enter');
    await expect.poll(() => s.fieldError('totp').innerText()).toContain('wrong code');
    await expect.poll(() => s.focusedId()).toBe('totp');
    await page().getByLabel('Admin password').fill(PASSWORD);
    await page().getByLabel('Authenticator code').fill(await freshCode(secret));
    await page().keyboard.press('Enter');
    await expect.poll(h1).toBe('Security'); // the address kept the page
  });
});

describe('backup and restore', () => {
  let archive = '';

  it('downloads a backup the server made', async () => {
    await page().reload();
    await expect.poll(h1).toBe('Security');
    const [dl] = await Promise.all([
      page().waitForEvent('download'),
      page().getByRole('link', { name: 'Download a backup' }).click(),
    ]);
    expect(dl.suggestedFilename()).toMatch(/\.tar\.gz$|nxbackup/);
    archive = path.join(ART, 'e2e-backup.tar.gz');
    await dl.saveAs(archive);
    const head = fs.readFileSync(archive).subarray(0, 2);
    expect([...head]).toEqual([0x1f, 0x8b]); // gzip
    // with the query log: the link says so
    await page().getByLabel('Include the query log').check();
    expect(await page().getByTestId('backup-link').getAttribute('href')).toBe('/api/backup?querylog=true');
    await page().getByLabel('Include the query log').uncheck();
  });

  it('refuses a junk archive with the server\'s message, and changes nothing', async () => {
    const junk = path.join(ART, 'e2e-junk.tar.gz');
    fs.writeFileSync(junk, 'this is not an archive\n');
    const before = s.config();
    await page().getByLabel('Backup archive').setInputFiles(junk);
    await page().getByRole('button', { name: 'Restore…' }).click();
    await page().getByRole('button', { name: /^Replace the configuration with/ }).click();
    await expect.poll(() => page().getByTestId('restore-error').innerText()).toContain('nothing was changed');
    expect(s.config()).toBe(before);
  });

  it('restores the downloaded archive', async () => {
    // a change after the backup, which the restore undoes
    const r = await s.ctx.request.post(`${s.nx.base}/api/filter/rules`, {
      data: { list: 'deny', rule: 'after-backup.e2e.test' },
      headers: { 'X-CSRF-Token': await csrf() },
    });
    expect(r.status(), await r.text()).toBe(201);
    expect(s.config()).toContain('after-backup.e2e.test');
    await page().getByLabel('Backup archive').setInputFiles(archive);
    await page().getByRole('button', { name: 'Restore…' }).click();
    await page().getByRole('button', { name: /^Replace the configuration with/ }).click();
    await expect.poll(() => page().getByTestId('restore-result').innerText()).toMatch(/^Restored the configuration/);
    expect(s.config()).not.toContain('after-backup.e2e.test');
    expect(s.config()).toContain(secret); // the second factor came back with it
    await s.shoot('security-restored');
    await s.axeCheck('security after a restore');
  });
});

describe('second factor removal', () => {
  it('needs a code, then the password alone logs in again', async () => {
    await page().getByRole('button', { name: 'Remove the second factor…' }).click();
    await page().getByLabel('Code from the authenticator app').fill(await freshCode(secret));
    await page().getByRole('button', { name: 'Remove', exact: true }).click();
    await expect.poll(() => page().getByTestId('totp-state').innerText()).toBe('No second factor: the password alone logs in.');
    expect(s.config()).not.toContain(secret);
    await page().getByRole('button', { name: 'Log out' }).click();
    await expect.poll(h1).toBe('Log in');
    expect(await page().getByLabel('Authenticator code').count()).toBe(0);
    await page().getByLabel('Admin password').fill(PASSWORD);
    await page().keyboard.press('Enter');
    await expect.poll(h1).toBe('Security');
  });
});

async function csrf(): Promise<string> {
  const st = await (await s.ctx.request.get(`${s.nx.base}/api/auth/status`)).json();
  return st.csrf;
}
