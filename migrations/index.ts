import { CreateUsersAndProjects1764633600000 } from './1764633600000-CreateUsersAndProjects';

/** Every migration, in order. Listed explicitly so the app, the CLI and jest load the same set without globs. */
export const MIGRATIONS = [CreateUsersAndProjects1764633600000];
