import { maskPersonalDetails } from '../../domain/chat/masking';

describe('masking personal details in a reply', () => {
  test('card numbers that pass Luhn keep their last four; other digit runs (order numbers) stay', () => {
    const r = maskPersonalDetails('Your card 4111 1111 1111 1111 was charged for order 1234567890123 (ref 4111-1111-1111-1112).');
    expect(r.text).toBe('Your card •••• 1111 was charged for order 1234567890123 (ref 4111-1111-1111-1112).');
    expect(r.masked.card).toBe(1);
    expect(maskPersonalDetails('Card 5555-5555-5555-4444 on file').text).toBe('Card •••• 4444 on file');
  });

  test('IBANs with valid check digits keep country and last four; invalid ones stay', () => {
    expect(maskPersonalDetails('Pay to DE89 3704 0044 0532 0130 00 please').text).toBe('Pay to DE•• •••• 3000 please');
    expect(maskPersonalDetails('GB82WEST12345698765432').text).toBe('GB•• •••• 5432');
    expect(maskPersonalDetails('DE00 3704 0044 0532 0130 00').text).toBe('DE00 3704 0044 0532 0130 00');
  });

  test('e-mail addresses and international phone numbers are replaced', () => {
    const r = maskPersonalDetails('Write to jane.doe+orders@example.co.uk or call +1 415 555 2671 / +44 20 7946 0958.');
    expect(r.text).toBe('Write to [email address hidden] or call [phone number hidden] / [phone number hidden].');
    expect(r.masked).toEqual({ card: 0, iban: 0, email: 1, phone: 2 });
  });

  test('text without personal details is returned as it was', () => {
    const text = 'Returns are accepted within 30 days. Order #10023 shipped on 2026-11-20.';
    expect(maskPersonalDetails(text)).toEqual({ text, masked: { card: 0, iban: 0, email: 0, phone: 0 } });
  });
});
