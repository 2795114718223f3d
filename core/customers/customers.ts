import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../errors';
import { newId } from '../ids';
import { Filters, keysetPage } from '../pagination';

export type IdentityKind = 'phone' | 'email' | 'external_id';
export interface Identities {
  phone?: string | null;
  email?: string | null;
  external_id?: string | null;
}

export interface CustomerView {
  id: string;
  name: string | null;
  email: string | null;
  phone: string | null;
  external_id: string | null;
  metadata: Record<string, unknown>;
  identities: Array<{ kind: IdentityKind; value: string }>;
  created_at: string;
  updated_at: string;
}

interface CustomerRow {
  id: string;
  name: string | null;
  email: string | null;
  phone: string | null;
  external_id: string | null;
  metadata: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  identities: Array<{ kind: IdentityKind; value: string }> | null;
}

const SELECT = `select c.*, (select coalesce(json_agg(json_build_object('kind', i.kind, 'value', i.value) order by i.kind, i.value), '[]')
                 from customer_identities i where i.customer_id = c.id) as identities from customers c`;

function view(r: CustomerRow): CustomerView {
  return {
    id: r.id,
    name: r.name,
    email: r.email,
    phone: r.phone,
    external_id: r.external_id,
    metadata: r.metadata ?? {},
    identities: r.identities ?? [],
    created_at: new Date(r.created_at).toISOString(),
    updated_at: new Date(r.updated_at).toISOString(),
  };
}

/** Identities are compared normalised: emails in lower case, phones and external ids as given (phones are E.164). */
function normalise(kind: IdentityKind, value: string): string {
  return kind === 'email' ? value.trim().toLowerCase() : value.trim();
}

function identitiesOf(i: Identities): Array<{ kind: IdentityKind; value: string }> {
  const out: Array<{ kind: IdentityKind; value: string }> = [];
  for (const kind of ['phone', 'email', 'external_id'] as const) {
    const v = i[kind];
    if (v) out.push({ kind, value: normalise(kind, v) });
  }
  return out;
}

const notFound = (id: string) => new ApiError(404, 'not_found', `No customer with id '${id}' in this workspace`);

/**
 * Customers and their identities (phone, email, external id). An identity names at
 * most one customer per workspace (primary key), so the customer a message comes from
 * is never ambiguous; `link` attaches identities and merges the customers they
 * belonged to.
 */
export class CustomerService {
  constructor(private readonly em: EntityManager) {}

  async create(workspaceId: string, input: Identities & { name?: string | null; metadata?: Record<string, unknown> }): Promise<CustomerView> {
    try {
      return await this.em.fork().transactional(async (em) => {
        const id = newId('cus');
        const ids = identitiesOf(input);
        await em.execute(
          `insert into customers (id, workspace_id, name, email, phone, external_id, metadata) values (?, ?, ?, ?, ?, ?, ?::jsonb)`,
          [id, workspaceId, input.name ?? null, ids.find((i) => i.kind === 'email')?.value ?? null, input.phone ?? null, input.external_id ?? null, JSON.stringify(input.metadata ?? {})],
        );
        await this.attach(em, workspaceId, id, ids);
        return this.load(em, workspaceId, id);
      });
    } catch (err) {
      return this.identityConflict(workspaceId, err, input);
    }
  }

  private async attach(em: EntityManager, workspaceId: string, customerId: string, ids: Array<{ kind: IdentityKind; value: string }>): Promise<void> {
    for (const i of ids) {
      await em.execute('insert into customer_identities (workspace_id, kind, value, customer_id) values (?, ?, ?, ?)', [workspaceId, i.kind, i.value, customerId]);
    }
  }

  private async identityConflict(workspaceId: string, err: unknown, input: Identities): Promise<never> {
    if ((err as { code?: string }).code !== '23505') throw err;
    for (const i of identitiesOf(input)) {
      const [owner] = await this.em.fork().execute<{ customer_id: string }[]>('select customer_id from customer_identities where workspace_id = ? and kind = ? and value = ?', [
        workspaceId,
        i.kind,
        i.value,
      ]);
      if (owner) {
        throw new ApiError(409, 'identity_in_use', `${i.kind} '${i.value}' already belongs to customer ${owner.customer_id}; use POST /api/v1/customer/link to merge`, {
          customer_id: owner.customer_id,
        });
      }
    }
    throw err;
  }

  private async load(em: EntityManager, workspaceId: string, id: string): Promise<CustomerView> {
    const [row] = await em.execute<CustomerRow[]>(`${SELECT} where c.id = ? and c.workspace_id = ?`, [id, workspaceId]);
    if (!row) throw notFound(id);
    return view(row);
  }

  get(workspaceId: string, id: string): Promise<CustomerView> {
    return this.load(this.em.fork(), workspaceId, id);
  }

  async list(workspaceId: string, q: Identities & { limit: number; cursor?: string }): Promise<{ customers: CustomerView[]; next_cursor: string | null }> {
    const filters = new Filters('c.workspace_id = ?', workspaceId);
    for (const i of identitiesOf(q)) {
      filters.add('exists (select 1 from customer_identities x where x.customer_id = c.id and x.kind = ? and x.value = ?)', i.kind, i.value);
    }
    const page = await keysetPage<CustomerRow>(this.em.fork(), SELECT, filters, q, { alias: 'c' });
    return { customers: page.rows.map(view), next_cursor: page.next_cursor };
  }

