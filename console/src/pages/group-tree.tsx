import { useEffect, useRef, useState } from 'preact/hooks';
import { api, call, money, type Group } from '../api';
import { Counts, Status } from '../ui';

type Node = { view: Group; children?: number[]; next?: string | null; expanded: boolean };
type Path = { project: string; runId: string };

/** The request context of a run's group routes. */
const at = (p: Path, g: number) => ({ path: { project: p.project, runId: p.runId, g } });

/** Reads of a group started in the last half second: the tree and the group pane ask for the same one at once. */
const recent = new Map<string, { at: number; answer: Promise<Group> }>();

/** A group's view with its cost (group 0's cost is the run's), as a tree node shows it. */
export function loadGroup(p: Path, g: number): Promise<Group> {
  const key = `${p.project}/${p.runId}/${g}`;
  const hit = recent.get(key);
  if (hit && performance.now() - hit.at < 500) return hit.answer;
  const answer = Promise.all([
    call(api().GET('/api/v1/projects/{project}/runs/{runId}/job-groups/{g}', { params: at(p, g) })),
    call(api().GET('/api/v1/projects/{project}/runs/{runId}/job-groups/{g}/cost', { params: at(p, g) })),
  ]).then(
    ([view, cost]) =>
      ({ ...(view as Omit<Group, 'cost'>), cost: { total_usd: cost.total_usd, breakdown: cost.breakdown } }) as Group,
  );
  recent.set(key, { at: performance.now(), answer });
  answer.catch(() => recent.delete(key));
  return answer;
}

async function loadChildren(p: Path, g: number, cursor?: string) {
  return call(
    api().GET('/api/v1/projects/{project}/runs/{runId}/job-groups/{g}/job-groups', {
      params: { ...at(p, g), query: { limit: 100, cursor } },
    }),
  );
}

/**
 * The job-group tree: children load when a group is expanded (100 a page), so a run of any size opens at once.
 * `version` bumps (events, a cancellation) re-read the root and every expanded group's children: effective statuses
 * of a cancelled subtree change in place.
 */
export function GroupTree(props: Path & { selected: number; onSelect: (g: number) => void; version: number }) {
  const [nodes, setNodes] = useState<Map<number, Node>>(new Map());
  const [error, setError] = useState<unknown>();
  const nodesRef = useRef(nodes);
  nodesRef.current = nodes;

  const update = (fn: (m: Map<number, Node>) => void) =>
    setNodes((old) => {
      const m = new Map(old);
      fn(m);
      return m;
    });

  /** Loads a group's children: the first page (`refresh` keeps those loaded past it), or the next one (`more`). */
  const expand = async (g: number, more = false, refresh = false) => {
    const node = nodesRef.current.get(g);
    const page = await loadChildren(props, g, more ? (node?.next ?? undefined) : undefined);
    update((m) => {
      for (const c of page.items)
        m.set(c.job_group_id, {
          ...m.get(c.job_group_id),
          view: c,
          expanded: m.get(c.job_group_id)?.expanded ?? false,
        });
      const cur = m.get(g);
      if (!cur) return;
      const ids = page.items.map((c) => c.job_group_id);
      m.set(g, {
        ...cur,
        expanded: true,
        children: more
          ? [...(cur.children ?? []), ...ids]
          : refresh
            ? [...ids, ...(cur.children ?? []).slice(ids.length)]
            : ids,
        next: page.next_cursor,
      });
    });
  };

  // First load, and the path down to a deep-linked group.
  useEffect(() => {
    (async () => {
      // The root and its children at once (a run page's usual first view), then the path to a deep-linked group.
      const [root, kids] = await Promise.all([loadGroup(props, 0), loadChildren(props, 0)]);
      const first = new Map<number, Node>([[0, { view: root, expanded: true, children: [], next: kids.next_cursor }]]);
      for (const c of kids.items) {
        first.set(c.job_group_id, { view: c, expanded: false });
        first.get(0)?.children?.push(c.job_group_id);
      }
      setNodes(first);
      nodesRef.current = first;
      const chain: number[] = [];
      for (let g = props.selected; g !== 0;) {
        const v = await loadGroup(props, g);
        if (v.parent_id === null || v.parent_id === undefined) break;
        chain.unshift(v.parent_id);
        g = v.parent_id;
      }
      for (const g of chain.filter((k) => k !== 0)) await expand(g);
    })().catch(setError);
  }, [props.project, props.runId]);

  // Refresh what is shown.
  useEffect(() => {
    if (props.version === 0) return;
    (async () => {
      const root = await loadGroup(props, 0);
      update((m) => m.set(0, { ...(m.get(0) as Node), view: root }));
      const open = [...nodesRef.current.entries()].filter(([, n]) => n.expanded).map(([g]) => g);
      await Promise.all(open.map((g) => expand(g, false, true)));
    })().catch(setError);
  }, [props.version]);

  const render = (g: number, level: number) => {
    const n = nodes.get(g);
    if (!n) return null;
    const v = n.view;
    const c = v.cancellation as { job_group_id: number; reason: string; cancelled_by: string } | null;
    const hasChildren = n.children === undefined || n.children.length > 0;
    return (
      <li key={g}>
        <div class={`node${props.selected === g ? ' selected' : ''}`} style={{ paddingLeft: `${level * 14}px` }}>
          {hasChildren ? (
            <button
              type="button"
              class="icon toggle"
              aria-expanded={n.expanded}
              aria-label={`${n.expanded ? 'Collapse' : 'Expand'} group ${g}`}
              onClick={() =>
                n.expanded ? update((m) => m.set(g, { ...n, expanded: false })) : void expand(g).catch(setError)
              }
            >
              {n.expanded ? '▾' : '▸'}
            </button>
          ) : (
            <span class="toggle-spacer" aria-hidden="true" />
          )}
          <button
            type="button"
            class="node-select"
            aria-pressed={props.selected === g}
            data-group={g}
            onClick={() => props.onSelect(g)}
          >
            <span class="gname">{g === 0 ? 'run (group 0)' : `group ${g}`}</span>
            <Status status={v.status} />
            {c && (
              <span class="why" data-testid="why">
                {c.job_group_id === g ? `by ${c.cancelled_by}: ${c.reason}` : `with group ${c.job_group_id}`}
              </span>
            )}
            <Counts c={v.counts} />
            <span class="cost">{money(v.cost?.total_usd)}</span>
          </button>
        </div>
        {n.expanded && n.children && n.children.length > 0 && (
          <ul>
            {n.children.map((k) => render(k, level + 1))}
            {n.next && (
              <li>
                <button
                  type="button"
                  class="link"
                  style={{ marginLeft: `${(level + 1) * 14 + 24}px` }}
                  onClick={() => void expand(g, true).catch(setError)}
                >
                  More groups…
                </button>
              </li>
            )}
          </ul>
        )}
      </li>
    );
  };

  if (error)
    return (
      <p role="alert" class="error">
        Could not load the groups: {(error as Error).message}
      </p>
    );
  if (!nodes.has(0)) return <p role="status">Loading groups…</p>;
  return (
    <ul class="tree" aria-label="Job groups" data-testid="group-tree">
      {render(0, 0)}
    </ul>
  );
}
