import { z } from 'zod';

export const TotpStatus = z
  .object({
    enrolled: z.boolean().meta({ description: 'Whether the signed-in user signs in with a code from an authenticator app' }),
    required: z.boolean().meta({ description: 'Whether the workspace requires a second factor of everyone signing in with a password' }),
  })
  .meta({ id: 'ConsoleTotpStatus' });

export const TotpEnrolment = z
  .object({
    secret: z.string().meta({ description: 'The secret as text (base32), shown once: type it into the app if it cannot read the URI', example: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP' }),
    otpauth_uri: z.string().meta({ description: 'otpauth://totp/… (SHA-1, 6 digits, 30 s), for an authenticator app', example: 'otpauth://totp/Concierge:ada%40example.com?issuer=Concierge&secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&algorithm=SHA1&digits=6&period=30' }),
  })
  .meta({ id: 'ConsoleTotpEnrolment' });

export const TotpCodeBody = z.object({ code: z.string().min(6).max(16).meta({ example: '123456' }) });
export const TotpPolicyBody = z.object({ required: z.boolean() });
export const TotpPolicy = z.object({ required: z.boolean() }).meta({ id: 'ConsoleTotpPolicy' });
