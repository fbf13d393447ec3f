// ESLint (flat config): typescript-eslint's strict rules, Prettier's formatting, and the module boundaries.
const fs = require('node:fs');
const path = require('node:path');
const eslint = require('@eslint/js');
const tseslint = require('typescript-eslint');
const prettier = require('eslint-config-prettier');
const importX = require('eslint-plugin-import-x');

const MODULES = path.join(__dirname, 'src/modules');

/** Pure files that are a module's words (vocabulary, arithmetic, constructors), imported by the modules using it. */
const WORDS = {
  events: ['event-types.ts'],
  lifecycle: ['vocabulary.ts', 'outcomes.ts', 'retry-policy.ts', 'sql.ts', 'lifecycle.types.ts', 'lock-order.ts'],
};

/**
 * What a module exports, read from its `*.module.ts` files: the module files themselves, the files of the providers
 * named in `exports: [...]`, and its dto/ folder. Everything else in the module is internal.
 */
function publicFilesOf(name) {
  const dir = path.join(MODULES, name);
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.module.ts'));
  const out = new Set(files.map((f) => `./${f}`));
  out.add('./dto');
  for (const f of WORDS[name] ?? []) out.add(`./${f}`);
  for (const f of files) {
    const text = fs.readFileSync(path.join(dir, f), 'utf8');
    const exported =
      /exports:\s*\[([^\]]*)\]/
        .exec(text)?.[1]
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean) ?? [];
    for (const cls of exported) {
      const from = new RegExp(`import \\{[^}]*\\b${cls}\\b[^}]*\\} from '\\./([^']+)'`).exec(text)?.[1];
      if (from) out.add(`./${from}.ts`);
    }
  }
  return [...out];
}

const moduleNames = fs.readdirSync(MODULES).filter((f) => fs.statSync(path.join(MODULES, f)).isDirectory());
const zones = [
  // Shared plumbing never depends on a feature.
  { target: './src/common', from: './src/modules' },
  { target: './src/infra', from: './src/modules' },
];
for (const target of moduleNames) {
  for (const from of moduleNames) {
    if (from === target) continue;
    zones.push({
      target: `./src/modules/${target}`,
      from: `./src/modules/${from}`,
      except: publicFilesOf(from),
      message: `reach ${from}'s internals only through what its module exports (its services, module and dto/)`,
    });
  }
}

module.exports = tseslint.config(
  { ignores: ['dist/**', 'coverage/**', 'node_modules/**', 'src/client/api-types.ts', '.runplane/**'] },
  eslint.configs.recommended,
  ...tseslint.configs.strict,
  prettier,
  {
    plugins: { 'import-x': importX },
    settings: { 'import-x/resolver-next': [importX.createNodeResolver({ extensions: ['.ts', '.js', '.json'] })] },
    rules: {
      'max-len': ['error', { code: 120, ignoreUrls: true, ignoreRegExpLiterals: true }],
      'import-x/no-restricted-paths': ['error', { zones }],
      // Nest modules are classes with only a decorator.
      '@typescript-eslint/no-extraneous-class': ['error', { allowWithDecorator: true }],
    },
  },
  {
    files: ['**/*.js'],
    languageOptions: {
      globals: {
        require: 'readonly',
        module: 'writable',
        __dirname: 'readonly',
        process: 'readonly',
        console: 'readonly',
      },
    },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
