import { createHash, randomBytes } from 'node:crypto';

/** Every public id is a prefix plus 24 random lowercase hex characters (96 bits). */
export type IdPrefix = 'ws' | 'key' | 'fld' | 'doc' | 'file' | 'psg' | 'cred' | 'site' | 'msg' | 'whk' | 'evt' | 'dlv' | 'conv' | 'cus' | 'agt' | 'upl' | 'req' | 'trn' | 'tkt' | 'tkm' | 'ext' | 'cle' | 'mcp' | 'vs' | 'call' | 'rec' | 'hold' | 'fbk' | 'usr' | 'ses' | 'lnk' | 'aud' | 'idn' | 'note' | 'cnr';

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBytes(12).toString('hex')}`;
}

/**
 * An id of the same shape derived from a seed: the same seed always gives the same id,
 * for what must be named before it exists, the same way on every retry (an agent's reply
 * to a customer's message, for one).
 */
export function derivedId(prefix: IdPrefix, seed: string): string {
  return `${prefix}_${createHash('sha256').update(seed).digest('hex').slice(0, 24)}`;
}
