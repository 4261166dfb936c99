// End-to-end: the real daemon, Debian's chromium through playwright-core (scripts/test-ui).
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    root: __dirname,
    include: ['*.e2e.ts'],
    environment: 'node',
    testTimeout: 90_000,
    hookTimeout: 60_000,
    fileParallelism: false,
    // Every wait is on observable state (expect.poll ends as soon as it holds), but some steps
    // take seconds on a loaded machine: the setup's argon2 hash (64 MiB) and config fsync took
    // over 6 s at load 10, past poll's default 1 s. A longer bound only delays a real failure.
    expect: { poll: { timeout: 10_000 } },
  },
});
