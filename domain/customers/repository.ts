import type { EntityManager } from '@mikro-orm/postgresql';
import { Customer, CustomerIdentity } from '../../db/entities';
import { newId } from '../../lib/ids';
import type { IdentityKind } from './customers';

/**
 * The one data path to `customers` and `customer_identities` for the channels: a send
 * checks its customer, an inbound message or a call finds (or creates) the customer of a
 * phone, the widget finds a visitor's. CustomerService owns the rest. Every method runs
 * on the EntityManager it is given (the caller's transaction, when it is one).
 */
export class CustomerRepository {
  /** Whether the customer exists in the workspace (in the caller's transaction). */
  async customerExists(em: EntityManager, workspaceId: string, id: string): Promise<boolean> {
    return (await em.count(Customer, { id, workspaceId })) > 0;
  }

  /**
   * The customer holding this phone in the workspace, created with it (and `name`, when
   * given) when none does (in the caller's transaction). Two concurrent creations race on
   * the identity's primary key: the loser's customer stays without the identity and the
   * winner's is returned.
   */
  async customerForPhone(em: EntityManager, workspaceId: string, phone: string, opts: { name?: string | null } = {}): Promise<string> {
    return (await this.customersForPhones(em, workspaceId, [{ phone, ...(opts.name !== undefined ? { name: opts.name } : {}) }])).get(phone)!;
  }

  /**
   * `customerForPhone` for several phones at once (the msgapp webhook's batch), in one read when every phone has its
   * customer and three more statements when some do not: their customers, their identities (a race lost as above),
   * the owners read back. A phone given twice is one customer, named by its first entry.
   */
  async customersForPhones(em: EntityManager, workspaceId: string, entries: Array<{ phone: string; name?: string | null }>): Promise<Map<string, string>> {
    const phones = [...new Set(entries.map((e) => e.phone))];
    const owners = new Map<string, string>();
    if (!phones.length) return owners;
    const held = await em.find(CustomerIdentity, { workspaceId, kind: 'phone', value: { $in: phones } }, { fields: ['customerId', 'value'] });
    for (const h of held) owners.set(h.value, h.customerId);
    // In key order: two batches creating the same phones wait on each other in one order only, never in a cycle.
    const missing = phones.filter((phone) => !owners.has(phone)).sort();
    if (!missing.length) return owners;
    const first = new Map<string, { phone: string; name?: string | null }>();
    for (const e of entries) if (!first.has(e.phone)) first.set(e.phone, e);
    const created = missing.map((phone) => {
      const e = first.get(phone)!;
      return { id: newId('cus'), workspaceId, phone, ...(e.name !== undefined ? { name: e.name } : {}) };
    });
    // One insert per shape (with or without a name): the query builder takes the columns of the first row.
    for (const rows of [created.filter((c) => 'name' in c), created.filter((c) => !('name' in c))]) {
      if (rows.length) await em.createQueryBuilder(Customer).insert(rows);
    }
    await em
      .createQueryBuilder(CustomerIdentity)
      .insert(created.map((c) => ({ workspaceId, kind: 'phone' as const, value: c.phone, customerId: c.id })))
      .onConflict(['workspaceId', 'kind', 'value'])
      .ignore();
    const won = await em.find(CustomerIdentity, { workspaceId, kind: 'phone', value: { $in: missing } }, { refresh: true, fields: ['customerId', 'value'] });
    for (const w of won) owners.set(w.value, w.customerId);
    return owners;
  }

  /** The customer holding this identity (stored normalised) in the workspace; null when none does. */
  async customerWithIdentity(em: EntityManager, workspaceId: string, kind: IdentityKind, value: string): Promise<string | null> {
    const held = await em.findOne(CustomerIdentity, { workspaceId, kind, value }, { fields: ['customerId'] });
    return held?.customerId ?? null;
  }
}
