import { ApiError, asApiError } from '../../api/http-errors';
import { checkDestination, DEFAULT_DIAL_OUT_POLICY, normaliseCountries, normaliseTypes, type DialOutPolicy } from '../../domain/voice/destinations';

/** The policy's refusal for `raw`: [status, code, message], or null when it would be dialled. */
function refusal(raw: string, policy: DialOutPolicy = DEFAULT_DIAL_OUT_POLICY): [number, string, string] | null {
  try {
    checkDestination(raw, policy);
    return null;
  } catch (thrown) {
    const err = asApiError(thrown);
    if (!(err instanceof ApiError)) throw err;
    return [err.status, err.code, err.message];
  }
}

describe('checkDestination: the dial-out destination policy (libphonenumber-js/max number types)', () => {
  test.each([
    ['+19002550123', 'premium-rate'],
    ['+33899123456', 'premium-rate'],
    ['+448451234567', 'premium-rate'],
    ['+33810123456', 'shared-cost'],
    ['+34901123456', 'shared-cost'],
    ['+870773111111', 'non-geographic global network'],
    ['+80012345678', 'non-geographic global network'],
    ['+447012345678', 'personal-number number, a type this workspace does not allow'],
    ['+15550000000', 'not a valid international number'],
    ['not a number', 'not a valid international number'],
  ])('%s is refused by default: 400 invalid_phone_number saying "%s"', (raw, why) => {
    const r = refusal(raw);
    expect(r?.slice(0, 2)).toEqual([400, 'invalid_phone_number']);
    expect(r?.[2]).toContain(why);
  });

  test.each([
    ['+442079460000', 'GB', 'FIXED_LINE', 'fixed'],
    ['+33612345678', 'FR', 'MOBILE', 'mobile'],
    ['+1 202 555 0143', 'US', 'FIXED_LINE_OR_MOBILE', 'mobile'],
    ['+18005550123', 'US', 'TOLL_FREE', 'other'],
  ])('%s is dialled by default: %s, %s, priced as %s', (raw, country, type, cls) => {
    expect(checkDestination(raw, DEFAULT_DIAL_OUT_POLICY)).toEqual({ phone: raw.replace(/ /g, ''), country, type, class: cls });
  });

  test('a workspace narrows countries and types; a North American number passes when either fixed lines or mobiles are allowed', () => {
    const gbOnly: DialOutPolicy = { countries: ['GB'], types: DEFAULT_DIAL_OUT_POLICY.types };
    expect(refusal('+33612345678', gbOnly)?.[2]).toContain('is in FR, a country this workspace does not allow for dial-out (allowed: GB)');
    expect(refusal('+442079460000', gbOnly)).toBeNull();
    const mobileOnly: DialOutPolicy = { countries: null, types: ['mobile'] };
    expect(refusal('+442079460000', mobileOnly)?.[2]).toContain('a fixed-line number, a type this workspace does not allow');
    expect(refusal('+12025550143', mobileOnly)).toBeNull();
    expect(refusal('+12025550143', { countries: null, types: ['toll_free'] })?.[1]).toBe('invalid_phone_number');
    // Allowing personal numbers is the workspace's choice; premium-rate is never one it can make.
    expect(refusal('+447012345678', { countries: null, types: ['personal_number'] })).toBeNull();
    expect(() => normaliseTypes(['premium_rate'])).toThrow(/never dialled/);
    expect(() => normaliseTypes(['shared-cost'])).toThrow(/not one of/);
    expect(normaliseTypes(['Mobile', 'fixed-line'])).toEqual(['mobile', 'fixed_line']);
    expect(normaliseCountries(['us', ' gb', 'US'])).toEqual(['GB', 'US']);
    expect(() => normaliseCountries(['USA'])).toThrow(/ISO 3166-1 alpha-2/);
  });
});
