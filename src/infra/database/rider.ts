/**
 * A data-modifying statement that one module needs written in the same round trip as a hot statement another
 * module owns: the owner appends it as one more CTE (`WITH ..., <name> AS (<cte>)`), which PostgreSQL runs whether
 * or not the query reads it. Its text stays with the module that owns its table; the host knows only its name.
 * On the lifecycle's 2-core path every round trip costs about as much as any other (the job's event as a
 * statement of its own was one statement in six on `complete`).
 */
export interface StatementRider {
  /** Names the rider's text (a prepared statement's name is the host's name plus this). */
  readonly name: string;
  /** The CTE's body, its parameters numbered from `firstParam`. */
  cte(firstParam: number): string;
  readonly params: readonly unknown[];
}

/** `text` (a statement whose last part is the final SELECT after its CTEs) with the rider's CTE before it. */
export function withRider(
  name: string,
  ctes: string,
  select: string,
  params: unknown[],
  rider?: StatementRider,
): { name: string; text: string; params: unknown[] } {
  if (!rider) return { name, text: `${ctes}\n${select}`, params };
  return {
    name: `${name}+${rider.name}`,
    text: `${ctes},\n rider_${rider.name} AS (${rider.cte(params.length + 1)})\n${select}`,
    params: [...params, ...rider.params],
  };
}
