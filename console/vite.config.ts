import { defineConfig } from 'vite';

// The console is built into dist/console by `npm run build` (so `npm start` and `npm test` need no extra step) and
// served by the API server itself at `/` (src/infra/console). Preact's JSX through esbuild: no Babel plugin needed.
export default defineConfig({
  base: '/',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: { outDir: '../dist/console', emptyOutDir: true, target: 'es2022', reportCompressedSize: false },
  logLevel: 'warn',
});
