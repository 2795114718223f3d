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
    const held = await em.findOne(CustomerIdentity, { workspaceId, kind: 'phone', value: phone }, { fields: ['customerId'] });
    if (held) return held.customerId;
    const id = newId('cus');
    await em.insert(Customer, { id, workspaceId, phone, ...(opts.name !== undefined ? { name: opts.name } : {}) });
    await em.createQueryBuilder(CustomerIdentity).insert({ workspaceId, kind: 'phone', value: phone, customerId: id }).onConflict(['workspaceId', 'kind', 'value']).ignore();
    const owner = await em.findOneOrFail(CustomerIdentity, { workspaceId, kind: 'phone', value: phone }, { refresh: true });
    return owner.customerId;
  }

  /** The customer holding this identity (stored normalised) in the workspace; null when none does. */
  async customerWithIdentity(em: EntityManager, workspaceId: string, kind: IdentityKind, value: string): Promise<string | null> {
    const held = await em.findOne(CustomerIdentity, { workspaceId, kind, value }, { fields: ['customerId'] });
    return held?.customerId ?? null;
  }
}
