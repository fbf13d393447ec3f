import 'reflect-metadata';
import { serve } from './serve';

serve().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
