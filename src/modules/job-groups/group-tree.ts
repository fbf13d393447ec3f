import { DomainError } from '../../common/errors/domain-error';
import { required } from '../../common/required';
import { MAX_DEPTH } from './dto/job-group.dto';
import type { NewGroup } from './job-groups.repository';

export interface GroupTreeRequest {
  ref: string;
  parentRef?: string;
  attributes?: Record<string, unknown>;
  cancelAfterNFailures?: number;
}

/**
 * The rows of a new run's tree, checked before anything is written: root group 0 plus the request's groups (by
 * `ref`), each ref's group id and each group's chain (itself, then its ancestors up to 0).
 */
export function planTree(
  root: { cancelAfterNFailures?: number },
  requested: GroupTreeRequest[],
): { rows: NewGroup[]; ids: Map<string, number>; ancestors: Map<number, number[]> } {
  const ids = new Map<string, number>();
  const byRef = new Map<string, GroupTreeRequest>();
  requested.forEach((g, i) => {
    if (byRef.has(g.ref)) throw fieldError(`job_groups[${i}].ref`, `duplicates ref ${g.ref}`);
    byRef.set(g.ref, g);
  });
  const rows: NewGroup[] = [
    {
      jobGroupId: 0,
      parentId: null,
      depth: 0,
      attributes: {},
      cancelAfterNFailures: root.cancelAfterNFailures ?? null,
    },
  ];
  const ancestors = new Map<number, number[]>([[0, [0]]]);
  const place = (g: GroupTreeRequest, path: string[]): number => {
    const known = ids.get(g.ref);
    if (known !== undefined) return known;
    if (path.includes(g.ref))
      throw fieldError('job_groups', `parent_ref cycle through ${[...path, g.ref].join(' → ')}`);
    let parentId = 0;
    if (g.parentRef !== undefined) {
      const parent = byRef.get(g.parentRef);
      if (!parent) throw fieldError('job_groups.parent_ref', `names unknown ref ${g.parentRef}`);
      parentId = place(parent, [...path, g.ref]);
    }
    const chain = [rows.length, ...required(ancestors.get(parentId), `the ancestors of group ${parentId}`)];
    const depth = chain.length - 1;
    if (depth > MAX_DEPTH)
      throw new DomainError(
        'MAX_DEPTH_EXCEEDED',
        `job group ${g.ref} would be at depth ${depth}; at most ${MAX_DEPTH} levels below the root`,
      );
    const id = rows.length;
    rows.push({
      jobGroupId: id,
      parentId,
      depth,
      attributes: g.attributes ?? {},
      cancelAfterNFailures: g.cancelAfterNFailures ?? null,
    });
    ancestors.set(id, chain);
    ids.set(g.ref, id);
    return id;
  };
  requested.forEach((g) => place(g, []));
  return { rows, ids, ancestors };
}

function fieldError(field: string, message: string): DomainError {
  return new DomainError('VALIDATION_FAILED', `${field} ${message}`, [{ field, message }]);
}
