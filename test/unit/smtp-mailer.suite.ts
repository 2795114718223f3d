import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { SmtpMailer } from '../../providers/mail/smtp';

/** The least of an SMTP server (RFC 5321, no extensions, no TLS): what it was told to deliver. */
function fakeSmtp(): Promise<{ url: string; received: Array<{ from: string; to: string[]; data: string }>; close(): Promise<void> }> {
  const received: Array<{ from: string; to: string[]; data: string }> = [];
  const server = net.createServer((socket) => {
    let buffer = '';
    let inData = false;
    let current = { from: '', to: [] as string[], data: '' };
    socket.write('220 fake.smtp ESMTP\r\n');
    socket.on('data', (chunk) => {
      buffer += chunk.toString('utf8');
      for (;;) {
        if (inData) {
          const end = buffer.indexOf('\r\n.\r\n');
          if (end < 0) return;
          current.data = buffer.slice(0, end);
          buffer = buffer.slice(end + 5);
          inData = false;
          received.push(current);
          current = { from: '', to: [], data: '' };
          socket.write('250 queued\r\n');
          continue;
        }
        const eol = buffer.indexOf('\r\n');
        if (eol < 0) return;
        const line = buffer.slice(0, eol);
        buffer = buffer.slice(eol + 2);
        const verb = line.slice(0, 4).toUpperCase();
        if (verb === 'MAIL') current.from = line;
        if (verb === 'RCPT') current.to.push(line);
        if (verb === 'DATA') inData = true;
        if (verb === 'QUIT') socket.end('221 bye\r\n');
        else socket.write(verb === 'DATA' ? '354 go on\r\n' : verb === 'EHLO' || verb === 'HELO' ? '250 fake.smtp\r\n' : '250 ok\r\n');
      }
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ url: `smtp://127.0.0.1:${(server.address() as AddressInfo).port}`, received, close: () => new Promise((r) => server.close(() => r())) }),
    ),
  );
}

test('SmtpMailer delivers a plain-text mail to the SMTP server of SMTP_URL, from SMTP_FROM', async () => {
  const smtp = await fakeSmtp();
  const mailer = new SmtpMailer(smtp.url, 'Concierge <no-reply@concierge.test>');
  try {
    await mailer.send({ to: 'ada@example.com', subject: 'You are invited', text: 'Open https://console.example.test/console/link#token=abc' });
    expect(smtp.received).toHaveLength(1);
    const [mail] = smtp.received;
    expect(mail.from).toContain('no-reply@concierge.test');
    expect(mail.to.join(' ')).toContain('ada@example.com');
    expect(mail.data).toMatch(/^Subject: You are invited$/m);
    expect(mail.data).toContain('https://console.example.test/console/link#token=abc');
  } finally {
    mailer.close();
    await smtp.close();
  }
});
