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
    return (await this.customersForPhones(em, workspaceId, [{ phone, name: opts.name }])).get(phone)!;
  }

  /**
   * `customerForPhone` for several phones at once (the msgapp webhook's batch), in one statement: the phones' owners
   * read, and for the others a customer and its identity created. A creation that loses a race (another transaction
   * took the phone meanwhile) reads the winner back in a second statement. A phone given twice is one customer,
   * named by its first entry.
   */
  async customersForPhones(em: EntityManager, workspaceId: string, entries: Array<{ phone: string; name?: string | null }>): Promise<Map<string, string>> {
    const first = new Map<string, { phone: string; name?: string | null }>();
    for (const e of entries) if (!first.has(e.phone)) first.set(e.phone, e);
    const owners = new Map<string, string>();
    if (!first.size) return owners;
    // In key order: two batches creating the same phones wait on each other in one order only, never in a cycle.
    const given = [...first.values()].sort((a, b) => (a.phone < b.phone ? -1 : a.phone > b.phone ? 1 : 0)).map((e) => ({ phone: e.phone, name: e.name ?? null, id: newId('cus') }));
    // raw SQL: the read, the customers' and the identities' inserts in one round trip (rows as one JSON document); the
    // ORM sends each on its own.
    // eslint-disable-next-line no-restricted-syntax
    const rows = await em.execute<{ value: string; customer_id: string }[]>(
      `with given as (select * from jsonb_to_recordset(?::jsonb) as g (phone text, name text, id text)),
       held as (select value, customer_id from customer_identities where workspace_id = ? and kind = 'phone' and value in (select phone from given)),
       fresh as (select * from given where phone not in (select value from held)),
       customers_made as (insert into customers (id, workspace_id, phone, name) select id, ?, phone, name from fresh),
       identities_made as (
         insert into customer_identities (workspace_id, kind, value, customer_id) select ?, 'phone', phone, id from fresh order by phone
         on conflict (workspace_id, kind, value) do nothing returning value, customer_id
       )
       select value, customer_id from held union all select value, customer_id from identities_made`,
      [JSON.stringify(given), workspaceId, workspaceId, workspaceId],
    );
    for (const r of rows) owners.set(r.value, r.customer_id);
    const lost = given.map((g) => g.phone).filter((phone) => !owners.has(phone));
    if (lost.length) {
      const won = await em.find(CustomerIdentity, { workspaceId, kind: 'phone', value: { $in: lost } }, { refresh: true, fields: ['customerId', 'value'] });
      for (const w of won) owners.set(w.value, w.customerId);
    }
    return owners;
  }

  /** The customer holding this identity (stored normalised) in the workspace; null when none does. */
  async customerWithIdentity(em: EntityManager, workspaceId: string, kind: IdentityKind, value: string): Promise<string | null> {
    const held = await em.findOne(CustomerIdentity, { workspaceId, kind, value }, { fields: ['customerId'] });
    return held?.customerId ?? null;
  }
}
