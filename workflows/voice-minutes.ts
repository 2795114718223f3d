import { proxyActivities, setCurrentDetails, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { presets } from './presets';

const { payVoiceMinute, endVoiceSession } = proxyActivities<Activities>(presets.dbWrite);

/**
 * The further minutes of a voice session or call (the first was paid when it was
 * reserved), paid from the credit ledger as each begins while the media runs. Out of
 * credits: the media is asked to end politely (the agent says goodbye) and billing stops.
 * A minute the ledger could not record (the activity failed after its retries) is owed,
 * not free: it is paid first at the next period, and `settle` tries once more when the
 * media has ended. Each minute has its own ledger reference, so none is paid twice.
 */
export function billVoiceMinutes(o: { workspaceId: string; id: string; periodMs: number; label: string; mediaDone: () => boolean }): { settle(): Promise<void> } {
  const owed: number[] = [];
  /** Pays the owed minutes in order: false when the ledger refused one (out of credits), null when it could not be reached. */
  const payOwed = async (): Promise<boolean | null> => {
    while (owed.length) {
      const paid = await payVoiceMinute(o.workspaceId, o.id, owed[0]).catch(() => null);
      if (paid !== true) return paid;
      owed.shift();
    }
    return true;
  };
  void (async () => {
    for (let minute = 2; ; minute++) {
      await sleep(o.periodMs);
      if (o.mediaDone()) return;
      owed.push(minute);
      const paid = await payOwed();
      if (paid === false && !o.mediaDone()) {
        setCurrentDetails(`${o.label}: out of credits at minute ${owed[0]}; the agent says goodbye.`);
        await endVoiceSession(o.id, 'out_of_credits');
        return;
      }
    }
  })().catch(() => undefined); // cancelled with the workflow: the media's own end is what counts
  return {
    async settle() {
      if (owed.length) await payOwed();
    },
  };
}
