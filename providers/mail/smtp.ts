import type { Transporter } from 'nodemailer';
import type { Mailer } from '../../domain/ports/mailer';

/** Plain-text mail over SMTP (SMTP_URL: smtp://user:pass@host:587, or smtps:// for TLS from the first byte). */
export class SmtpMailer implements Mailer {
  /** nodemailer loads with the first mail, not with the app. */
  private transport?: Promise<Transporter>;

  constructor(
    private readonly url: string,
    private readonly from: string,
  ) {}

  async send(message: { to: string; subject: string; text: string }): Promise<void> {
    this.transport ??= import('nodemailer').then((m) => m.createTransport(this.url));
    await (await this.transport).sendMail({ from: this.from, to: message.to, subject: message.subject, text: message.text });
  }

  close(): void {
    void this.transport?.then((t) => t.close());
  }
}
