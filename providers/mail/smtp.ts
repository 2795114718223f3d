import { createTransport, type Transporter } from 'nodemailer';
import type { Mailer } from '../../domain/ports/mailer';

/** Plain-text mail over SMTP (SMTP_URL: smtp://user:pass@host:587, or smtps:// for TLS from the first byte). */
export class SmtpMailer implements Mailer {
  private readonly transport: Transporter;

  constructor(
    url: string,
    private readonly from: string,
  ) {
    this.transport = createTransport(url);
  }

  async send(message: { to: string; subject: string; text: string }): Promise<void> {
    await this.transport.sendMail({ from: this.from, to: message.to, subject: message.subject, text: message.text });
  }

  close(): void {
    this.transport.close();
  }
}
