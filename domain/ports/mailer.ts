/** Sends a plain-text mail (the console's invitations and password resets). providers/mail implements it over SMTP. */
export interface Mailer {
  send(message: { to: string; subject: string; text: string }): Promise<void>;
}
