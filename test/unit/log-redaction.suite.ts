import { redactUrl } from '../../api/logging';

describe('request URLs in logs', () => {
  test('credential-like query values are redacted, however the name is spelled; the rest stays as sent', () => {
    expect(redactUrl('/api/public/widget/history?conversation_id=conv_1&limit=20')).toBe('/api/public/widget/history?conversation_id=[redacted]&limit=20');
    expect(redactUrl('/w?USER_HASH=ab&External_Id=u1&after=msg_1')).toBe('/w?USER_HASH=[redacted]&External_Id=[redacted]&after=msg_1');
    expect(redactUrl('/webhooks/msgapp?hub.mode=subscribe&hub%2Everify_token=s3cret&hub.challenge=1')).toBe('/webhooks/msgapp?hub.mode=subscribe&hub%2Everify_token=[redacted]&hub.challenge=1');
    expect(redactUrl('/x?conversation_id&conversation_id=a&conversation_id=b')).toBe('/x?conversation_id=[redacted]&conversation_id=[redacted]&conversation_id=[redacted]');
    expect(redactUrl('/x?%E0%A4%A=1&token=t')).toBe('/x?%E0%A4%A=1&token=[redacted]');
  });

  test('a signed media link keeps only its route', () => {
    expect(redactUrl('/api/media/eyJhIjoxfQ.abcdef')).toBe('/api/media/[redacted]');
    expect(redactUrl('/api/media/eyJhIjoxfQ.abcdef/?download=1')).toBe('/api/media/[redacted]?download=1');
    expect(redactUrl('/API/Media/eyJhIjoxfQ.abcdef')).toBe('/API/Media/[redacted]');
  });

  test('URLs without secrets are unchanged', () => {
    for (const url of ['/api/v1/kb/folders', '/api/v1/agents?limit=5&cursor=abc', '/', '/api/v1/x?']) expect(redactUrl(url)).toBe(url);
  });
});
