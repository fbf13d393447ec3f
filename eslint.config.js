// ESLint (flat config): typescript-eslint's strict rules, Prettier's formatting, and the module boundaries:
// a module's internals are reachable from another module only through its public face (index.ts).
const eslint = require('@eslint/js');
const tseslint = require('typescript-eslint');
const prettier = require('eslint-config-prettier');

module.exports = tseslint.config(
  { ignores: ['dist/**', 'coverage/**', 'node_modules/**', 'src/client/api-types.ts', '.runplane/**'] },
  eslint.configs.recommended,
  ...tseslint.configs.strict,
  prettier,
  {
    rules: {
      'max-len': ['error', { code: 120, ignoreUrls: true, ignoreRegExpLiterals: true }],
    },
  },
);
