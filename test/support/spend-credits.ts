// A process of its own that spends credits: `node --import tsx test/support/spend-credits.ts WS N PREFIX`
// (DATABASE_URL in the environment). N spends of 1 credit at once; prints {"spent": x, "refused": y}.
import { CreditService } from '../../domain/billing/credits';
import { openDatabase } from '../../db/orm';

async function main() {
  const [ws, n, prefix] = process.argv.slice(2);
  const orm = await openDatabase(process.env.DATABASE_URL!);
  const credits = new CreditService(orm.em, { currency: 'USD', msgapp_message: 0, structured_extraction_page: 0, llm_1k_tokens: 0, voice_minute_credits: 1 });
  const outcomes = await Promise.all(
    Array.from({ length: Number(n) }, (_, i) =>
      credits.spend(ws, 1, 'voice minute', `${prefix}:${i}`).then(
        () => 'spent',
        (err: { code?: string }) => (err.code === 'out_of_credits' ? 'refused' : `error: ${String(err)}`),
      ),
    ),
  );
  await orm.close(true);
  process.stdout.write(JSON.stringify({ spent: outcomes.filter((o) => o === 'spent').length, refused: outcomes.filter((o) => o === 'refused').length, errors: outcomes.filter((o) => o.startsWith('error')) }));
}

void main();
