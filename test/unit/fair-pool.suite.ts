import { FairPool } from '../../lib/fair-pool';
import { WidgetWorkQuota, WIDGET_WORK_LIMITS } from '../../lib/ratelimit/work-quota';
import { ApiError } from '../../api/http-errors';
import { answerOf } from '../support/http-error';

/** A job that runs until released, recording when it started. */
function gate() {
  let open!: () => void;
  const done = new Promise<void>((r) => (open = r));
  return { done, open };
}

describe('FairPool (the extraction pool: fair across workspaces, anonymous work in a bounded lane)', () => {
  it("runs workspace B's job before workspace A's 10th job when A queued ten first", async () => {
    const pool = new FairPool(1);
    const started: string[] = [];
    const gates = new Map<string, ReturnType<typeof gate>>();
    const job = (ws: string, n: number) => {
      const g = gate();
      gates.set(`${ws}${n}`, g);
      return pool.run({ workspaceId: ws }, async () => {
        started.push(`${ws}${n}`);
        await g.done;
      });
    };
    const all: Promise<void>[] = [];
    for (let n = 1; n <= 10; n++) all.push(job('A', n));
    all.push(job('B', 1));
    // Let the jobs run one at a time, in the order the pool starts them.
    for (let i = 0; i < 11; i++) {
      await new Promise((r) => setImmediate(r));
      gates.get(started[i])!.open();
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(all);
    expect(started.indexOf('B1')).toBeLessThan(started.indexOf('A10'));
    // A1 held the slot when B queued; B's turn comes right after it.
    expect(started.slice(0, 3)).toEqual(['A1', 'B1', 'A2']);
  });

  it('lets anonymous jobs hold at most their lane, so an indexing job of another workspace starts at once', async () => {
    const pool = new FairPool(2, 1);
    const anon = [gate(), gate(), gate()];
    const running: string[] = [];
    const jobs = anon.map((g, i) =>
      pool.run({ workspaceId: `w${i}`, anonymous: true }, async () => {
        running.push(`anon${i}`);
        await g.done;
      }),
    );
    await new Promise((r) => setImmediate(r));
    expect(running).toEqual(['anon0']);
    expect(pool.running).toBe(1);
    const indexed = pool.run({ workspaceId: 'B' }, async () => 'indexed');
    await expect(indexed).resolves.toBe('indexed');
    expect(running).toEqual(['anon0']);
    for (const g of anon) g.open();
    await Promise.all(jobs);
    expect(running).toEqual(['anon0', 'anon1', 'anon2']);
  });

  it('a workspace whose anonymous job waits for the lane still gets its own indexing job started', async () => {
    const pool = new FairPool(2, 1);
    const g = gate();
    const first = pool.run({ workspaceId: 'A', anonymous: true }, () => g.done);
    const order: string[] = [];
    const second = pool.run({ workspaceId: 'A', anonymous: true }, async () => void order.push('anon'));
    const third = pool.run({ workspaceId: 'A' }, async () => void order.push('index'));
    await third;
    expect(order).toEqual(['index']);
    g.open();
    await Promise.all([first, second]);
    expect(order).toEqual(['index', 'anon']);
  });

  it('never runs more jobs than it has slots', async () => {
    const pool = new FairPool(2, 1);
    let now = 0;
    let peak = 0;
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        pool.run({ workspaceId: `w${i % 3}`, anonymous: i % 2 === 0 }, async () => {
          peak = Math.max(peak, ++now);
          await new Promise((r) => setTimeout(r, 2));
          now--;
        }),
      ),
    );
    expect(peak).toBe(2);
    expect(pool.queued).toBe(0);
  });
});

describe('WidgetWorkQuota (anonymous uploads and voice notes per site and client address)', () => {
  const refusal = async (p: Promise<unknown>) => {
    const err = await answerOf(p);
    expect(err).toBeInstanceOf(ApiError);
    return err;
  };

  it('refuses a third file in flight from one address with 429 rate_limited and Retry-After, and admits it once one is released', async () => {
    const q = await WidgetWorkQuota.create({ kind: 'memory' }, { ...WIDGET_WORK_LIMITS, inFlightPerAddress: 2 });
    const a = await q.admit('site_1', '10.0.0.1');
    await q.admit('site_1', '10.0.0.1');
    const err = await refusal(q.admit('site_1', '10.0.0.1'));
    expect(err.status).toBe(429);
    expect(err.code).toBe('rate_limited');
    expect(Number(err.headers['Retry-After'])).toBeGreaterThan(0);
    // Another address of the same site is not affected.
    await q.admit('site_1', '10.0.0.2');
    await a.release();
    await a.release();
    await q.admit('site_1', '10.0.0.1');
    await expect(answerOf(q.admit('site_1', '10.0.0.1'))).resolves.toMatchObject({ status: 429 });
  });

  it('caps files in flight per site across addresses, and a refused request holds no place', async () => {
    const q = await WidgetWorkQuota.create({ kind: 'memory' }, { ...WIDGET_WORK_LIMITS, inFlightPerSite: 2 });
    const first = await q.admit('site_1', '10.0.0.1');
    await q.admit('site_1', '10.0.0.2');
    await expect(answerOf(q.admit('site_1', '10.0.0.3'))).resolves.toMatchObject({ status: 429, code: 'rate_limited' });
    await expect(answerOf(q.admit('site_1', '10.0.0.3'))).resolves.toMatchObject({ status: 429 });
    await first.release();
    // Its address's place was given back when the site refused it: it is admitted now.
    const again = await q.admit('site_1', '10.0.0.3');
    await again.release();
    await q.admit('site_2', '10.0.0.1');
  });

  it('spends an hourly count per address and byte budgets per address and per site', async () => {
    const q = await WidgetWorkQuota.create({ kind: 'memory' }, { ...WIDGET_WORK_LIMITS, perAddressPerHour: 2, bytesPerAddressPerHour: 1000, bytesPerSitePerDay: 1500 });
    await (await q.admit('s', 'a')).release();
    await (await q.admit('s', 'a')).release();
    const err = await refusal(q.admit('s', 'a'));
    expect(err.status).toBe(429);
    // The hour's window: Retry-After is what is left of it.
    expect(Number(err.headers['Retry-After'])).toBeGreaterThan(3000);
    await q.chargeBytes('s', 'b', 900);
    await expect(answerOf(q.chargeBytes('s', 'b', 200))).resolves.toMatchObject({ status: 429, code: 'rate_limited' });
    await q.chargeBytes('s', 'c', 600);
    // The site's day is at 1500: any more is refused, whichever address sends it.
    await expect(answerOf(q.chargeBytes('s', 'd', 1))).resolves.toMatchObject({ status: 429 });
  });
});
