import { randomBytes } from 'node:crypto';

/** Every public id is a prefix plus 24 random lowercase hex characters (96 bits). */
export type IdPrefix = 'ws' | 'key' | 'fld' | 'doc' | 'file' | 'psg' | 'cred' | 'site' | 'msg' | 'whk' | 'evt' | 'dlv' | 'conv' | 'cus' | 'agt' | 'upl' | 'req' | 'trn';

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBytes(12).toString('hex')}`;
}
