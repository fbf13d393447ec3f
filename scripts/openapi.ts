import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NestFactory } from '@nestjs/core';
import { AppModule } from '../src/app.module';
import { createHttpAdapter } from '../src/common/http/http-adapter';
import { buildOpenApiDocument } from '../src/common/openapi/document';
import { generateApiTypes } from './openapi-types';

/**
 * `npm run openapi`: writes openapi.json and the client's types (src/client/api-types.ts) from the app's routes.
 * The app is built in preview mode (module graph and routes, no provider instantiated), so no database is needed.
 */
async function main(): Promise<void> {
  const root = join(__dirname, '..', '..');
  const app = await NestFactory.create(AppModule, createHttpAdapter(), {
    preview: true,
    logger: false,
    abortOnError: false,
  });
  const doc = buildOpenApiDocument(app);
  await app.close();
  const docPath = join(root, 'openapi.json');
  writeFileSync(docPath, `${JSON.stringify(doc, null, 2)}\n`);
  const typesPath = join(root, 'src', 'client', 'api-types.ts');
  generateApiTypes(root, docPath, typesPath);
  process.stdout.write(`wrote ${docPath} (${Object.keys(doc.paths).length} paths) and ${typesPath}\n`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
