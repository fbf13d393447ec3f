import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/**
 * Writes the client's TypeScript types for an OpenAPI document with openapi-typescript (an ES module, so run as its
 * CLI). Fields with a default stay optional in request bodies (`--default-non-nullable=false`).
 */
export function generateApiTypes(root: string, docPath: string, outPath: string): void {
  const cli = join(root, 'node_modules', 'openapi-typescript', 'bin', 'cli.js');
  execFileSync(process.execPath, [cli, docPath, '--output', outPath, '--default-non-nullable=false'], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}
