import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Repositories } from '../repositories';
import { Customer, CustomerIdentity, type ICustomer } from '../../db/entities';
import { DomainError } from '../errors';
import { newId } from '../../lib/ids';
import { keysetFind } from '../../db/pagination';

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

type Identity = { kind: IdentityKind; value: string };

function view(r: ICustomer, identities: Identity[]): CustomerView {
  return {
    id: r.id,
    name: r.name ?? null,
    email: r.email ?? null,
    phone: r.phone ?? null,
    external_id: r.externalId ?? null,
    metadata: r.metadata ?? {},
    identities,
    created_at: new Date(r.createdAt).toISOString(),
    updated_at: new Date(r.updatedAt).toISOString(),
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

const notFound = (id: string) => new DomainError('not_found', `No customer with id '${id}' in this workspace`);

/**
 * Customers and their identities (phone, email, external id). An identity names at
 * most one customer per workspace (primary key), so the customer a message comes from
 * is never ambiguous; `link` attaches identities and merges the customers they
 * belonged to.
 */
export class CustomerService {
  constructor(
    private readonly em: EntityManager,
    private readonly repos: Pick<Repositories, 'conversations'>,
  ) {}

  async create(workspaceId: string, input: Identities & { name?: string | null; metadata?: Record<string, unknown> }): Promise<CustomerView> {
    try {
      return await this.em.fork().transactional(async (em) => {
        const id = newId('cus');
        const ids = identitiesOf(input);
        await em.insert(Customer, {
          id,
          workspaceId,
          name: input.name ?? null,
          email: ids.find((i) => i.kind === 'email')?.value ?? null,
          phone: input.phone ?? null,
          externalId: input.external_id ?? null,
          metadata: input.metadata ?? {},
        });
        await this.attach(em, workspaceId, id, ids);
        return this.load(em, workspaceId, id);
      });
    } catch (err) {
      return this.identityConflict(workspaceId, err, input);
    }
  }

  private async attach(em: EntityManager, workspaceId: string, customerId: string, ids: Identity[]): Promise<void> {
    for (const i of ids) await em.insert(CustomerIdentity, { workspaceId, kind: i.kind, value: i.value, customerId });
  }

  private async identityConflict(workspaceId: string, err: unknown, input: Identities): Promise<never> {
    if ((err as { code?: string }).code !== '23505') throw err;
    for (const i of identitiesOf(input)) {
      const owner = await this.em.fork().findOne(CustomerIdentity, { workspaceId, kind: i.kind, value: i.value });
      if (owner) {
        throw new DomainError('identity_in_use', `${i.kind} '${i.value}' already belongs to customer ${owner.customerId}; use POST /api/v1/customer/link to merge`, {
          customer_id: owner.customerId,
        });
      }
    }
    throw err;
  }

  /** The identities of these customers, each list ordered by kind and value. */
  private async identities(em: EntityManager, customerIds: string[]): Promise<Map<string, Identity[]>> {
    const out = new Map<string, Identity[]>(customerIds.map((id) => [id, []]));
    if (!customerIds.length) return out;
    const rows = await em.find(CustomerIdentity, { customerId: { $in: customerIds } }, { orderBy: { kind: 'asc', value: 'asc' }, refresh: true });
    for (const r of rows) out.get(r.customerId)?.push({ kind: r.kind, value: r.value });
    return out;
  }

  /** Read fresh (refresh): within a transaction the rows may have been changed by native updates since they were loaded. */
  private async load(em: EntityManager, workspaceId: string, id: string): Promise<CustomerView> {
    const row = await em.findOne(Customer, { id, workspaceId }, { refresh: true });
    if (!row) throw notFound(id);
    return view(row, (await this.identities(em, [id])).get(id)!);
  }

  get(workspaceId: string, id: string): Promise<CustomerView> {
    return this.load(this.em.fork(), workspaceId, id);
  }

  async list(workspaceId: string, q: Identities & { limit: number; cursor?: string }): Promise<{ customers: CustomerView[]; next_cursor: string | null }> {
    const em = this.em.fork();
    // An identity names at most one customer: each filter narrows the list to that customer.
    const owners: string[] = [];
    for (const i of identitiesOf(q)) {
      const owner = await em.findOne(CustomerIdentity, { workspaceId, kind: i.kind, value: i.value });
      if (!owner) return { customers: [], next_cursor: null };
      owners.push(owner.customerId);
    }
    if (new Set(owners).size > 1) return { customers: [], next_cursor: null };
    const page = await keysetFind(em, Customer, owners.length ? { workspaceId, id: owners[0] } : { workspaceId }, q);
    const identities = await this.identities(em, page.rows.map((r) => r.id));
    return { customers: page.rows.map((r) => view(r, identities.get(r.id)!)), next_cursor: page.next_cursor };
  }

  /** Updates the profile; a changed phone, email or external id replaces that identity. */
  async update(workspaceId: string, id: string, patch: Identities & { name?: string | null; metadata?: Record<string, unknown> }): Promise<CustomerView> {
    try {
      return await this.em.fork().transactional(async (em) => {
        await this.load(em, workspaceId, id);
        const changes: Partial<Pick<ICustomer, 'name' | 'metadata' | 'phone' | 'email' | 'externalId'>> = {};
        if (patch.name !== undefined) changes.name = patch.name;
        if (patch.metadata !== undefined) changes.metadata = patch.metadata;
        for (const kind of ['phone', 'email', 'external_id'] as const) {
          if (patch[kind] === undefined) continue;
          const value = patch[kind] ? normalise(kind, patch[kind]!) : null;
          changes[kind === 'external_id' ? 'externalId' : kind] = value;
          await em.nativeDelete(CustomerIdentity, { customerId: id, kind });
          if (value) await this.attach(em, workspaceId, id, [{ kind, value }]);
        }
        if (Object.keys(changes).length) await em.nativeUpdate(Customer, { id }, { ...changes, updatedAt: new Date() });
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
  /**
   * An email a visitor left for the team (the widget's "leave your email" while nobody is available): kept as a label
   * in `metadata.unverified.email`, never as an identity, so it can neither merge customers nor open anyone's history.
   */
  async noteUnverifiedEmail(workspaceId: string, customerId: string, email: string): Promise<void> {
    await this.em.fork().transactional(async (em) => {
      const row = await em.findOne(Customer, { id: customerId, workspaceId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!row) throw new DomainError('not_found', `No customer with id '${customerId}'`);
      const metadata = row.metadata ?? {};
      const unverified = typeof metadata.unverified === 'object' && metadata.unverified ? (metadata.unverified as Record<string, unknown>) : {};
      row.metadata = { ...metadata, unverified: { ...unverified, email } };
      row.updatedAt = new Date();
      await em.flush();
    });
  }

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
    if (!ids.length) throw new DomainError('invalid_request', 'body: at least one of phone, email, external_id');
    return this.em.fork().transactional(async (em) => {
      // Serialise links in a workspace: two concurrent merges must not cross.
      // raw SQL: advisory locks have no ORM form.
      // eslint-disable-next-line no-restricted-syntax
      await em.execute('select pg_advisory_xact_lock(hashtext(?))', [`customer-link:${workspaceId}`]);
      const held = await em.find(CustomerIdentity, { workspaceId, $or: ids.map((i) => ({ kind: i.kind, value: i.value })) });
      const owners = held.length
        ? await em.find(Customer, { id: { $in: [...new Set(held.map((h) => h.customerId))] } }, { orderBy: { createdAt: 'asc', id: 'asc' }, fields: ['id'] })
        : [];
      let target = input.customer_id;
      if (target) await this.load(em, workspaceId, target);
      else if (owners.length) target = owners[0].id;
      else {
        target = newId('cus');
        await em.insert(Customer, { id: target, workspaceId });
      }
      const merged = owners.map((o) => o.id).filter((c) => c !== target);
      for (const other of merged) {
        await em.nativeUpdate(CustomerIdentity, { customerId: other }, { customerId: target });
        await this.repos.conversations.moveCustomerConversations(em, other, target);
        await em.nativeDelete(Customer, { id: other });
      }
      for (const i of ids) {
        await em.upsert(
          CustomerIdentity,
          { workspaceId, kind: i.kind, value: i.value, customerId: target },
          { onConflictFields: ['workspaceId', 'kind', 'value'], onConflictAction: 'merge', onConflictMergeFields: ['customerId'] },
        );
      }
      // The profile's own fields fill in from identities it did not have (the oldest of each kind).
      const customer = await em.findOneOrFail(Customer, { id: target }, { refresh: true });
      const own = await em.find(CustomerIdentity, { customerId: target }, { orderBy: { createdAt: 'asc', value: 'asc' }, refresh: true });
      const first = (kind: IdentityKind) => own.find((i) => i.kind === kind)?.value ?? null;
      await em.nativeUpdate(
        Customer,
        { id: target },
        {
          phone: customer.phone ?? first('phone'),
          email: customer.email ?? first('email'),
          externalId: customer.externalId ?? first('external_id'),
          updatedAt: new Date(),
        },
      );
      return { customer: await this.load(em, workspaceId, target), merged_customer_ids: merged };
    });
  }
}
