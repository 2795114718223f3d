import type { EntityManager } from '@mikro-orm/postgresql';
// The `max` metadata: the default (`min`) has no number-type patterns, so getType() would be undefined for every number.
import { parsePhoneNumberFromString, type NumberType } from 'libphonenumber-js/max';
import { WorkspaceRepository } from '../workspaces/repository';
import { DomainError } from '../errors';

/**
 * Number types a workspace may allow for dial-out (libphonenumber's types, lower case).
 * Premium-rate, shared-cost and unknown types are not among them: they are never dialled
 * (docs/decisions.md "Widget": dial-out destinations), whatever a workspace says.
 */
export const DIALABLE_TYPES = ['fixed_line', 'mobile', 'toll_free', 'voip', 'uan', 'personal_number', 'pager', 'voicemail'] as const;
export type DialableType = (typeof DIALABLE_TYPES)[number];

/**
 * Allowed unless a workspace narrows or widens the list. Personal numbers (UK 070…),
 * pagers and voicemail access numbers are left out: they forward or bill like premium
 * lines and no support agent needs to call one.
 */
export const DEFAULT_DIALABLE_TYPES: readonly DialableType[] = ['fixed_line', 'mobile', 'toll_free', 'voip', 'uan'];

/** A workspace's dial-out destinations: `countries` null = every country (ISO 3166-1 alpha-2). */
export interface DialOutPolicy {
  countries: string[] | null;
  types: readonly DialableType[];
}

export const DEFAULT_DIAL_OUT_POLICY: DialOutPolicy = { countries: null, types: DEFAULT_DIALABLE_TYPES };

/** What a call to a destination is priced as (BILLING_CREDITS_PER_CALL_MINUTE_*). */
export type DestinationClass = 'fixed' | 'mobile' | 'other';

export interface Destination {
  /** E.164. */
  phone: string;
  country: string;
  type: NonNullable<NumberType>;
  class: DestinationClass;
}

const refuse = (why: string): never => {
  throw new DomainError('invalid_phone_number', `phone number: ${why}`);
};

/** A type libphonenumber gives, as the policy's name for it; FIXED_LINE_OR_MOBILE (US, CA, …) counts as either. */
function allowedType(type: NonNullable<NumberType>, allowed: readonly DialableType[]): boolean {
  if (type === 'FIXED_LINE_OR_MOBILE') return allowed.includes('fixed_line') || allowed.includes('mobile');
  return allowed.includes(type.toLowerCase() as DialableType);
}

/**
 * The price class of a number type. FIXED_LINE_OR_MOBILE is priced as mobile: North
 * American numbers do not say which they are, and carriers charge the dearer rate.
 */
export function destinationClass(type: NonNullable<NumberType>): DestinationClass {
  if (type === 'FIXED_LINE') return 'fixed';
  if (type === 'MOBILE' || type === 'FIXED_LINE_OR_MOBILE') return 'mobile';
  return 'other';
}

/**
 * The destination policy every dial-out obeys (POST /widget/call, POST /api/v1/outbound
 * voice, and any later transfer (SIP REFER) or keypad-dialled number: call this, never
 * `parsePhoneNumber` alone). 400 `invalid_phone_number` naming why: not a number; a
 * non-geographic global network number (+800, +870 Inmarsat and the other satellite
 * codes, +881, +882, +883…: libphonenumber has no satellite type, so the whole class is
 * refused); premium-rate, shared-cost or of no known type; of a type or country the
 * workspace does not allow.
 */
