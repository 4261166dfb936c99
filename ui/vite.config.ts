// The admin UI build. Output goes where the Meson build asks (NXDNS_UI_OUT), else ui/dist;
// scripts/ui-embed then checks the size budget and embeds every file into the binary.
import { defineConfig } from 'vitest/config';
import preact from '@preact/preset-vite';

export default defineConfig({
  plugins: [preact()],
  base: '/',
  build: {
    outDir: process.env.NXDNS_UI_OUT || 'dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    // The served CSP has no 'unsafe-inline': nothing may be inlined into index.html, and no
    // asset may become a data: URL that the policy would have to allow.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    cssCodeSplit: false,
    sourcemap: false,
    reportCompressedSize: false,
    target: 'es2020',
  },
  test: {
    include: ['../tests/ui/unit/**/*.test.ts'],
    environment: 'node',
  },
});