  /** Updates the profile; a changed phone, email or external id replaces that identity. */
  async update(workspaceId: string, id: string, patch: Identities & { name?: string | null; metadata?: Record<string, unknown> }): Promise<CustomerView> {
    try {
      return await this.em.fork().transactional(async (em) => {
        await this.load(em, workspaceId, id);
        const sets: string[] = [];
        const params: unknown[] = [];
        const set = (sql: string, value: unknown) => {
          sets.push(sql);
          params.push(value);
        };
        if (patch.name !== undefined) set('name = ?', patch.name);
        if (patch.metadata !== undefined) set('metadata = ?::jsonb', JSON.stringify(patch.metadata));
        for (const kind of ['phone', 'email', 'external_id'] as const) {
          if (patch[kind] === undefined) continue;
          const value = patch[kind] ? normalise(kind, patch[kind]!) : null;
          set(`${kind} = ?`, value);
          await em.execute('delete from customer_identities where customer_id = ? and kind = ?', [id, kind]);
          if (value) await this.attach(em, workspaceId, id, [{ kind, value }]);
        }
        if (sets.length) await em.execute(`update customers set ${sets.join(', ')}, updated_at = now() where id = ?`, [...params, id]);
        return this.load(em, workspaceId, id);
      });
    } catch (err) {
      return this.identityConflict(workspaceId, err, patch);
    }
  }

  /**
   * A customer for a visitor whose identity is not proven (anonymous or self-asserted):
   * what they claimed is kept as labels in `metadata.unverified`, never as identities, so
   * a claim never reaches, nor merges into, the customer who really holds that identity.
   */
  async createUnverified(workspaceId: string, claimed: Identities): Promise<CustomerView> {
    const unverified = Object.fromEntries(Object.entries(claimed).filter(([k, v]) => ['phone', 'email', 'external_id'].includes(k) && typeof v === 'string' && v.trim()));
    return this.create(workspaceId, { metadata: Object.keys(unverified).length ? { unverified } : {} });
  }

  /**
   * Attaches identities to a customer. Every other customer that held one of them is
   * merged into it (its identities and conversations move over, then it is deleted).
   * Without `customer_id`, the oldest customer holding one of the identities is the
   * target, or a new customer is created.
   */
  async link(workspaceId: string, input: Identities & { customer_id?: string }): Promise<{ customer: CustomerView; merged_customer_ids: string[] }> {
    const ids = identitiesOf(input);
    if (!ids.length) throw new ApiError(400, 'invalid_request', 'body: at least one of phone, email, external_id');
    return this.em.fork().transactional(async (em) => {
      // Serialise links in a workspace: two concurrent merges must not cross.
      await em.execute('select pg_advisory_xact_lock(hashtext(?))', [`customer-link:${workspaceId}`]);
      const owners = await em.execute<{ customer_id: string; created_at: Date }[]>(
        `select distinct i.customer_id, c.created_at from customer_identities i join customers c on c.id = i.customer_id
         where i.workspace_id = ? and (${ids.map(() => '(i.kind = ? and i.value = ?)').join(' or ')})
         order by c.created_at, i.customer_id`,
        [workspaceId, ...ids.flatMap((i) => [i.kind, i.value])],
      );
      let target = input.customer_id;
      if (target) await this.load(em, workspaceId, target);
      else if (owners.length) target = owners[0].customer_id;
      else {
        target = newId('cus');
        await em.execute('insert into customers (id, workspace_id) values (?, ?)', [target, workspaceId]);
      }
      const merged = owners.map((o) => o.customer_id).filter((c) => c !== target);
      for (const other of merged) {
        await em.execute(
          `insert into customer_identities (workspace_id, kind, value, customer_id)
           select workspace_id, kind, value, ? from customer_identities where customer_id = ?
           on conflict (workspace_id, kind, value) do update set customer_id = excluded.customer_id`,
          [target, other],
        );
        await em.execute('update conversations set customer_id = ?, updated_at = now() where customer_id = ?', [target, other]);
        await em.execute('delete from customers where id = ?', [other]);
      }
      for (const i of ids) {
        await em.execute(
          `insert into customer_identities (workspace_id, kind, value, customer_id) values (?, ?, ?, ?)
           on conflict (workspace_id, kind, value) do update set customer_id = excluded.customer_id`,
          [workspaceId, i.kind, i.value, target],
        );
      }
      // The profile's own fields fill in from identities it did not have.
      await em.execute(
        `update customers c set
           phone = coalesce(c.phone, (select value from customer_identities where customer_id = c.id and kind = 'phone' order by created_at limit 1)),
           email = coalesce(c.email, (select value from customer_identities where customer_id = c.id and kind = 'email' order by created_at limit 1)),
           external_id = coalesce(c.external_id, (select value from customer_identities where customer_id = c.id and kind = 'external_id' order by created_at limit 1)),
           updated_at = now()
         where c.id = ?`,
        [target],
      );
      return { customer: await this.load(em, workspaceId, target), merged_customer_ids: merged };
    });
  }
}