export function checkDestination(raw: string, policy: DialOutPolicy): Destination {
  const parsed = parsePhoneNumberFromString(raw.trim());
  if (!parsed?.isValid()) return refuse('not a valid international number (E.164, e.g. +14155550123)');
  const phone = parsed.format('E.164');
  if (!parsed.country || parsed.isNonGeographic()) {
    return refuse(`+${parsed.countryCallingCode} is a non-geographic global network (satellite, international premium or shared service), which is never dialled`);
  }
  const type = parsed.getType();
  if (!type) return refuse(`${phone} is of no known number type, which is never dialled`);
  if (type === 'PREMIUM_RATE') return refuse(`${phone} is a premium-rate number, which is never dialled`);
  if (type === 'SHARED_COST') return refuse(`${phone} is a shared-cost number, which is never dialled`);
  if (!allowedType(type, policy.types)) return refuse(`${phone} is a ${type.toLowerCase().replace(/_/g, '-')} number, a type this workspace does not allow for dial-out`);
  if (policy.countries && !policy.countries.includes(parsed.country)) {
    return refuse(`${phone} is in ${parsed.country}, a country this workspace does not allow for dial-out (allowed: ${policy.countries.join(', ') || 'none'})`);
  }
  return { phone, country: parsed.country, type, class: destinationClass(type) };
}

/** A country list as stored: upper-case ISO 3166-1 alpha-2 codes libphonenumber knows, deduplicated. */
export function normaliseCountries(list: string[]): string[] {
  const out = [...new Set(list.map((c) => c.trim().toUpperCase()).filter(Boolean))];
  for (const c of out) {
    if (!/^[A-Z]{2}$/.test(c)) throw new DomainError('invalid_request', `dial_out_countries: '${c}' is not an ISO 3166-1 alpha-2 country code`);
  }
  return out.sort();
}

export function normaliseTypes(list: string[]): DialableType[] {
  const out = [...new Set(list.map((t) => t.trim().toLowerCase().replace(/-/g, '_')).filter(Boolean))];
  for (const t of out) {
    if (!(DIALABLE_TYPES as readonly string[]).includes(t)) {
      throw new DomainError('invalid_request', `dial_out_number_types: '${t}' is not one of ${DIALABLE_TYPES.join(', ')} (premium-rate, shared-cost and unknown numbers are never dialled)`);
    }
  }
  return out as DialableType[];
}

/**
 * A workspace's dial-out policy, kept in its row's dial-out columns (`dial_out_countries`,
 * `dial_out_number_types`, read and written through WorkspaceRepository): calls read the
 * policy, the admin CLI sets it.
 */
export class DialOutPolicyRepository {
  constructor(
    /** Default: the one repository of workspaces (tests build the policy on its own). */
    private readonly workspaces: Pick<WorkspaceRepository, 'dialOutColumns' | 'setDialOutColumns'> = new WorkspaceRepository(),
  ) {}

  /** The workspace's dial-out policy (its row's `dial_out_countries` / `dial_out_number_types`; null columns: the defaults). */
  async dialOutPolicy(em: EntityManager, workspaceId: string): Promise<DialOutPolicy> {
    const ws = await this.workspaces.dialOutColumns(em.fork(), workspaceId);
    return {
      countries: ws?.countries ?? null,
      types: (ws?.types as DialableType[] | null | undefined) ?? DEFAULT_DIALABLE_TYPES,
    };
  }

  /**
   * Sets a workspace's dial-out policy (admin CLI `workspace set-dial-out`). `countries`
   * null: every country; `types` null: the defaults. 404 when there is no such workspace.
   */
  async setDialOutPolicy(em: EntityManager, workspaceId: string, p: { countries?: string[] | null; types?: string[] | null }): Promise<DialOutPolicy & { workspace_id: string }> {
    const fork = em.fork();
    const ws = await this.workspaces.dialOutColumns(fork, workspaceId);
    if (!ws) throw new DomainError('not_found', `No workspace with id '${workspaceId}'`);
    const countries = p.countries === undefined ? ws.countries : p.countries === null ? null : normaliseCountries(p.countries);
    const types = p.types === undefined ? ws.types : p.types === null ? null : normaliseTypes(p.types);
    await this.workspaces.setDialOutColumns(fork, workspaceId, {
      ...(p.countries !== undefined ? { countries } : {}),
      ...(p.types !== undefined ? { types } : {}),
    });
    return { workspace_id: workspaceId, countries: countries ?? null, types: (types as DialableType[] | null) ?? DEFAULT_DIALABLE_TYPES };
  }
}
