import 'reflect-metadata';
import { serve } from './serve';
import { exitOnStartupFailure } from './startup-failure';

serve().catch((err: unknown) => exitOnStartupFailure(err));
